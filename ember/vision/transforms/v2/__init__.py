"""``torchvision.transforms.v2``: transforms that take whole samples (an image with its masks, boxes and
labels) and move every part together; ``tv_tensors`` say what each tensor holds.

Example:
    >>> import ember
    >>> from ember.vision.transforms import v2
    >>> t = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(24), v2.RandomHorizontalFlip(),
    ...                 v2.ToDtype(ember.float32, scale=True), v2.Normalize([0.5] * 3, [0.5] * 3)])
    >>> import numpy as np
    >>> t(np.zeros((32, 40, 3), dtype=np.uint8)).shape
    ember.Size([3, 24, 24])
"""
from ember.vision.transforms.autoaugment import AutoAugmentPolicy  # noqa: F401
from ember.vision.transforms.functional import InterpolationMode  # noqa: F401
from ember.vision.transforms.v2 import functional  # noqa: F401
from ember.vision.transforms.v2._transform import (  # noqa: F401
    Transform, check_type, get_bounding_boxes, has_all, has_any, query_chw, query_size)
from ember.vision.transforms.v2._transforms import (  # noqa: F401
    AugMix, AutoAugment, CenterCrop, ClampBoundingBoxes, ColorJitter, Compose, ConvertBoundingBoxFormat,
    ConvertImageDtype, CutMix, GaussianBlur, Grayscale, Identity, Lambda, MixUp, Normalize, PILToTensor, RandAugment,
    RandomAdjustSharpness, RandomAffine, RandomApply, RandomAutocontrast, RandomChannelPermutation, RandomChoice,
    RandomCrop, RandomEqualize, RandomErasing, RandomGrayscale, RandomHorizontalFlip, RandomInvert, RandomOrder,
    RandomPhotometricDistort, RandomPosterize, RandomResizedCrop, RandomRotation, RandomSolarize, RandomVerticalFlip,
    RandomZoomOut, Resize, SanitizeBoundingBoxes, ToDtype, ToImage, ToPILImage, ToPureTensor, TrivialAugmentWide)
