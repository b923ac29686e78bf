"""What kind of image a transform got, and moving between the kinds.

Three kinds, as in torchvision: a PIL image (when Pillow is installed), a NumPy array holding an
``HxW`` or ``HxWxC`` image (what ``PIL.Image`` / OpenCV / imageio give; channels last), and an ember
tensor ``[..., C, H, W]`` (channels first, any leading batch dims). Geometric and colour transforms
return the kind they were given; the math runs on a channels-first NumPy array.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from ember.tensor import Tensor
import ember


def is_pil(img: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(img, Image.Image)


def is_tensor(img: Any) -> bool:
    return isinstance(img, Tensor)


def require_pillow(what: str) -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(f"{what} needs Pillow; install it with `pip install 'ember[vision]'` "
                          "(or pip install pillow)") from None
    return Image


def to_chw(img: Any, op: str) -> tuple[np.ndarray, str]:
    """The image as a channels-first array ``[..., C, H, W]`` and its kind ("numpy", "tensor" or "pil")."""
    if is_tensor(img):
        array = np.asarray(img.detach().cpu().numpy())
        if array.ndim < 2:
            raise TypeError(f"{op}: expected a tensor image [..., C, H, W] or [H, W], got shape {array.shape}")
        return (array[None] if array.ndim == 2 else array), "tensor"
    if isinstance(img, np.ndarray):
        if img.ndim == 2:
            return img[None], "numpy"
        if img.ndim == 3:
            return img.transpose(2, 0, 1), "numpy"
        raise TypeError(f"{op}: expected a NumPy image HxW or HxWxC, got shape {img.shape}; for batches use "
                        "a tensor [N, C, H, W]")
    if is_pil(img):
        array = np.asarray(img)
        return (array[None] if array.ndim == 2 else array.transpose(2, 0, 1)), "pil"
    raise TypeError(f"{op}: img should be a PIL Image, a NumPy array (HxW or HxWxC) or an ember tensor; got "
                    f"{type(img).__name__}")


def from_chw(array: np.ndarray, kind: str, like: Any) -> Any:
    """Return ``array`` (``[..., C, H, W]``) in the kind of ``like``."""
    if kind == "tensor":
        if like.ndim == 2:
            array = array[0]
        out = ember.from_numpy(np.ascontiguousarray(array))
        return out if like.device.type == "cpu" else out.to(like.device)  # back where the input lives
    hwc = np.ascontiguousarray(array.transpose(1, 2, 0))
    if kind == "numpy":
        return hwc[..., 0] if like.ndim == 2 else hwc
    Image = require_pillow("ember.vision.transforms")
    return Image.fromarray(hwc[..., 0] if hwc.shape[-1] == 1 and like.mode in ("L", "1", "I", "F") else hwc,
                           mode=None if like.mode != "1" else "L")


def max_value(dtype: np.dtype) -> float:
    """The value of "white": 1.0 for floats, the dtype's maximum for integers (torchvision's ``_max_value``)."""
    return 1.0 if np.dtype(dtype).kind == "f" else float(np.iinfo(dtype).max)


def image_size(img: Any, op: str = "ember.vision.transforms") -> tuple[int, int]:
    """(height, width) of an image of any kind."""
    if is_pil(img):
        return img.size[1], img.size[0]
    if is_tensor(img):
        return int(img.shape[-2]), int(img.shape[-1])
    if isinstance(img, np.ndarray):
        return int(img.shape[0]), int(img.shape[1])
    raise TypeError(f"{op}: img should be a PIL Image, a NumPy array (HxW or HxWxC) or an ember tensor; got "
                    f"{type(img).__name__}")
