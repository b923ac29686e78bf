"""``torchvision.tv_tensors``: tensors that say what they hold, so ``transforms.v2`` treats each rightly.

``Image`` (``[..., C, H, W]``), ``Video`` (``[..., T, C, H, W]``), ``Mask`` (``[..., H, W]``, resized with
nearest neighbours) and ``BoundingBoxes`` (``[N, 4]`` with a ``format`` and the ``canvas_size`` (H, W) they
live on) are ember tensors of their own classes. As in torchvision, an operation on them returns a plain
tensor (``wrap`` puts the result back in the class), so ``tv_tensors`` never leak into model code.

Example:
    >>> import ember
    >>> from ember.vision import tv_tensors
    >>> boxes = tv_tensors.BoundingBoxes([[1, 2, 5, 6]], format="XYXY", canvas_size=(10, 10))
    >>> boxes.format, boxes.canvas_size, type(boxes + 1).__name__
    (<BoundingBoxFormat.XYXY: 'XYXY'>, (10, 10), 'Tensor')
"""
from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np

import ember
from ember.tensor import Tensor
from ember.vision.transforms._image import is_pil

__all__ = ["TVTensor", "Image", "Video", "Mask", "BoundingBoxes", "BoundingBoxFormat", "wrap"]


def _as_tensor(data: Any, dtype: Any, device: Any, requires_grad: bool | None) -> Tensor:
    if isinstance(data, Tensor):
        tensor = data
        if dtype is not None or device is not None:
            tensor = tensor.to(device=device, dtype=dtype)
    else:
        tensor = ember.as_tensor(data, dtype=dtype, device=device)
    if requires_grad is not None:
        tensor = tensor.detach().requires_grad_(requires_grad) if requires_grad != tensor.requires_grad else tensor
    return tensor


def _subclass(tensor: Tensor, cls: type) -> Any:
    """``tensor`` seen as ``cls``: the same storage, version counter and autograd history (``as_subclass``)."""
    out = Tensor._make.__func__(cls, tensor._data, tensor._device, tensor._requires_grad)
    if tensor._vc is None:
        tensor._vc = [0]
    out._vc = tensor._vc
    out.grad_fn = tensor.grad_fn
    out._output_nr = tensor._output_nr
    return out


class TVTensor(Tensor):
    """Base of the tv_tensor classes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ would rebuild the data)

    @classmethod
    def _wrap(cls, tensor: Tensor) -> Any:
        return _subclass(tensor, cls)

    def as_subclass(self, cls: type) -> Any:
        return _subclass(self, cls) if cls is not Tensor else _plain(self)

    def __repr__(self) -> str:
        return super().__repr__().replace("tensor(", f"{type(self).__name__}(", 1)


def _plain(tensor: Tensor) -> Tensor:
    return _subclass(tensor, Tensor)


class Image(TVTensor):
    """An image ``[..., C, H, W]`` (a ``H x W`` input gets a channel axis; PIL images are converted)."""

    def __new__(cls, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool | None = None) -> "Image":
        if is_pil(data):
            array = np.asarray(data)
            data = ember.from_numpy(np.ascontiguousarray(array[None] if array.ndim == 2 else array.transpose(2, 0, 1)))
        tensor = _as_tensor(data, dtype, device, requires_grad)
        if tensor.ndim < 2:
            raise ValueError(f"Image: expected at least 2 dimensions (H, W), got shape {tuple(tensor.shape)}")
        if tensor.ndim == 2:
            tensor = tensor.unsqueeze(0)
        return cls._wrap(tensor)


class Video(TVTensor):
    """A video ``[..., T, C, H, W]``."""

    def __new__(cls, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool | None = None) -> "Video":
        tensor = _as_tensor(data, dtype, device, requires_grad)
        if tensor.ndim < 4:
            raise ValueError(f"Video: expected at least 4 dimensions (T, C, H, W), got shape {tuple(tensor.shape)}")
        return cls._wrap(tensor)


class Mask(TVTensor):
    """A segmentation or detection mask ``[..., H, W]``."""

    def __new__(cls, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool | None = None) -> "Mask":
        if is_pil(data):
            data = ember.from_numpy(np.ascontiguousarray(np.asarray(data)))
        return cls._wrap(_as_tensor(data, dtype, device, requires_grad))


class BoundingBoxFormat(Enum):
    """Corner (``XYXY``), corner + size (``XYWH``) or centre + size (``CXCYWH``) coordinates."""

    XYXY = "XYXY"
    XYWH = "XYWH"
    CXCYWH = "CXCYWH"


class BoundingBoxes(TVTensor):
    """Boxes ``[N, 4]`` (or one box ``[4]``) in ``format`` on a ``canvas_size`` (H, W) image.

    ``clamping_mode`` ("soft", "hard" or None) says whether transforms clamp the boxes to the canvas; for
    axis-aligned boxes "soft" and "hard" clamp the same way (torchvision 0.28)."""

    format: BoundingBoxFormat
    canvas_size: tuple[int, int]
    clamping_mode: str | None

    @classmethod
    def _wrap(cls, tensor: Tensor, *, format: Any = BoundingBoxFormat.XYXY, canvas_size: Any = None,  # noqa: A002
              clamping_mode: str | None = "soft", check_dims: bool = True) -> "BoundingBoxes":
        if check_dims:
            if tensor.ndim == 1:
                tensor = tensor.unsqueeze(0)
            elif tensor.ndim != 2:
                raise ValueError(f"BoundingBoxes: expected a 1D or 2D tensor, got {tensor.ndim}D")
        if clamping_mode is not None and clamping_mode not in ("hard", "soft"):
            raise ValueError(f"clamping_mode must be None, hard or soft, got {clamping_mode}.")
        if isinstance(format, str):
            if format.upper() not in BoundingBoxFormat.__members__:
                raise ValueError(f"BoundingBoxes: format {format!r} is not one of XYXY, XYWH, CXCYWH (the rotated "
                                 "formats are not supported in ember)")
            format = BoundingBoxFormat[format.upper()]  # noqa: A001
        boxes = _subclass(tensor, cls)
        boxes.format = format
        boxes.canvas_size = tuple(int(s) for s in canvas_size)
        boxes.clamping_mode = clamping_mode
        return boxes

    def __new__(cls, data: Any, *, format: Any, canvas_size: Any, clamping_mode: str | None = "soft",  # noqa: A002
                dtype: Any = None, device: Any = None, requires_grad: bool | None = None) -> "BoundingBoxes":
        return cls._wrap(_as_tensor(data, dtype, device, requires_grad), format=format, canvas_size=canvas_size,
                         clamping_mode=clamping_mode)

    @classmethod
    def wrap(cls, tensor: Tensor, like: "BoundingBoxes", **kwargs: Any) -> "BoundingBoxes":
        return cls._wrap(tensor, format=kwargs.get("format", like.format),
                         canvas_size=kwargs.get("canvas_size", like.canvas_size),
                         clamping_mode=kwargs.get("clamping_mode", like.clamping_mode))

    def __repr__(self) -> str:
        text = super().__repr__()
        return f"{text[:-1]}, format={self.format}, canvas_size={self.canvas_size}, " \
               f"clamping_mode={self.clamping_mode})"


def wrap(wrappee: Tensor, *, like: TVTensor, **kwargs: Any) -> Any:
    """``wrappee`` as a tv_tensor of ``like``'s class (and, for boxes, its format and canvas size)."""
    if isinstance(like, BoundingBoxes):
        return BoundingBoxes.wrap(wrappee, like, **kwargs)
    return _subclass(wrappee, type(like))
