"""Automatic augmentation policies (``torchvision.transforms.autoaugment``): AutoAugment with its ImageNet,
CIFAR-10 and SVHN policies, RandAugment, TrivialAugmentWide and AugMix.

The operations, magnitude bins and policy tables are torchvision 0.28's (the bins are computed as
``torch.linspace`` computes them, bit for bit), so with the same random choices the output pixels are the
same; the random choices themselves come from ember's data streams (``ember.manual_seed`` repeats them).
Images: tensors ``[..., C, H, W]`` (uint8 for the colour-table ops Posterize/Equalize), NumPy images and PIL
images.

Example:
    >>> import ember
    >>> from ember.vision.transforms import AutoAugment, AutoAugmentPolicy
    >>> img = (ember.rand(3, 32, 32) * 255).to(ember.uint8)
    >>> AutoAugment(AutoAugmentPolicy.CIFAR10)(img).shape
    ember.Size([3, 32, 32])
"""
from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np

import ember
from ember.data._transform_module import TransformModule
from ember.vision.transforms import _draws as draws, functional as F
from ember.vision.transforms._grid import linspace_f32
from ember.vision.transforms._image import from_chw, is_tensor, to_chw
from ember.vision.transforms.functional import InterpolationMode

__all__ = ["AutoAugmentPolicy", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix"]


def _apply_op(img: Any, op_name: str, magnitude: float, interpolation: InterpolationMode, fill: Any) -> Any:
    """One named operation at ``magnitude`` (torchvision's table of operations)."""
    if op_name == "ShearX":
        # torchvision shears about the top-left corner here, as PIL's (and TF's) AutoAugment did
        return F.affine(img, angle=0.0, translate=[0, 0], scale=1.0, shear=[math.degrees(math.atan(magnitude)), 0.0],
                        interpolation=interpolation, fill=fill, center=[0, 0])
    if op_name == "ShearY":
        return F.affine(img, angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, math.degrees(math.atan(magnitude))],
                        interpolation=interpolation, fill=fill, center=[0, 0])
    if op_name == "TranslateX":
        return F.affine(img, angle=0.0, translate=[int(magnitude), 0], scale=1.0, interpolation=interpolation,
                        shear=[0.0, 0.0], fill=fill)
    if op_name == "TranslateY":
        return F.affine(img, angle=0.0, translate=[0, int(magnitude)], scale=1.0, interpolation=interpolation,
                        shear=[0.0, 0.0], fill=fill)
    if op_name == "Rotate":
        return F.rotate(img, magnitude, interpolation=interpolation, fill=fill)
    adjust = {"Brightness": F.adjust_brightness, "Color": F.adjust_saturation, "Contrast": F.adjust_contrast,
              "Sharpness": F.adjust_sharpness}
    if op_name in adjust:
        return adjust[op_name](img, 1.0 + magnitude)
    if op_name == "Posterize":
        return F.posterize(img, int(magnitude))
    if op_name == "Solarize":
        return F.solarize(img, magnitude)
    plain = {"AutoContrast": F.autocontrast, "Equalize": F.equalize, "Invert": F.invert}
    if op_name in plain:
        return plain[op_name](img)
    if op_name == "Identity":
        return img
    raise ValueError(f"The provided operator {op_name} is not recognized.")


def _tensor_fill(img: Any, fill: Any) -> Any:
    """Tensors and NumPy images get one float per channel; PIL images take the fill as given."""
    if (is_tensor(img) or isinstance(img, np.ndarray)) and fill is not None:
        channels = F.get_dimensions(img)[0]
        return [float(fill)] * channels if isinstance(fill, (int, float)) else [float(f) for f in fill]
    return fill


def _bins(start: float, end: float, num_bins: int) -> np.ndarray:
    return linspace_f32(start, end, num_bins)


def _posterize_bins(top: int, num_bins: int, spread: int) -> np.ndarray:
    """``top - round(arange(num_bins) / ((num_bins - 1) / spread))`` as int32 (torch rounds half to even)."""
    return (top - np.rint(np.arange(num_bins, dtype=np.float32) / np.float32((num_bins - 1) / spread))).astype(
        np.int32)


_NONE = np.array(0.0, dtype=np.float32)  # the 0-d "no magnitude" entry


class AutoAugmentPolicy(Enum):
    """The datasets AutoAugment's policies were searched on."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


_POLICIES = {
    AutoAugmentPolicy.IMAGENET: [
        (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)), (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
        (("Solarize", 0.6, 3), ("Equalize", 0.6, None)), (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
        (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)), (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
        (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
        (("Equalize", 0.0, None), ("Equalize", 0.8, None)), (("Invert", 0.6, None), ("Equalize", 1.0, None)),
        (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
        (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
        (("ShearX", 0.6, 5), ("Equalize", 1.0, None)), (("Color", 0.4, 0), ("Equalize", 0.6, None)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    ],
    AutoAugmentPolicy.CIFAR10: [
        (("Invert", 0.1, None), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
        (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
        (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
        (("Equalize", 0.6, None), ("Equalize", 0.5, None)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
        (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
        (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
        (("Solarize", 0.5, 2), ("Invert", 0.0, None)), (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.2, None), ("Equalize", 0.6, None)), (("Color", 0.9, 9), ("Equalize", 0.6, None)),
        (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
        (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)), (("Equalize", 0.8, None), ("Invert", 0.1, None)),
        (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
    ],
    AutoAugmentPolicy.SVHN: [
        (("ShearX", 0.9, 4), ("Invert", 0.2, None)), (("ShearY", 0.9, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.6, None), ("Solarize", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)), (("ShearX", 0.9, 4), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.9, 8), ("Invert", 0.4, None)), (("ShearY", 0.9, 5), ("Solarize", 0.2, 6)),
        (("Invert", 0.9, None), ("AutoContrast", 0.8, None)), (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("Solarize", 0.3, 3)), (("ShearY", 0.8, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.9, None), ("TranslateY", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Contrast", 0.3, 3), ("Rotate", 0.8, 4)), (("Invert", 0.8, None), ("TranslateY", 0.0, 2)),
        (("ShearY", 0.7, 6), ("Solarize", 0.4, 8)), (("Invert", 0.6, None), ("Rotate", 0.8, 4)),
        (("ShearY", 0.3, 7), ("TranslateX", 0.9, 3)), (("ShearX", 0.1, 6), ("Invert", 0.6, None)),
        (("Solarize", 0.7, 2), ("TranslateY", 0.6, 7)), (("ShearY", 0.8, 4), ("Invert", 0.8, None)),
        (("ShearX", 0.7, 9), ("TranslateY", 0.8, 3)), (("ShearY", 0.8, 5), ("AutoContrast", 0.7, None)),
        (("ShearX", 0.7, 2), ("Invert", 0.1, None)),
    ],
}


def _magnitude(magnitudes: np.ndarray, index: Any) -> float:
    return float(magnitudes[int(index)]) if magnitudes.ndim > 0 else 0.0


class _AutoAugmentBase(TransformModule):  # torchvision's policies are nn.Modules
    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                         if not k.startswith("_") and k not in ("policies", "training"))
        return f"{type(self).__name__}({args})"


class AutoAugment(_AutoAugmentBase):
    """AutoAugment (Cubuk et al., 2019): a random sub-policy of two (operation, probability, magnitude) steps."""

    def __init__(self, policy: AutoAugmentPolicy = AutoAugmentPolicy.IMAGENET,
                 interpolation: InterpolationMode = InterpolationMode.NEAREST, fill: Any = None) -> None:
        self.policy = policy
        self.interpolation = interpolation
        self.fill = fill
        self.policies = self._get_policies(policy)

    def _get_policies(self, policy: AutoAugmentPolicy) -> list:
        if policy not in _POLICIES:
            raise ValueError(f"The provided policy {policy} is not recognized.")
        return list(_POLICIES[policy])

    def _augmentation_space(self, num_bins: int, image_size: tuple[int, int]) -> dict[str, tuple[np.ndarray, bool]]:
        return {
            "ShearX": (_bins(0.0, 0.3, num_bins), True),
            "ShearY": (_bins(0.0, 0.3, num_bins), True),
            "TranslateX": (_bins(0.0, 150.0 / 331.0 * image_size[1], num_bins), True),
            "TranslateY": (_bins(0.0, 150.0 / 331.0 * image_size[0], num_bins), True),
            "Rotate": (_bins(0.0, 30.0, num_bins), True),
            "Brightness": (_bins(0.0, 0.9, num_bins), True),
            "Color": (_bins(0.0, 0.9, num_bins), True),
            "Contrast": (_bins(0.0, 0.9, num_bins), True),
            "Sharpness": (_bins(0.0, 0.9, num_bins), True),
            "Posterize": (_posterize_bins(8, num_bins, 4), False),
            "Solarize": (_bins(255.0, 0.0, num_bins), False),
            "AutoContrast": (_NONE, False),
            "Equalize": (_NONE, False),
            "Invert": (_NONE, False),
        }

    @staticmethod
    def get_params(transform_num: int) -> tuple[int, Any, Any]:
        """(sub-policy index, two uniform draws deciding whether each step runs, two signs: 0 negates)."""
        policy_id = draws.randint(0, transform_num)  # torchvision: randint(n, (1,)), rand((2,)), randint(2, (2,))
        probs = ember.from_numpy(draws.uniform_array((2,)))
        signs = ember.from_numpy(draws.randint_array(0, 2, (2,)))
        return policy_id, probs, signs

    def __call__(self, img: Any) -> Any:
        fill = _tensor_fill(img, self.fill)
        _, height, width = F.get_dimensions(img)
        transform_id, probs, signs = self.get_params(len(self.policies))
        probs, signs = np.asarray(probs.tolist()), np.asarray(signs.tolist())
        op_meta = self._augmentation_space(10, (height, width))
        for i, (op_name, p, magnitude_id) in enumerate(self.policies[transform_id]):
            if probs[i] <= p:
                magnitudes, signed = op_meta[op_name]
                magnitude = _magnitude(magnitudes, magnitude_id) if magnitude_id is not None else 0.0
                if signed and signs[i] == 0:
                    magnitude *= -1.0
                img = _apply_op(img, op_name, magnitude, interpolation=self.interpolation, fill=fill)
        return img


class RandAugment(_AutoAugmentBase):
    """RandAugment (Cubuk et al., 2020): ``num_ops`` uniformly chosen operations at one fixed ``magnitude``."""

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: InterpolationMode = InterpolationMode.NEAREST, fill: Any = None) -> None:
        self.num_ops = num_ops
        self.magnitude = magnitude
        self.num_magnitude_bins = num_magnitude_bins
        self.interpolation = interpolation
        self.fill = fill

    def _augmentation_space(self, num_bins: int, image_size: tuple[int, int]) -> dict[str, tuple[np.ndarray, bool]]:
        space = {"Identity": (_NONE, False)}
        space.update(AutoAugment._augmentation_space(self, num_bins, image_size))  # type: ignore[arg-type]
        del space["Invert"]
        return space

    def __call__(self, img: Any) -> Any:
        fill = _tensor_fill(img, self.fill)
        _, height, width = F.get_dimensions(img)
        op_meta = self._augmentation_space(self.num_magnitude_bins, (height, width))
        for _ in range(self.num_ops):
            op_name = list(op_meta)[draws.randint(0, len(op_meta))]
            magnitudes, signed = op_meta[op_name]
            magnitude = _magnitude(magnitudes, self.magnitude)
            if signed and draws.randint(0, 2):
                magnitude *= -1.0
            img = _apply_op(img, op_name, magnitude, interpolation=self.interpolation, fill=fill)
        return img


class TrivialAugmentWide(_AutoAugmentBase):
    """TrivialAugment (Müller and Hutter, 2021): one uniformly chosen operation at a uniformly chosen magnitude,
    on the wide ranges."""

    def __init__(self, num_magnitude_bins: int = 31, interpolation: InterpolationMode = InterpolationMode.NEAREST,
                 fill: Any = None) -> None:
        self.num_magnitude_bins = num_magnitude_bins
        self.interpolation = interpolation
        self.fill = fill

    def _augmentation_space(self, num_bins: int) -> dict[str, tuple[np.ndarray, bool]]:
        return {
            "Identity": (_NONE, False),
            "ShearX": (_bins(0.0, 0.99, num_bins), True),
            "ShearY": (_bins(0.0, 0.99, num_bins), True),
            "TranslateX": (_bins(0.0, 32.0, num_bins), True),
            "TranslateY": (_bins(0.0, 32.0, num_bins), True),
            "Rotate": (_bins(0.0, 135.0, num_bins), True),
            "Brightness": (_bins(0.0, 0.99, num_bins), True),
            "Color": (_bins(0.0, 0.99, num_bins), True),
            "Contrast": (_bins(0.0, 0.99, num_bins), True),
            "Sharpness": (_bins(0.0, 0.99, num_bins), True),
            "Posterize": (_posterize_bins(8, num_bins, 6), False),
            "Solarize": (_bins(255.0, 0.0, num_bins), False),
            "AutoContrast": (_NONE, False),
            "Equalize": (_NONE, False),
        }

    def __call__(self, img: Any) -> Any:
        fill = _tensor_fill(img, self.fill)
        op_meta = self._augmentation_space(self.num_magnitude_bins)
        op_name = list(op_meta)[draws.randint(0, len(op_meta))]
        magnitudes, signed = op_meta[op_name]
        magnitude = _magnitude(magnitudes, draws.randint(0, len(magnitudes))) if magnitudes.ndim > 0 else 0.0
        if signed and draws.randint(0, 2):
            magnitude *= -1.0
        return _apply_op(img, op_name, magnitude, interpolation=self.interpolation, fill=fill)


class AugMix(_AutoAugmentBase):
    """AugMix (Hendrycks et al., 2020): a Dirichlet-weighted mix of ``mixture_width`` chains of random operations,
    blended with the original by a Beta-distributed weight."""

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation: InterpolationMode = InterpolationMode.BILINEAR,
                 fill: Any = None) -> None:
        self._PARAMETER_MAX = 10
        if not 1 <= severity <= self._PARAMETER_MAX:
            raise ValueError(f"The severity must be between [1, {self._PARAMETER_MAX}]. Got {severity} instead.")
        self.severity = severity
        self.mixture_width = mixture_width
        self.chain_depth = chain_depth
        self.alpha = alpha
        self.all_ops = all_ops
        self.interpolation = interpolation
        self.fill = fill

    def _augmentation_space(self, num_bins: int, image_size: tuple[int, int]) -> dict[str, tuple[np.ndarray, bool]]:
        space = {
            "ShearX": (_bins(0.0, 0.3, num_bins), True),
            "ShearY": (_bins(0.0, 0.3, num_bins), True),
            "TranslateX": (_bins(0.0, image_size[1] / 3.0, num_bins), True),
            "TranslateY": (_bins(0.0, image_size[0] / 3.0, num_bins), True),
            "Rotate": (_bins(0.0, 30.0, num_bins), True),
            "Posterize": (_posterize_bins(4, num_bins, 4), False),
            "Solarize": (_bins(255.0, 0.0, num_bins), False),
            "AutoContrast": (_NONE, False),
            "Equalize": (_NONE, False),
        }
        if self.all_ops:
            space.update({
                "Brightness": (_bins(0.0, 0.9, num_bins), True),
                "Color": (_bins(0.0, 0.9, num_bins), True),
                "Contrast": (_bins(0.0, 0.9, num_bins), True),
                "Sharpness": (_bins(0.0, 0.9, num_bins), True),
            })
        return space

    def _sample_dirichlet(self, params: Any) -> Any:
        """One Dirichlet draw per row of ``params`` (``[N, K]`` concentrations), as ``torch._sample_dirichlet``."""
        concentrations = np.asarray(params.tolist(), dtype=np.float64)
        gammas = draws.numpy_stream().standard_gamma(concentrations)  # not torch's gamma sampler
        return ember.from_numpy((gammas / gammas.sum(axis=-1, keepdims=True)).astype(np.float32))

    def __call__(self, orig_img: Any) -> Any:
        fill = _tensor_fill(orig_img, self.fill)
        _, height, width = F.get_dimensions(orig_img)
        array, kind = to_chw(orig_img, "AugMix")
        op_meta = self._augmentation_space(self._PARAMETER_MAX, (height, width))
        dims = array.shape  # [..., C, H, W]
        batch = array.reshape((1,) * max(4 - array.ndim, 0) + dims)
        n = batch.shape[0]
        weight_shape = (n,) + (1,) * (batch.ndim - 1)
        m = np.asarray(self._sample_dirichlet(ember.tensor([[self.alpha, self.alpha]] * n)).tolist(), np.float32)
        combined = np.asarray(self._sample_dirichlet(ember.tensor([[self.alpha] * self.mixture_width] * n)).tolist(),
                              np.float32) * m[:, 1].reshape(n, -1)
        mix = m[:, 0].reshape(weight_shape) * batch
        for i in range(self.mixture_width):
            aug = ember.from_numpy(np.ascontiguousarray(batch))  # the chain runs on the host copy
            depth = self.chain_depth if self.chain_depth > 0 else draws.randint(1, 4)
            for _ in range(depth):
                op_name = list(op_meta)[draws.randint(0, len(op_meta))]
                magnitudes, signed = op_meta[op_name]
                magnitude = _magnitude(magnitudes, draws.randint(0, self.severity)) if magnitudes.ndim > 0 else 0.0
                if signed and draws.randint(0, 2):
                    magnitude *= -1.0
                aug = _apply_op(aug, op_name, magnitude, interpolation=self.interpolation, fill=fill)
            mix = mix + combined[:, i].reshape(weight_shape) * aug.numpy()
        return from_chw(mix.reshape(dims).astype(array.dtype), kind, orig_img)
