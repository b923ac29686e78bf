"""The preprocessing each pretrained checkpoint expects (torchvision's ``transforms._presets``): ``nn.Module``s, as
torchvision's, so ``nn.Sequential(weights.transforms(), model)`` works; ``describe()`` says what each does."""
from __future__ import annotations

from typing import Any, Sequence

from ember.vision.transforms import functional as F
from ember.vision.transforms.functional import InterpolationMode
import ember
from ember import nn


# torchvision's wording (``describe()`` texts are shown in its documentation; programs print them)
_IMAGES = ("Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image ``torch.Tensor`` "
           "objects. ")


def _scaled_and_normalized(img: Any, mean: Sequence[float], std: Sequence[float]) -> Any:
    """A PIL/NumPy/tensor image as a float32 tensor in [0, 1], normalized per channel (the presets' last steps)."""
    if not isinstance(img, ember.Tensor):
        img = F.pil_to_tensor(img)
    return F.normalize(F.convert_image_dtype(img, ember.float32), mean=mean, std=std)


class ImageClassification(nn.Module):
    """Resize the shorter edge to ``resize_size``, centre-crop ``crop_size``, scale to [0, 1], normalize.

    Takes a PIL image, a NumPy ``HxWxC`` image or a tensor ``[..., C, H, W]`` (uint8 or float) and
    returns a float32 tensor.

    Example:
        >>> import numpy as np
        >>> from ember.vision.models import ResNet18_Weights
        >>> preprocess = ResNet18_Weights.DEFAULT.transforms()
        >>> preprocess(np.zeros((300, 400, 3), dtype=np.uint8)).shape
        ember.Size([3, 224, 224])
    """

    def __init__(self, *, crop_size: int, resize_size: int = 256, mean: Sequence[float] = (0.485, 0.456, 0.406),
                 std: Sequence[float] = (0.229, 0.224, 0.225),
                 interpolation: InterpolationMode = InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.crop_size = [crop_size]
        self.resize_size = [resize_size]
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation
        self.antialias = antialias

    def forward(self, img: Any) -> Any:
        img = F.resize(img, self.resize_size, interpolation=self.interpolation, antialias=self.antialias)
        img = F.center_crop(img, self.crop_size)
        return _scaled_and_normalized(img, self.mean, self.std)

    def __repr__(self) -> str:
        return (f"ImageClassification(\n    crop_size={self.crop_size}\n    resize_size={self.resize_size}\n"
                f"    mean={self.mean}\n    std={self.std}\n    interpolation={self.interpolation}\n)")

    def describe(self) -> str:
        """torchvision's one-paragraph account of the preset (its documentation tables show it)."""
        return (_IMAGES + f"The images are resized to ``resize_size={self.resize_size}`` using ``interpolation="
                f"{self.interpolation}``, followed by a central crop of ``crop_size={self.crop_size}``. Finally the "
                f"values are first rescaled to ``[0.0, 1.0]`` and then normalized using ``mean={self.mean}`` and "
                f"``std={self.std}``.")



class SemanticSegmentation(nn.Module):
    """Resize the shorter edge to ``resize_size`` (unless None), scale to [0, 1], normalize: what the
    segmentation checkpoints expect (no crop: the prediction covers the whole image).

    Example:
        >>> import numpy as np
        >>> preset = SemanticSegmentation(resize_size=520)
        >>> preset(np.zeros((300, 400, 3), dtype=np.uint8)).shape
        ember.Size([3, 520, 693])
    """

    def __init__(self, *, resize_size: int | None, mean: Sequence[float] = (0.485, 0.456, 0.406),
                 std: Sequence[float] = (0.229, 0.224, 0.225),
                 interpolation: InterpolationMode = InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        super().__init__()
        self.resize_size = [resize_size] if resize_size is not None else None
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation
        self.antialias = antialias

    def forward(self, img: Any) -> Any:
        if self.resize_size is not None:
            img = F.resize(img, self.resize_size, interpolation=self.interpolation, antialias=self.antialias)
        return _scaled_and_normalized(img, self.mean, self.std)

    def __repr__(self) -> str:
        return (f"SemanticSegmentation(\n    resize_size={self.resize_size}\n    mean={self.mean}\n    std={self.std}\n"
                f"    interpolation={self.interpolation}\n)")

    def describe(self) -> str:
        """torchvision's one-paragraph account of the preset (its documentation tables show it)."""
        return (_IMAGES + f"The images are resized to ``resize_size={self.resize_size}`` using ``interpolation="
                f"{self.interpolation}``. Finally the values are first rescaled to ``[0.0, 1.0]`` and then normalized "
                f"using ``mean={self.mean}`` and ``std={self.std}``.")



class ObjectDetection(nn.Module):
    """What the detection checkpoints expect: the image as a float32 tensor in [0, 1]; no resize or
    normalization (the detector's own transform does both).

    Example:
        >>> import numpy as np
        >>> ObjectDetection()(np.full((4, 5, 3), 255, dtype=np.uint8)).max().item()
        1.0
    """

    def forward(self, img: Any) -> Any:
        if not isinstance(img, ember.Tensor):
            img = F.pil_to_tensor(img)
        return F.convert_image_dtype(img, ember.float32)

    def __repr__(self) -> str:
        return "ObjectDetection()"

    def describe(self) -> str:
        """torchvision's one-paragraph account of the preset (its documentation tables show it)."""
        return _IMAGES + "The images are rescaled to ``[0.0, 1.0]``."



class VideoClassification(nn.Module):
    """What the video checkpoints expect: each frame resized to ``resize_size`` (bilinear, no antialiasing, as
    torchvision hard-codes), centre-cropped to ``crop_size``, scaled to [0, 1] and normalized; ``(T, C, H, W)``
    or ``(N, T, C, H, W)`` in, ``(C, T, h, w)`` or ``(N, C, T, h, w)`` out.

    Example:
        >>> import ember
        >>> preset = VideoClassification(crop_size=(112, 112), resize_size=(128, 171))
        >>> preset(ember.zeros(4, 3, 120, 160, dtype=ember.uint8)).shape
        ember.Size([3, 4, 112, 112])
    """

    def __init__(self, *, crop_size: Sequence[int], resize_size: Sequence[int],
                 mean: Sequence[float] = (0.43216, 0.394666, 0.37645), std: Sequence[float] = (0.22803, 0.22145, 0.216989),
                 interpolation: InterpolationMode = InterpolationMode.BILINEAR) -> None:
        super().__init__()
        self.crop_size = list(crop_size)
        self.resize_size = list(resize_size)
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation

    def forward(self, vid: Any) -> Any:
        single = vid.ndim < 5
        if single:
            vid = vid.unsqueeze(dim=0)
        n, t, c, h, w = vid.shape
        frames = F.resize(vid.reshape(-1, c, h, w), self.resize_size, interpolation=self.interpolation,
                          antialias=False)
        frames = F.normalize(F.convert_image_dtype(F.center_crop(frames, self.crop_size), ember.float32),
                             mean=self.mean, std=self.std)
        out = frames.reshape(n, t, c, *self.crop_size).permute(0, 2, 1, 3, 4)
        return out.squeeze(dim=0) if single else out

    def __repr__(self) -> str:
        return (f"VideoClassification(\n    crop_size={self.crop_size}\n    resize_size={self.resize_size}\n"
                f"    mean={self.mean}\n    std={self.std}\n    interpolation={self.interpolation}\n)")

    def describe(self) -> str:
        """torchvision's one-paragraph account of the preset (its documentation tables show it)."""
        return ("Accepts batched ``(B, T, C, H, W)`` and single ``(T, C, H, W)`` video frame ``torch.Tensor`` objects. "
                f"The frames are resized to ``resize_size={self.resize_size}`` using ``interpolation="
                f"{self.interpolation}``, followed by a central crop of ``crop_size={self.crop_size}``. Finally the "
                f"values are first rescaled to ``[0.0, 1.0]`` and then normalized using ``mean={self.mean}`` and "
                f"``std={self.std}``. Finally the output dimensions are permuted to ``(..., C, T, H, W)`` tensors.")



class OpticalFlow(nn.Module):
    """What the RAFT checkpoints expect: both images as float32 tensors mapped from [0, 1] to [-1, 1]
    (normalized by mean 0.5, std 0.5), contiguous; no resize. Called on the pair: ``img1, img2 = preset(a, b)``.

    Example:
        >>> import ember
        >>> one, two = OpticalFlow()(ember.full((3, 2, 2), 255, dtype=ember.uint8), ember.zeros(3, 2, 2))
        >>> one.max().item(), two.min().item()
        (1.0, -1.0)
    """

    def forward(self, img1: Any, img2: Any) -> tuple[Any, Any]:
        half = [0.5, 0.5, 0.5]
        return (_scaled_and_normalized(img1, half, half).contiguous(),
                _scaled_and_normalized(img2, half, half).contiguous())

    def __repr__(self) -> str:
        return "OpticalFlow()"

    def describe(self) -> str:
        """torchvision's one-paragraph account of the preset (its documentation tables show it)."""
        return _IMAGES + "The images are rescaled to ``[-1.0, 1.0]``."
