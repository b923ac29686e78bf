"""The base of ``transforms.v2``: a transform takes any nest of inputs (an image, ``(image, target)``,
dicts of tv_tensors, ...), draws its random parameters once per call, and applies them to every leaf it
knows (images, masks, boxes), passing the rest through (torchvision's ``Transform``).

Which leaves are transformed follows torchvision: tv_tensors, PIL images and NumPy images always; a plain
tensor only when the sample holds no image of another kind, and then only the first plain tensor (so the
labels in ``(img, labels)`` stay untouched).

Example:
    >>> import ember
    >>> from ember.vision.transforms import v2
    >>> img, label = v2.RandomHorizontalFlip(p=1.0)(ember.arange(4.0).reshape(1, 2, 2), ember.tensor([7, 8]))
    >>> img.tolist(), label.tolist()
    ([[[1.0, 0.0], [3.0, 2.0]]], [7, 8])
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import nn
from ember.func.pytree import tree_flatten, tree_unflatten
from ember.tensor import Tensor
from ember.vision import tv_tensors
from ember.vision.transforms import _draws as draws
from ember.vision.transforms._image import is_pil
from ember.vision.transforms.v2 import functional as F


def check_type(obj: Any, types_or_checks: Sequence[Any]) -> bool:
    for check in types_or_checks:
        if isinstance(obj, check) if isinstance(check, type) else check(obj):
            return True
    return False


def has_any(flat_inputs: list[Any], *types_or_checks: Any) -> bool:
    return any(check_type(inpt, types_or_checks) for inpt in flat_inputs)


def has_all(flat_inputs: list[Any], *types_or_checks: Any) -> bool:
    return all(any(check_type(inpt, (check,)) for inpt in flat_inputs) for check in types_or_checks)


def _image_like(inpt: Any) -> bool:
    return isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or F.is_pure_tensor(inpt) or is_pil(inpt) or \
        isinstance(inpt, np.ndarray)


def query_chw(flat_inputs: list[Any]) -> tuple[int, int, int]:
    """(C, H, W) of the sample's images (they must agree)."""
    chws = {tuple(F.get_dimensions(inpt)) for inpt in flat_inputs if _image_like(inpt)}
    if not chws:
        raise TypeError("No image or video was found in the sample")
    if len(chws) > 1:
        raise ValueError(f"Found multiple CxHxW dimensions in the sample: {sorted(chws)}")
    return chws.pop()


def query_size(flat_inputs: list[Any]) -> tuple[int, int]:
    """(H, W) shared by the sample's images, masks and box canvases."""
    sizes = {tuple(F.get_size(inpt)) for inpt in flat_inputs
             if _image_like(inpt) or isinstance(inpt, (tv_tensors.Mask, tv_tensors.BoundingBoxes))}
    if not sizes:
        raise TypeError("No image, video, mask or bounding box was found in the sample")
    if len(sizes) > 1:
        raise ValueError(f"Found multiple HxW dimensions in the sample: {sorted(sizes)}")
    return sizes.pop()


def get_bounding_boxes(flat_inputs: list[Any]) -> tv_tensors.BoundingBoxes:
    for inpt in flat_inputs:
        if isinstance(inpt, tv_tensors.BoundingBoxes):
            return inpt
    raise ValueError("No bounding boxes were found in the sample")


class Transform(nn.Module):
    """Subclass and override ``make_params(flat_inputs) -> dict`` and ``transform(inpt, params)``."""

    _transformed_types: tuple = (Tensor, np.ndarray, is_pil)

    def check_inputs(self, flat_inputs: list[Any]) -> None:
        pass

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _needs_transform_list(self, flat_inputs: list[Any]) -> list[bool]:
        transform_pure_tensor = not has_any(flat_inputs, tv_tensors.Image, tv_tensors.Video, is_pil, np.ndarray)
        needs = []
        for inpt in flat_inputs:
            need = check_type(inpt, self._transformed_types)
            if need and F.is_pure_tensor(inpt):
                need, transform_pure_tensor = transform_pure_tensor, False
            needs.append(need)
        return needs

    def _apply(self, flat_inputs: list[Any], needs: list[bool]) -> list[Any]:
        params = self.make_params([inpt for inpt, need in zip(flat_inputs, needs) if need])
        return [self.transform(inpt, params) if need else inpt for inpt, need in zip(flat_inputs, needs)]

    def forward(self, *inputs: Any) -> Any:
        flat_inputs, spec = tree_flatten(inputs if len(inputs) > 1 else inputs[0])
        self.check_inputs(flat_inputs)
        return tree_unflatten(self._apply(flat_inputs, self._needs_transform_list(flat_inputs)), spec)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.__dict__.items()
                         if not k.startswith("_") and k != "training" and isinstance(v, (bool, int, float, str, tuple,
                                                                                           list)))


class _RandomApplyTransform(Transform):
    """Apply with probability ``p`` (one draw per call, for the whole sample)."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError("`p` should be a floating point value in the interval [0.0, 1.0].")
        super().__init__()
        self.p = p

    def forward(self, *inputs: Any) -> Any:
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat_inputs, spec = tree_flatten(inputs)
        self.check_inputs(flat_inputs)
        if not draws.below(self.p):  # torchvision: `if torch.rand(1) >= self.p`
            return inputs
        return tree_unflatten(self._apply(flat_inputs, self._needs_transform_list(flat_inputs)), spec)
