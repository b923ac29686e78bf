"""Crop, pad and flip of tensor images as ember ops, as torchvision's tensor kernels are torch ops.

torchvision's ``transforms.functional`` on a tensor is ordinary tensor code: ``crop`` is a slice (a view of
the input), ``pad`` is ``torch.nn.functional.pad``, ``hflip``/``vflip`` are ``flip``. So a model may call
them inside ``forward`` (U-Net's ``center_crop`` of the skip connection) and gradients flow through, and a
crop shares memory with its input. ember's image functions ran on detached NumPy copies; for tensors these
run on the tensor itself (values are unchanged: indexing and padding are exact).

Example:
    >>> import ember
    >>> from ember.vision.transforms import functional as F
    >>> x = ember.ones(1, 3, 6, 6, requires_grad=True)
    >>> F.center_crop(x, 4).sum().backward(); int(x.grad.sum())
    48
"""
from __future__ import annotations

from typing import Any

import ember


def crop(img: Any, top: int, left: int, height: int, width: int) -> Any:
    """torchvision's tensor ``crop``: a slice, zero-padded where the box leaves the image."""
    h, w = int(img.shape[-2]), int(img.shape[-1])
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        padding_ltrb = [max(-left + min(0, right), 0), max(-top + min(0, bottom), 0),
                        max(right - max(w, left), 0), max(bottom - max(h, top), 0)]
        return pad(img[..., max(top, 0):bottom, max(left, 0):right], padding_ltrb, 0, "constant")
    return img[..., top:bottom, left:right]


def _pad_symmetric(img: Any, p: list[int]) -> Any:
    """Mirror padding that repeats the edge pixel (torchvision's ``_pad_symmetric``), by index selection."""
    left, right, top, bottom = p
    w, h = int(img.shape[-1]), int(img.shape[-2])
    x_idx = list(range(left - 1, -1, -1)) + list(range(w)) + [w - 1 - i for i in range(right)]
    y_idx = list(range(top - 1, -1, -1)) + list(range(h)) + [h - 1 - i for i in range(bottom)]
    out = img.index_select(-1, ember.tensor(x_idx, dtype=ember.int64, device=img.device))
    return out.index_select(-2, ember.tensor(y_idx, dtype=ember.int64, device=img.device))


def pad(img: Any, pads_ltrb: list[int], fill: Any, padding_mode: str) -> Any:
    """torchvision's tensor ``pad``: ``F.pad`` (edge -> replicate; non-float images padded as float32 and cast
    back for non-constant modes, as torchvision), symmetric by index selection; negative padding crops."""
    left, top, right, bottom = (int(v) for v in pads_ltrb)
    p = [left, right, top, bottom]
    if padding_mode == "edge":
        padding_mode = "replicate"
    elif padding_mode == "symmetric":
        if min(p) < 0:  # negative padding crops first, as torchvision
            crop_l, crop_r, crop_t, crop_b = (-min(v, 0) for v in p)
            img = img[..., crop_t:img.shape[-2] - crop_b, crop_l:img.shape[-1] - crop_r]
            p = [max(v, 0) for v in p]
        return _pad_symmetric(img, p)
    elif padding_mode not in ("constant", "reflect"):
        raise ValueError(f"pad: padding_mode should be constant, edge, reflect or symmetric, got {padding_mode!r}")
    if padding_mode == "constant":
        return ember.nn.functional.pad(img, p, mode="constant", value=float(fill))
    shape = tuple(img.shape)
    x = img.reshape((-1,) + shape[-3:]) if img.ndim > 4 else (img.unsqueeze(0) if img.ndim < 4 else img)
    out_dtype = x.dtype
    cast = out_dtype not in (ember.float32, ember.float64)
    if cast:
        x = x.to(ember.float32)
    out = ember.nn.functional.pad(x, p, mode=padding_mode)
    if cast:
        out = out.to(out_dtype)
    if img.ndim > 4:
        return out.reshape(shape[:-2] + tuple(out.shape[-2:]))
    return out.squeeze(0) if img.ndim < 4 else out


def hflip(img: Any) -> Any:
    return img.flip(-1)


def vflip(img: Any) -> Any:
    return img.flip(-2)
