"""The ``transforms.v2`` classes: containers, conversions, geometry (on images, masks and boxes alike),
colour, automatic augmentation, erasing and the batch mixers MixUp / CutMix.

Each draws its random parameters once per call (``make_params``) and applies them to every image, mask and
box set in the sample, as torchvision's v2 does. Random draws come from ember's data streams.

Example:
    >>> import ember
    >>> from ember.vision import tv_tensors
    >>> from ember.vision.transforms import v2
    >>> img = tv_tensors.Image(ember.zeros(3, 40, 60, dtype=ember.uint8))
    >>> boxes = tv_tensors.BoundingBoxes([[10, 10, 30, 20]], format="XYXY", canvas_size=(40, 60))
    >>> out_img, out_boxes = v2.Resize((20, 30))(img, boxes)
    >>> out_img.shape, out_boxes.tolist(), out_boxes.canvas_size
    (ember.Size([3, 20, 30]), [[5, 5, 15, 10]], (20, 30))
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember import random as ember_random
from ember.data.worker import data_generator
from ember.device import to_device
from ember.func.pytree import tree_flatten, tree_unflatten
from ember.tensor import Tensor
from ember.vision import tv_tensors
from ember.vision.transforms import _augment as augment_v1, _draws as draws
from ember.vision.transforms import autoaugment as autoaugment_v1
from ember.vision.transforms import functional as F1
from ember.vision.transforms import transforms as transforms_v1
from ember.vision.transforms._image import is_pil
from ember.vision.transforms.functional import InterpolationMode
from ember.vision.transforms.v2 import functional as F
from ember.vision.transforms.v2._transform import Transform, _RandomApplyTransform, get_bounding_boxes, \
    has_any, query_chw, query_size

_CPU = to_device("cpu")


def _setup_size(size: Any, error_msg: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(error_msg)
    return tuple(size)


def _fill_for(fill: Any, inpt: Any) -> Any:
    """``fill`` may be a dict by input type (with an ``"others"`` default), as in torchvision's v2."""
    if isinstance(fill, dict):
        return fill.get(type(inpt), fill.get("others", 0))
    return fill


# ------------------------------------------------------------------------------------------ containers
class Compose(Transform):
    """Apply transforms in order; several inputs are passed on as several inputs."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        super().__init__()
        if not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence of callables")
        if not transforms:
            raise ValueError("Pass at least one transform")
        self.transforms = transforms

    def forward(self, *inputs: Any) -> Any:
        needs_unpacking = len(inputs) > 1
        outputs = inputs
        for transform in self.transforms:
            outputs = transform(*inputs)
            inputs = outputs if needs_unpacking else (outputs,)
        return outputs

    def extra_repr(self) -> str:
        return "\n".join(f"    {t}" for t in self.transforms)


class RandomApply(Transform):
    """Apply all ``transforms`` with probability ``p``."""

    def __init__(self, transforms: Sequence[Callable], p: float = 0.5) -> None:
        super().__init__()
        if not isinstance(transforms, (Sequence, ember.nn.ModuleList)):
            raise TypeError("Argument transforms should be a sequence of callables or a `nn.ModuleList`")
        if not 0.0 <= p <= 1.0:
            raise ValueError("`p` should be a floating point value in the interval [0.0, 1.0].")
        self.transforms = transforms
        self.p = p

    def forward(self, *inputs: Any) -> Any:
        needs_unpacking = len(inputs) > 1
        if not draws.below(self.p):
            return inputs if needs_unpacking else inputs[0]
        outputs = inputs if needs_unpacking else inputs[0]
        for transform in self.transforms:
            outputs = transform(*inputs)
            inputs = outputs if needs_unpacking else (outputs,)
        return outputs


class RandomChoice(Transform):
    """Apply one of ``transforms``, chosen with weights ``p``."""

    def __init__(self, transforms: Sequence[Callable], p: Sequence[float] | None = None) -> None:
        super().__init__()
        if not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence of callables")
        if p is None:
            p = [1] * len(transforms)
        elif len(p) != len(transforms):
            raise ValueError(f"Length of p doesn't match the number of transforms: {len(p)} != {len(transforms)}")
        self.transforms = transforms
        self.p = [probability / sum(p) for probability in p]

    def forward(self, *inputs: Any) -> Any:
        # torchvision: torch.multinomial(torch.tensor(self.p), 1)
        index = int(ember_random.sample_multinomial(np.asarray([self.p], dtype=np.float32), 1, False, _CPU,
                                                    data_generator())[0, 0])
        return self.transforms[index](*inputs)


class RandomOrder(Transform):
    """Apply ``transforms`` in a random order."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        super().__init__()
        if not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence of callables")
        self.transforms = transforms

    def forward(self, *inputs: Any) -> Any:
        needs_unpacking = len(inputs) > 1
        outputs = inputs if needs_unpacking else inputs[0]
        for index in draws.randperm(len(self.transforms)):
            outputs = self.transforms[int(index)](*inputs)
            inputs = outputs if needs_unpacking else (outputs,)
        return outputs


class Identity(Transform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return inpt


class Lambda(Transform):
    """Apply ``lambd`` to the inputs of ``types`` (default: every input)."""

    def __init__(self, lambd: Callable[[Any], Any], *types: type) -> None:
        super().__init__()
        self.lambd = lambd
        self.types = types or (object,)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return self.lambd(inpt) if isinstance(inpt, self.types) else inpt


# ----------------------------------------------------------------------------------------- conversions
class ToImage(Transform):
    """PIL image, NumPy ``HxWxC`` image or plain tensor -> ``tv_tensors.Image``."""

    _transformed_types = (F.is_pure_tensor, is_pil, np.ndarray)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.to_image(inpt)


class ToPureTensor(Transform):
    """tv_tensors -> plain tensors."""

    _transformed_types = (tv_tensors.TVTensor,)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.to_pure_tensor(inpt)


class PILToTensor(Transform):
    _transformed_types = (is_pil,)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.to_pure_tensor(F.to_image(inpt))


class ToPILImage(Transform):
    _transformed_types = (F.is_pure_tensor, tv_tensors.Image, np.ndarray)

    def __init__(self, mode: str | None = None) -> None:
        super().__init__()
        self.mode = mode

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.to_pil_image(F.to_pure_tensor(inpt), mode=self.mode)


class ToDtype(Transform):
    """Convert dtypes: one dtype (for images and plain tensors) or a dict by input type (``"others"``: the
    default; ``None`` passes through). ``scale=True`` maps value ranges for images (uint8 255 <-> float 1.0)."""

    _transformed_types = (Tensor,)

    def __init__(self, dtype: Any, scale: bool = False) -> None:
        super().__init__()
        if not isinstance(dtype, (dict, ember.dtype)):
            raise ValueError(f"dtype must be a dict or a torch.dtype, got {type(dtype)} instead")
        self.dtype = dtype
        self.scale = scale

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if isinstance(self.dtype, ember.dtype):
            if not F.is_pure_tensor(inpt) and not isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)):
                return inpt
            dtype = self.dtype
        elif type(inpt) in self.dtype:
            dtype = self.dtype[type(inpt)]
        elif "others" in self.dtype:
            dtype = self.dtype["others"]
        else:
            raise ValueError(f"No dtype was specified for type {type(inpt)}. If you only need to convert the dtype of "
                             "images or videos, you can just pass e.g. dtype=torch.float32. If you're passing a dict "
                             'as dtype, you can use "others" as a catch-all key e.g. dtype={tv_tensors.Mask: '
                             'torch.int64, "others": None} to pass-through the rest of the inputs.')
        if dtype is None:
            return inpt
        return F.to_dtype(inpt, dtype=dtype, scale=self.scale)


class ConvertImageDtype(ToDtype):
    """``ToDtype(dtype, scale=True)`` (the v1 name)."""

    def __init__(self, dtype: Any = ember.float32) -> None:
        super().__init__(dtype, scale=True)


class Normalize(Transform):
    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        super().__init__()
        self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def check_inputs(self, flat_inputs: list[Any]) -> None:
        if has_any(flat_inputs, is_pil):
            raise TypeError(f"{type(self).__name__}() does not support PIL images.")

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.normalize(inpt, self.mean, self.std, self.inplace)


class ClampBoundingBoxes(Transform):
    _transformed_types = (tv_tensors.BoundingBoxes,)

    def __init__(self, clamping_mode: Any = "auto") -> None:
        super().__init__()
        self.clamping_mode = clamping_mode

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.clamp_bounding_boxes(inpt, clamping_mode=self.clamping_mode)


class ConvertBoundingBoxFormat(Transform):
    _transformed_types = (tv_tensors.BoundingBoxes,)

    def __init__(self, format: Any) -> None:  # noqa: A002
        super().__init__()
        self.format = format

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.convert_bounding_box_format(inpt, new_format=self.format)


# --------------------------------------------------------------------------------------------- geometry
class RandomHorizontalFlip(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.horizontal_flip(inpt)


class RandomVerticalFlip(_RandomApplyTransform):
    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.vertical_flip(inpt)


class Resize(Transform):
    def __init__(self, size: Any, interpolation: Any = InterpolationMode.BILINEAR, max_size: int | None = None,
                 antialias: bool | None = True) -> None:
        super().__init__()
        if isinstance(size, int):
            size = [size]
        elif isinstance(size, Sequence) and len(size) in (1, 2):
            size = list(size)
        else:
            raise ValueError(f"size can be an integer, a sequence of one or two integers, or None, but got {size} "
                             "instead.")
        self.size, self.interpolation, self.max_size, self.antialias = size, interpolation, max_size, antialias

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.resize(inpt, self.size, self.interpolation, self.max_size, self.antialias)


class CenterCrop(Transform):
    def __init__(self, size: Any) -> None:
        super().__init__()
        self.size = _setup_size(size, error_msg="Please provide only two dimensions (h, w) for size.")

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.center_crop(inpt, self.size)


class RandomResizedCrop(Transform):
    """Crop a random area and aspect ratio (v1's rule, drawn once per sample) and resize it to ``size``."""

    def __init__(self, size: Any, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: Any = InterpolationMode.BILINEAR,
                 antialias: bool | None = True) -> None:
        super().__init__()
        self.size = _setup_size(size, error_msg="Please provide only two dimensions (h, w) for size.")
        if not isinstance(scale, Sequence) or len(scale) != 2:
            raise TypeError("Scale should be a sequence of two floats.")
        if not isinstance(ratio, Sequence) or len(ratio) != 2:
            raise TypeError("Ratio should be a sequence of two floats.")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            warnings.warn("Scale and ratio should be of kind (min, max)")
        self.scale, self.ratio, self.interpolation, self.antialias = scale, ratio, interpolation, antialias

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        top, left, h, w = transforms_v1.RandomResizedCrop.get_params(
            np.empty((height, width), dtype=np.uint8), self.scale, self.ratio)
        return dict(top=top, left=left, height=h, width=w)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.resized_crop(inpt, **params, size=list(self.size), interpolation=self.interpolation,
                              antialias=self.antialias)


class RandomCrop(Transform):
    """Pad (``padding``; ``pad_if_needed`` pads both sides by the shortfall, as v2 does), then crop ``size``."""

    def __init__(self, size: Any, padding: Any = None, pad_if_needed: bool = False, fill: Any = 0,
                 padding_mode: str = "constant") -> None:
        super().__init__()
        self.size = _setup_size(size, error_msg="Please provide only two dimensions (h, w) for size.")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
        if padding is not None:
            left, top, right, bottom = F1._pad_list(padding)
            self.padding = [left, right, top, bottom]  # v2's internal order
        else:
            self.padding = None
        self.pad_if_needed, self.fill, self.padding_mode = pad_if_needed, fill, padding_mode

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        padded_height, padded_width = query_size(flat_inputs)
        pad_left = pad_right = pad_top = pad_bottom = 0
        if self.padding is not None:
            pad_left, pad_right, pad_top, pad_bottom = self.padding
            padded_height += pad_top + pad_bottom
            padded_width += pad_left + pad_right
        cropped_height, cropped_width = self.size
        if self.pad_if_needed:
            if padded_height < cropped_height:
                diff = cropped_height - padded_height
                pad_top, pad_bottom, padded_height = pad_top + diff, pad_bottom + diff, padded_height + 2 * diff
            if padded_width < cropped_width:
                diff = cropped_width - padded_width
                pad_left, pad_right, padded_width = pad_left + diff, pad_right + diff, padded_width + 2 * diff
        if padded_height < cropped_height or padded_width < cropped_width:
            raise ValueError(f"Required crop size {(cropped_height, cropped_width)} is larger than "
                             f"{'padded ' if self.padding is not None else ''}input image size "
                             f"{(padded_height, padded_width)}.")
        top = draws.randint(0, padded_height - cropped_height + 1) if padded_height > cropped_height else 0
        left = draws.randint(0, padded_width - cropped_width + 1) if padded_width > cropped_width else 0
        padding = [pad_left, pad_top, pad_right, pad_bottom]
        return dict(needs_crop=padded_height > cropped_height or padded_width > cropped_width, top=top, left=left,
                    height=cropped_height, width=cropped_width, needs_pad=any(padding), padding=padding)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if params["needs_pad"]:
            inpt = F.pad(inpt, params["padding"], _fill_for(self.fill, inpt), self.padding_mode)
        if params["needs_crop"]:
            inpt = F.crop(inpt, params["top"], params["left"], params["height"], params["width"])
        return inpt


# ----------------------------------------------------------------------------------------------- colour
class ColorJitter(Transform):
    """Brightness, contrast, saturation and hue factors (v1's ranges), drawn once per sample, in random order."""

    def __init__(self, brightness: Any = None, contrast: Any = None, saturation: Any = None, hue: Any = None) -> None:
        super().__init__()
        self._v1 = transforms_v1.ColorJitter(brightness or 0, contrast or 0, saturation or 0, hue or 0)
        self.brightness, self.contrast = self._v1.brightness, self._v1.contrast
        self.saturation, self.hue = self._v1.saturation, self._v1.hue

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        order, b, c, s, h = self._v1.get_params(self.brightness, self.contrast, self.saturation, self.hue)
        return dict(fn_idx=[int(i) for i in order], brightness_factor=b, contrast_factor=c, saturation_factor=s,
                    hue_factor=h)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        ops = [(F.adjust_brightness, params["brightness_factor"]), (F.adjust_contrast, params["contrast_factor"]),
               (F.adjust_saturation, params["saturation_factor"]), (F.adjust_hue, params["hue_factor"])]
        out = F.to_pure_tensor(inpt)
        for index in params["fn_idx"]:
            fn, factor = ops[index]
            if factor is not None:
                out = fn(out, factor)
        return F._rewrap(out, inpt)


class GaussianBlur(Transform):
    def __init__(self, kernel_size: Any, sigma: Any = (0.1, 2.0)) -> None:
        super().__init__()
        self._v1 = augment_v1.GaussianBlur(kernel_size, sigma)
        self.kernel_size, self.sigma = self._v1.kernel_size, self._v1.sigma

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        sigma = augment_v1.GaussianBlur.get_params(self.sigma[0], self.sigma[1])
        return dict(sigma=[sigma, sigma])

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        return F._rewrap(F.gaussian_blur(F.to_pure_tensor(inpt), list(self.kernel_size), params["sigma"]), inpt)


class _ImagesOnly(Transform):
    """A v1 transform applied to the sample's image (one image per sample); masks and boxes are refused rather
    than left unchanged while the image moves."""

    _v1: Any

    def check_inputs(self, flat_inputs: list[Any]) -> None:
        if has_any(flat_inputs, tv_tensors.Mask, tv_tensors.BoundingBoxes):
            raise TypeError(f"{type(self).__name__}: masks and bounding boxes are not supported by ember's v2 version "
                            "yet (only images); apply it before adding them, or use the geometric transforms")

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        return F._rewrap(self._v1(F.to_pure_tensor(inpt)), inpt)


class RandAugment(_ImagesOnly):
    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = InterpolationMode.NEAREST, fill: Any = None) -> None:
        super().__init__()
        self._v1 = autoaugment_v1.RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)
        self.num_ops, self.magnitude, self.num_magnitude_bins = num_ops, magnitude, num_magnitude_bins
        self.interpolation, self.fill = interpolation, fill


class TrivialAugmentWide(_ImagesOnly):
    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = InterpolationMode.NEAREST,
                 fill: Any = None) -> None:
        super().__init__()
        self._v1 = autoaugment_v1.TrivialAugmentWide(num_magnitude_bins, interpolation, fill)
        self.num_magnitude_bins, self.interpolation, self.fill = num_magnitude_bins, interpolation, fill


class AutoAugment(_ImagesOnly):
    def __init__(self, policy: Any = autoaugment_v1.AutoAugmentPolicy.IMAGENET,
                 interpolation: Any = InterpolationMode.NEAREST, fill: Any = None) -> None:
        super().__init__()
        self._v1 = autoaugment_v1.AutoAugment(policy, interpolation, fill)
        self.policy, self.interpolation, self.fill = policy, interpolation, fill


class AugMix(_ImagesOnly):
    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation: Any = InterpolationMode.BILINEAR, fill: Any = None) -> None:
        super().__init__()
        self._v1 = autoaugment_v1.AugMix(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill)
        self.severity, self.mixture_width, self.chain_depth = severity, mixture_width, chain_depth
        self.alpha, self.all_ops, self.interpolation, self.fill = alpha, all_ops, interpolation, fill


# ------------------------------------------------------------------------------------ erasing and mixing
class RandomErasing(_RandomApplyTransform):
    """v1's RandomErasing for images; masks and boxes pass through with a warning, as in torchvision."""

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value: Any = 0.0, inplace: bool = False) -> None:
        super().__init__(p=p)
        augment_v1.RandomErasing(1.0, scale, ratio, value, inplace)  # the same argument checks
        self.scale, self.ratio, self.inplace = scale, ratio, inplace
        if isinstance(value, (int, float)):
            self.value = [float(value)]
        elif isinstance(value, str):
            self.value = None
        else:
            self.value = [float(v) for v in value]

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        img_c, img_h, img_w = query_chw(flat_inputs)
        if self.value is not None and len(self.value) not in (1, img_c):
            raise ValueError(f"If value is a sequence, it should have either a single value or {img_c} (number of "
                             "inpt channels)")
        i, j, h, w, v = augment_v1.RandomErasing.get_params(ember.empty(img_c, img_h, img_w), self.scale, self.ratio,
                                                            self.value)
        return dict(i=i, j=j, h=h, w=w, v=None if (h, w) == (img_h, img_w) else v)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if isinstance(inpt, (tv_tensors.BoundingBoxes, tv_tensors.Mask)):
            warnings.warn(f"{type(self).__name__}() is currently passing through inputs of type "
                          f"tv_tensors.{type(inpt).__name__}. This will likely change in the future.")
            return inpt
        if params["v"] is None:
            return inpt
        return F.erase(inpt, params["i"], params["j"], params["h"], params["w"], params["v"], inplace=self.inplace)


def _default_labels(inputs: Any) -> Any:
    """torchvision's heuristic: the second item of a pair, or the "labels" / "*label*" key of a dict."""
    if isinstance(inputs, (tuple, list)):
        inputs = inputs[1]
    if F.is_pure_tensor(inputs):
        return inputs
    if not isinstance(inputs, dict):
        raise ValueError("When using the default labels_getter, the input passed to forward must be a dictionary or a "
                         f"two-tuple whose second item is a dictionary or a tensor, but got {inputs} instead.")
    for match in (lambda k: k.lower() == "labels", lambda k: "label" in k.lower()):
        for key in inputs:
            if match(key):
                return inputs[key]
    raise ValueError("Could not infer where the labels are in the sample. Try passing a callable as the "
                     "labels_getter parameter?If there are no labels in the sample by design, pass labels_getter=None.")


class _BaseMixUpCutMix(Transform):
    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None, labels_getter: Any = "default") -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.num_classes = num_classes
        if labels_getter == "default":
            self._labels_getter = _default_labels
        elif callable(labels_getter):
            self._labels_getter = labels_getter
        else:
            raise ValueError(f"labels_getter should either be 'default' or a callable, got {labels_getter}.")

    def _lam(self) -> float:
        return float(np.float32(draws.numpy_stream().beta(self.alpha, self.alpha)))  # not torch's Beta sampler

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat_inputs, spec = tree_flatten(inputs)
        needs = self._needs_transform_list(flat_inputs)
        if has_any(flat_inputs, is_pil, tv_tensors.BoundingBoxes, tv_tensors.Mask):
            raise ValueError(f"{type(self).__name__}() does not support PIL images, bounding boxes and masks.")
        labels = self._labels_getter(inputs)
        if not isinstance(labels, Tensor):
            raise ValueError(f"The labels must be a tensor, but got {type(labels)} instead.")
        if labels.ndim not in (1, 2):
            raise ValueError("labels should be index based with shape (batch_size,) or probability based with shape "
                             f"(batch_size, num_classes), but got a tensor of shape {labels.shape} instead.")
        if labels.ndim == 2 and self.num_classes is not None and labels.shape[-1] != self.num_classes:
            raise ValueError("When passing 2D labels, the number of elements in last dimension must match "
                             f"num_classes: {labels.shape[-1]} != {self.num_classes}. You can Leave num_classes to "
                             "None.")
        if labels.ndim == 1 and self.num_classes is None:
            raise ValueError("num_classes must be passed if the labels are index-based (1D)")
        params = {"labels": labels, "batch_size": labels.shape[0],
                  **self.make_params([inpt for inpt, need in zip(flat_inputs, needs) if need])}
        needs[next(i for i, inpt in enumerate(flat_inputs) if inpt is labels)] = True
        outputs = [self.transform(inpt, params) if need else inpt for inpt, need in zip(flat_inputs, needs)]
        return tree_unflatten(outputs, spec)

    def _check_image(self, inpt: Any, batch_size: int) -> None:
        expected = 5 if isinstance(inpt, tv_tensors.Video) else 4
        if inpt.ndim != expected:
            raise ValueError(f"Expected a batched input with {expected} dims, but got {inpt.ndim} dimensions instead.")
        if inpt.shape[0] != batch_size:
            raise ValueError("The batch size of the image or video does not match the batch size of the labels: "
                             f"{inpt.shape[0]} != {batch_size}.")

    def _mixup_label(self, label: Any, lam: float) -> Any:
        if label.ndim == 1:
            label = ember.nn.functional.one_hot(label, num_classes=self.num_classes)
        if not label.is_floating_point():
            label = label.float()
        return label.roll(1, 0) * (1.0 - lam) + label * lam


class MixUp(_BaseMixUpCutMix):
    """Blend each image of a batch with the previous one (``roll(1, 0)``) by ``lam ~ Beta(alpha, alpha)``; the
    labels (one-hot) are blended the same way."""

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return dict(lam=self._lam())

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        lam = params["lam"]
        if inpt is params["labels"]:
            return self._mixup_label(inpt, lam)
        if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or F.is_pure_tensor(inpt):
            self._check_image(inpt, params["batch_size"])
            plain = F.to_pure_tensor(inpt)
            return F._rewrap(plain.roll(1, 0) * (1.0 - lam) + plain * lam, inpt)
        return inpt


class CutMix(_BaseMixUpCutMix):
    """Paste a random box of the previous image of the batch into each image; labels are mixed by the pasted
    area's share."""

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        lam = self._lam()
        height, width = query_size(flat_inputs)
        r_x = draws.randint(0, width)
        r_y = draws.randint(0, height)
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * width), int(r * height)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, width), min(r_y + r_h_half, height)
        return dict(box=(x1, y1, x2, y2), lam_adjusted=float(1.0 - (x2 - x1) * (y2 - y1) / (width * height)))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if inpt is params["labels"]:
            return self._mixup_label(inpt, params["lam_adjusted"])
        if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or F.is_pure_tensor(inpt):
            self._check_image(inpt, params["batch_size"])
            x1, y1, x2, y2 = params["box"]
            plain = F.to_pure_tensor(inpt)
            output = plain.clone()
            output[..., y1:y2, x1:x2] = plain.roll(1, 0)[..., y1:y2, x1:x2]
            return F._rewrap(output, inpt)
        return inpt


# --------------------------------------------------------------------------- rotation and affine (v2 kernels)
class RandomRotation(Transform):
    """Rotate images, masks (nearest) and boxes by one angle drawn uniformly from ``degrees``."""

    def __init__(self, degrees: Any, interpolation: Any = InterpolationMode.NEAREST, expand: bool = False,
                 center: Sequence[float] | None = None, fill: Any = 0) -> None:
        super().__init__()
        self.degrees = augment_v1._setup_angle(degrees, name="degrees", req_sizes=(2,))
        self.interpolation, self.expand, self.fill = interpolation, expand, fill
        if center is not None:
            augment_v1._check_sequence_input(center, "center", req_sizes=(2,))
        self.center = center

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return dict(angle=draws.uniform(self.degrees[0], self.degrees[1]))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.rotate(inpt, params["angle"], self.interpolation, self.expand, self.center,
                        _fill_for(self.fill, inpt))


class RandomAffine(Transform):
    """Random rotation, translation, scale and shear (v1's ranges) for images, masks and boxes."""

    def __init__(self, degrees: Any, translate: Sequence[float] | None = None, scale: Sequence[float] | None = None,
                 shear: Any = None, interpolation: Any = InterpolationMode.NEAREST, fill: Any = 0,
                 center: Sequence[float] | None = None) -> None:
        super().__init__()
        checked = augment_v1.RandomAffine(degrees, translate, scale, shear, center=center)  # the same checks
        self.degrees, self.translate, self.scale, self.shear = checked.degrees, translate, scale, checked.shear
        self.interpolation, self.fill, self.center = interpolation, fill, center

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        height, width = query_size(flat_inputs)
        angle, translate, scale, shear = augment_v1.RandomAffine.get_params(self.degrees, self.translate, self.scale,
                                                                            self.shear, [width, height])
        return dict(angle=angle, translate=translate, scale=scale, shear=shear)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.affine(inpt, params["angle"], list(params["translate"]), params["scale"], list(params["shear"]),
                        interpolation=self.interpolation, fill=_fill_for(self.fill, inpt), center=self.center)


# ---------------------------------------------------------------------------- photometric (images only)
class _Photometric(_RandomApplyTransform):
    """A pixel-value function applied to images (masks and boxes pass through), with probability ``p``."""

    def _function(self, img: Any) -> Any:
        raise NotImplementedError

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        return F._rewrap(self._function(F.to_pure_tensor(inpt)), inpt)


class RandomInvert(_Photometric):
    def _function(self, img: Any) -> Any:
        return F.invert(img)


class RandomAutocontrast(_Photometric):
    def _function(self, img: Any) -> Any:
        return F.autocontrast(img)


class RandomEqualize(_Photometric):
    def _function(self, img: Any) -> Any:
        return F.equalize(img)


class RandomPosterize(_Photometric):
    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.bits = bits

    def _function(self, img: Any) -> Any:
        return F.posterize(img, self.bits)


class RandomSolarize(_Photometric):
    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.threshold = threshold

    def _function(self, img: Any) -> Any:
        return F.solarize(img, self.threshold)


class RandomAdjustSharpness(_Photometric):
    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.sharpness_factor = sharpness_factor

    def _function(self, img: Any) -> Any:
        return F.adjust_sharpness(img, self.sharpness_factor)


class RandomGrayscale(_Photometric):
    """Grey with the input's channel count, with probability ``p`` (default 0.1)."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__(p=p)

    def _function(self, img: Any) -> Any:
        return F.rgb_to_grayscale(img, F.get_dimensions(img)[0])


class Grayscale(Transform):
    def __init__(self, num_output_channels: int = 1) -> None:
        super().__init__()
        self.num_output_channels = num_output_channels

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        return F._rewrap(F.rgb_to_grayscale(F.to_pure_tensor(inpt), self.num_output_channels), inpt)


# ------------------------------------------------------------------------------------- detection recipes
class SanitizeBoundingBoxes(Transform):
    """Drop degenerate boxes (narrower or lower than ``min_size``, smaller than ``min_area``, outside the
    canvas) together with their labels and masks (``labels_getter``: torchvision's heuristic, a callable, or
    None)."""

    def __init__(self, min_size: float = 1.0, min_area: float = 1.0, labels_getter: Any = "default") -> None:
        super().__init__()
        if min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {min_size}.")
        if min_area < 1:
            raise ValueError(f"min_area must be >= 1, got {min_area}.")
        self.min_size, self.min_area, self.labels_getter = min_size, min_area, labels_getter
        if labels_getter == "default":
            self._labels_getter = _default_labels
        elif callable(labels_getter):
            self._labels_getter = labels_getter
        elif labels_getter is None:
            self._labels_getter = lambda _: None
        else:
            raise ValueError("labels_getter should either be 'default', a callable, or None, but got "
                             f"{labels_getter}.")

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        labels = self._labels_getter(inputs)
        if labels is not None:
            message = "The labels in the input to forward() must be a tensor or None, got {} instead."
            if isinstance(labels, Tensor):
                labels = (labels,)
            elif isinstance(labels, (tuple, list)):
                for entry in labels:
                    if not isinstance(entry, Tensor):
                        raise ValueError(message.format(type(entry)))
            else:
                raise ValueError(message.format(type(labels)))
        flat_inputs, spec = tree_flatten(inputs)
        boxes = get_bounding_boxes(flat_inputs)
        for label in labels or ():
            if boxes.shape[0] != label.shape[0]:
                raise ValueError(f"Number of boxes (shape={boxes.shape}) and must match the number of labels.Found "
                                 f"labels with shape={label.shape}).")
        keep = ember.from_numpy(F.sanitize_mask(boxes, self.min_size, self.min_area))
        outputs = [self._keep(inpt, keep, labels) for inpt in flat_inputs]
        return tree_unflatten(outputs, spec)

    @staticmethod
    def _keep(inpt: Any, keep: Any, labels: Any) -> Any:
        is_label = labels is not None and any(inpt is label for label in labels)
        if not (is_label or isinstance(inpt, (tv_tensors.BoundingBoxes, tv_tensors.Mask))):
            return inpt
        try:
            output = F.to_pure_tensor(inpt)[keep.to(inpt.device)]
        except IndexError:
            return inpt
        return output if is_label else tv_tensors.wrap(output, like=inpt)


class RandomZoomOut(_RandomApplyTransform):
    """Place the image at a random spot of a canvas ``side_range`` times larger, filled with ``fill``."""

    def __init__(self, fill: Any = 0, side_range: Sequence[float] = (1.0, 4.0), p: float = 0.5) -> None:
        super().__init__(p=p)
        self.fill = fill
        augment_v1._check_sequence_input(side_range, "side_range", req_sizes=(2,))
        if side_range[0] < 1.0 or side_range[0] > side_range[1]:
            raise ValueError(f"Invalid side range provided {side_range}.")
        self.side_range = side_range

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        orig_h, orig_w = query_size(flat_inputs)
        # torchvision: side_range[0] + torch.rand(1) * (side_range[1] - side_range[0]), in float32
        r = float(np.float32(self.side_range[0]) + np.float32(draws.rand()) *
                  np.float32(self.side_range[1] - self.side_range[0]))
        canvas_width, canvas_height = int(orig_w * r), int(orig_h * r)
        rx, ry = draws.uniform_array((2,))
        left, top = int((canvas_width - orig_w) * rx), int((canvas_height - orig_h) * ry)
        return dict(padding=[left, top, canvas_width - (left + orig_w), canvas_height - (top + orig_h)])

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.pad(inpt, params["padding"], _fill_for(self.fill, inpt))


class RandomChannelPermutation(Transform):
    """Shuffle the image channels."""

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        num_channels = query_chw(flat_inputs)[0]
        return dict(permutation=draws.randperm(num_channels))

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.permute_channels(inpt, params["permutation"])


class RandomPhotometricDistort(Transform):
    """SSD's photometric distortion: brightness, contrast (before or after), saturation, hue, each with
    probability ``p``, then a random channel permutation with probability ``p``."""

    def __init__(self, brightness: tuple[float, float] = (0.875, 1.125), contrast: tuple[float, float] = (0.5, 1.5),
                 saturation: tuple[float, float] = (0.5, 1.5), hue: tuple[float, float] = (-0.05, 0.05),
                 p: float = 0.5) -> None:
        super().__init__()
        self.brightness, self.contrast, self.saturation, self.hue, self.p = brightness, contrast, saturation, hue, p

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        num_channels = query_chw(flat_inputs)[0]
        params: dict[str, Any] = {}
        for key, (low, high) in [("brightness_factor", self.brightness), ("contrast_factor", self.contrast),
                                 ("saturation_factor", self.saturation), ("hue_factor", self.hue)]:
            params[key] = draws.uniform(low, high) if draws.below(self.p) else None
        params["contrast_before"] = draws.below(0.5)
        params["channel_permutation"] = draws.randperm(num_channels) if draws.below(self.p) else None
        return params

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not F._is_image(inpt):
            return inpt
        out = F.to_pure_tensor(inpt)
        contrast = params["contrast_factor"]
        if params["brightness_factor"] is not None:
            out = F.adjust_brightness(out, params["brightness_factor"])
        if contrast is not None and params["contrast_before"]:
            out = F.adjust_contrast(out, contrast)
        if params["saturation_factor"] is not None:
            out = F.adjust_saturation(out, params["saturation_factor"])
        if params["hue_factor"] is not None:
            out = F.adjust_hue(out, params["hue_factor"])
        if contrast is not None and not params["contrast_before"]:
            out = F.adjust_contrast(out, contrast)
        if params["channel_permutation"] is not None:
            out = F.permute_channels(out, params["channel_permutation"])
        return F._rewrap(out, inpt)
