"""Transform classes with torchvision's names and arguments (``torchvision.transforms``).

They take PIL images, NumPy ``HxW``/``HxWxC`` images and ember tensors ``[..., C, H, W]`` and return
the kind they got (``ToTensor`` / ``PILToTensor`` convert to tensors). Random transforms make
torchvision's draws (``torch.rand(1)``, ``torch.randint``, ``uniform_``, ``randperm``, Python's ``random``
for RandomOrder/RandomChoice) on ember's generator (a loader worker's per-batch generator, else the
default one), so a seed augments as torchvision does.

Example:
    >>> import numpy as np
    >>> import ember.vision.transforms as T
    >>> t = T.Compose([T.Resize(32), T.CenterCrop(28), T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    >>> t(np.zeros((48, 64, 3), dtype=np.uint8)).shape
    ember.Size([3, 28, 28])
"""
from __future__ import annotations

import math
import numbers
import random
from typing import Any, Callable, Sequence

import numpy as np

from ember.data.transforms import Compose, Lambda, Normalize  # noqa: F401  (same semantics as torchvision's)
from ember.data._transform_module import TransformModule
from ember.vision.transforms import _draws as draws, functional as F
from ember.vision.transforms._image import image_size
from ember.vision.transforms.functional import InterpolationMode

__all__ = ["Compose", "ToTensor", "PILToTensor", "ToPILImage", "ConvertImageDtype", "Normalize", "Resize",
           "CenterCrop", "RandomCrop", "RandomResizedCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "Pad",
           "ColorJitter", "Grayscale", "RandomGrayscale", "RandomApply", "RandomChoice", "RandomOrder", "Lambda",
           "InterpolationMode", "RandomTransforms"]


def _size_pair(size: Any, name: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    size = tuple(size)
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(f"{name}: please provide only two dimensions (h, w) for size, got {size}")
    return int(size[0]), int(size[1])


class _Transform:
    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and k != "training")
        return f"{type(self).__name__}({args})"


class Normalize(Normalize, TransformModule):  # noqa: F811  (ember.data's Normalize, an nn.Module as torchvision's)
    __doc__ = Normalize.__doc__


class _ModuleTransform(_Transform, TransformModule):
    """The transforms torchvision writes as ``nn.Module`` subclasses (ember/data/_transform_module.py)."""


class ToTensor(_Transform):
    """PIL / NumPy ``HxWxC`` uint8 image -> float32 ``CxHxW`` tensor in [0, 1]."""

    def __call__(self, pic: Any) -> Any:
        return F.to_tensor(pic)


class PILToTensor(_Transform):
    """PIL / NumPy image -> ``CxHxW`` tensor of the same dtype."""

    def __call__(self, pic: Any) -> Any:
        return F.pil_to_tensor(pic)


class ToPILImage(_Transform):
    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode

    def __call__(self, pic: Any) -> Any:
        return F.to_pil_image(pic, self.mode)


class ConvertImageDtype(_ModuleTransform):
    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def __call__(self, image: Any) -> Any:
        return F.convert_image_dtype(image, self.dtype)


class Resize(_ModuleTransform):
    """Resize to ``size`` ((h, w), or an int: the shorter edge, keeping the aspect ratio)."""

    def __init__(self, size: Any, interpolation: Any = InterpolationMode.BILINEAR, max_size: int | None = None,
                 antialias: bool | None = True) -> None:
        if not isinstance(size, (int, Sequence)) or (isinstance(size, Sequence) and len(size) not in (1, 2)):
            raise TypeError(f"Resize: size should be int or sequence of length 1 or 2, got {size!r}")
        self.size = size
        self.max_size = max_size
        self.interpolation = interpolation
        self.antialias = antialias

    def __call__(self, img: Any) -> Any:
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)


class CenterCrop(_ModuleTransform):
    def __init__(self, size: Any) -> None:
        self.size = _size_pair(size, "CenterCrop")

    def __call__(self, img: Any) -> Any:
        return F.center_crop(img, self.size)


class Pad(_ModuleTransform):
    def __init__(self, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> None:
        self.padding = padding
        self.fill = fill
        self.padding_mode = padding_mode

    def __call__(self, img: Any) -> Any:
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class RandomCrop(_ModuleTransform):
    """Pad (``padding``, and up to ``size`` if ``pad_if_needed``), then crop ``size`` at a random place."""

    def __init__(self, size: Any, padding: Any = None, pad_if_needed: bool = False, fill: Any = 0,
                 padding_mode: str = "constant") -> None:
        self.size = _size_pair(size, "RandomCrop")
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode

    @staticmethod
    def get_params(img: Any, output_size: tuple[int, int]) -> tuple[int, int, int, int]:
        h, w = image_size(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        top = draws.randint(0, h - th + 1)
        return top, draws.randint(0, w - tw + 1), th, tw

    def __call__(self, img: Any) -> Any:
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        h, w = image_size(img)
        if self.pad_if_needed and w < self.size[1]:
            img = F.pad(img, [self.size[1] - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = F.pad(img, [0, self.size[0] - h], self.fill, self.padding_mode)
        top, left, th, tw = self.get_params(img, self.size)
        return F.crop(img, top, left, th, tw)


class RandomResizedCrop(_ModuleTransform):
    """Crop a random area (``scale`` of the image, aspect ratio in ``ratio``, log-uniform) and resize it."""

    def __init__(self, size: Any, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
                 interpolation: Any = InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        self.size = _size_pair(size, "RandomResizedCrop")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("RandomResizedCrop: scale and ratio should be of kind (min, max)")
        self.scale = scale
        self.ratio = ratio
        self.interpolation = interpolation
        self.antialias = antialias

    @staticmethod
    def get_params(img: Any, scale: Sequence[float], ratio: Sequence[float]) -> tuple[int, int, int, int]:
        """torchvision's rule: 10 tries at a random area and log-uniform ratio, else a centre crop clamped
        to the ratio range."""
        height, width = image_size(img)
        area = height * width
        for _ in range(10):
            target_area = area * draws.uniform(scale[0], scale[1])
            aspect_ratio = draws.log_uniform(ratio)
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                top = draws.randint(0, height - h + 1)
                return top, draws.randint(0, width - w + 1), h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img: Any) -> Any:
        top, left, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, top, left, h, w, list(self.size), self.interpolation, antialias=self.antialias)


class RandomHorizontalFlip(_ModuleTransform):
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Any) -> Any:
        return F.hflip(img) if draws.below(self.p) else img


class RandomVerticalFlip(_ModuleTransform):
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Any) -> Any:
        return F.vflip(img) if draws.below(self.p) else img


class ColorJitter(_ModuleTransform):
    """Random brightness, contrast, saturation and hue, applied in a random order (torchvision's ranges:
    a number ``b`` means ``[max(0, 1 - b), 1 + b]``, hue ``h`` means ``[-h, h]``)."""

    def __init__(self, brightness: Any = 0, contrast: Any = 0, saturation: Any = 0, hue: Any = 0) -> None:
        self.brightness = self._check(brightness, "brightness")
        self.contrast = self._check(contrast, "contrast")
        self.saturation = self._check(saturation, "saturation")
        self.hue = self._check(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def _check(value: Any, name: str, center: float = 1.0, bound: tuple[float, float] = (0, float("inf")),
               clip_first_on_zero: bool = True) -> tuple[float, float] | None:
        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"{name} values should be between {bound}, but got {value}.")
        return None if value[0] == value[1] == center else (value[0], value[1])

    @staticmethod
    def get_params(brightness: Any, contrast: Any, saturation: Any, hue: Any) -> tuple:
        order = draws.randperm(4)
        factors = [None if r is None else draws.uniform(r[0], r[1]) for r in (brightness, contrast, saturation, hue)]
        return (order, *factors)

    def __call__(self, img: Any) -> Any:
        order, b, c, s, h = self.get_params(self.brightness, self.contrast, self.saturation, self.hue)
        ops = [(F.adjust_brightness, b), (F.adjust_contrast, c), (F.adjust_saturation, s), (F.adjust_hue, h)]
        for index in order:
            fn, factor = ops[index]
            if factor is not None:
                img = fn(img, factor)
        return img


class Grayscale(_ModuleTransform):
    def __init__(self, num_output_channels: int = 1) -> None:
        self.num_output_channels = num_output_channels

    def __call__(self, img: Any) -> Any:
        return F.rgb_to_grayscale(img, self.num_output_channels)


class RandomGrayscale(_ModuleTransform):
    def __init__(self, p: float = 0.1) -> None:
        self.p = p

    def __call__(self, img: Any) -> Any:
        channels = F.get_dimensions(img)[0]
        return F.rgb_to_grayscale(img, channels) if draws.below(self.p) else img


class RandomTransforms(_Transform):
    """Base of the transforms that pick among a list of transforms (``RandomChoice``, ``RandomOrder``)."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        if not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence")
        self.transforms = transforms

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class RandomApply(_ModuleTransform):
    def __init__(self, transforms: Sequence[Callable], p: float = 0.5) -> None:
        self.transforms = list(transforms)
        self.p = p

    def __call__(self, img: Any) -> Any:
        if np.float32(self.p) < np.float32(draws.rand()):  # torchvision: `if self.p < torch.rand(1)`
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomChoice(RandomTransforms):
    def __init__(self, transforms: Sequence[Callable], p: Sequence[float] | None = None) -> None:
        super().__init__(list(transforms))
        self.p = p  # weights as given: random.choices normalizes them (as torchvision passes them)

    def __call__(self, img: Any) -> Any:
        return random.choices(self.transforms, weights=self.p)[0](img)  # Python's random, as torchvision


class RandomOrder(RandomTransforms):
    def __init__(self, transforms: Sequence[Callable]) -> None:
        super().__init__(list(transforms))

    def __call__(self, img: Any) -> Any:
        order = list(range(len(self.transforms)))
        random.shuffle(order)  # Python's random module, as torchvision
        for i in order:
            img = self.transforms[i](img)
        return img


# The augmentation transforms (rotation, affine, perspective, erasing, blur, ...) and the automatic augmentation
# policies live in their own modules; they are part of this namespace, as in torchvision.transforms.
from ember.vision.transforms._augment import *  # noqa: E402,F401,F403
from ember.vision.transforms._augment import __all__ as _augment_names  # noqa: E402
from ember.vision.transforms.autoaugment import *  # noqa: E402,F401,F403
from ember.vision.transforms.autoaugment import __all__ as _autoaugment_names  # noqa: E402

__all__ += _augment_names + _autoaugment_names
