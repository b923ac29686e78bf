"""Semantic segmentation models (torchvision's ``models.segmentation``): FCN, DeepLabV3, Lite R-ASPP."""
from ember.vision.models.segmentation.deeplabv3 import *  # noqa: F401,F403
from ember.vision.models.segmentation.fcn import *  # noqa: F401,F403
from ember.vision.models.segmentation.lraspp import *  # noqa: F401,F403
