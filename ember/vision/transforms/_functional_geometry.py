"""Geometric image functions of ``torchvision.transforms.functional``: rotate, affine, perspective,
elastic_transform, five_crop, ten_crop.

Tensors and NumPy images follow torchvision's tensor path (an inverse-mapped sampling grid, nearest or
bilinear, ``fill`` outside the image); PIL images go through Pillow's ``rotate`` / ``transform`` with
the same matrices, as torchvision does. Re-exported by ``ember.vision.transforms.functional``.

Example:
    >>> import numpy as np
    >>> from ember.vision.transforms import functional as F
    >>> img = np.arange(12, dtype=np.uint8).reshape(3, 4)
    >>> F.rotate(img, 180).tolist()
    [[11, 10, 9, 8], [7, 6, 5, 4], [3, 2, 1, 0]]
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from ember.vision.transforms import _grid
from ember.vision.transforms._image import from_chw, image_size, is_pil, is_tensor, to_chw


def _interpolation(interpolation: Any, op: str) -> str:
    """The mode string of an InterpolationMode, its value, or one of PIL's integer codes."""
    if isinstance(interpolation, numbers.Integral) and not isinstance(interpolation, bool):
        codes = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
        if int(interpolation) not in codes:
            raise ValueError(f"{op}: unknown PIL interpolation code {interpolation}")
        return codes[int(interpolation)]
    value = getattr(interpolation, "value", interpolation)
    if not isinstance(value, str):
        raise TypeError(f"{op}: argument interpolation should be a InterpolationMode or a corresponding Pillow "
                        f"integer constant, got {type(interpolation).__name__}")
    return value


_PIL_RESAMPLE = {"nearest": 0, "nearest-exact": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """Grids are built in the image's float dtype (float32 for integer and half images), as torchvision."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _check_grid_inputs(array: np.ndarray, fill: Any, mode: str, op: str) -> None:
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"{op}: interpolation mode '{mode}' is unsupported with Tensor input (use NEAREST or "
                         "BILINEAR, or a PIL image)")
    channels = array.shape[-3]
    if isinstance(fill, (tuple, list)) and len(fill) > 1 and len(fill) != channels:
        raise ValueError(f"{op}: the number of elements in 'fill' cannot broadcast to match the number of channels "
                         f"of the image ({len(fill)} != {channels})")


def _pil_fill(fill: Any, img: Any) -> Any:
    """torchvision's ``_parse_fill``: one value per band, integers unless the image is float ("F")."""
    channels = len(img.getbands())
    fill = 0 if fill is None else fill
    if isinstance(fill, (int, float)) and channels > 1:
        fill = tuple([fill] * channels)
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = tuple(fill) * channels
        elif len(fill) != channels:
            raise ValueError(f"The number of elements in 'fill' does not match the number of channels of the image "
                             f"({len(fill)} != {channels})")
        fill = tuple(fill)
    if img.mode != "F":
        fill = tuple(int(x) for x in fill) if isinstance(fill, tuple) else int(fill)
    return fill


def _get_inverse_affine_matrix(center: Sequence[float], angle: float, translate: Sequence[float], scale: float,
                               shear: Sequence[float], inverted: bool = True) -> list[float]:
    """The 2x3 matrix (row-major) of rotation about ``center`` by ``angle`` degrees, scale, shear (degrees)
    and translation; ``inverted`` gives the output -> input map the samplers need (torchvision's helper)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    # RSS = rotation * shear_y * shear_x (without the scale), written out:
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    if inverted:
        m = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]
        m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
        m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
        m[2] += cx
        m[5] += cy
    else:
        m = [x * scale for x in (a, b, 0.0, c, d, 0.0)]
        m[2] += m[0] * -cx + m[1] * -cy
        m[5] += m[3] * -cx + m[4] * -cy
        m[2] += cx + tx
        m[5] += cy + ty
    return m


def _affine_output_size(matrix: Sequence[float], w: int, h: int) -> tuple[int, int]:
    """(width, height) that holds the whole rotated image (``expand=True``), as PIL and torchvision compute it."""
    corners = np.array([[-0.5 * w, -0.5 * h, 1.0], [-0.5 * w, 0.5 * h, 1.0], [0.5 * w, 0.5 * h, 1.0],
                        [0.5 * w, -0.5 * h, 1.0]], dtype=np.float32)
    theta = np.asarray(matrix, dtype=np.float32).reshape(2, 3)
    moved = corners @ theta.T
    low = moved.min(axis=0) + np.array([w * 0.5, h * 0.5], dtype=np.float32)
    high = moved.max(axis=0) + np.array([w * 0.5, h * 0.5], dtype=np.float32)
    tol = np.float32(1e-4)  # truncate to 1e-4 so a 1e-15 excess does not add a whole pixel
    size = np.ceil(np.trunc(high / tol) * tol) - np.floor(np.trunc(low / tol) * tol)
    return int(size[0]), int(size[1])


def _center_offset(img: Any, center: Sequence[float] | None) -> list[float]:
    if center is None:
        return [0.0, 0.0]
    h, w = image_size(img)
    return [1.0 * (c - s * 0.5) for c, s in zip(center, [w, h])]


def rotate(img: Any, angle: float, interpolation: Any = "nearest", expand: bool = False,
           center: Sequence[int] | None = None, fill: Any = None) -> Any:
    """Rotate counter-clockwise by ``angle`` degrees about ``center`` (default: the image centre); ``expand``
    grows the output to hold the whole rotated image; ``fill`` colours the uncovered area."""
    mode = _interpolation(interpolation, "rotate")
    if not isinstance(angle, (int, float)):
        raise TypeError("rotate: argument angle should be int or float")
    if center is not None and not isinstance(center, (list, tuple)):
        raise TypeError("rotate: argument center should be a sequence")
    if is_pil(img):
        return img.rotate(angle, _PIL_RESAMPLE[mode], expand, center, fillcolor=_pil_fill(fill, img))
    array, kind = to_chw(img, "rotate")
    _check_grid_inputs(array, fill, mode, "rotate")
    matrix = _get_inverse_affine_matrix(_center_offset(img, center), -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    h, w = array.shape[-2:]
    ow, oh = _affine_output_size(matrix, w, h) if expand else (w, h)
    grid = _grid.affine_grid(matrix, w, h, ow, oh, _work_dtype(array.dtype))
    return from_chw(_grid.apply_grid(array, grid, mode, fill), kind, img)


def affine(img: Any, angle: float, translate: Sequence[int], scale: float, shear: Any, interpolation: Any = "nearest",
           fill: Any = None, center: Sequence[int] | None = None) -> Any:
    """Rotate by ``angle`` degrees, scale, shear (degrees, x and y) about ``center`` and translate by
    ``translate`` pixels, keeping the image size."""
    mode = _interpolation(interpolation, "affine")
    if not isinstance(angle, (int, float)):
        raise TypeError("affine: argument angle should be int or float")
    if not isinstance(translate, (list, tuple)):
        raise TypeError("affine: argument translate should be a sequence")
    if len(translate) != 2:
        raise ValueError("affine: argument translate should be a sequence of length 2")
    if scale <= 0.0:
        raise ValueError("affine: argument scale should be positive")
    if not isinstance(shear, (numbers.Number, list, tuple)):
        raise TypeError("affine: shear should be either a single value or a sequence of two values")
    shear = [shear, 0.0] if isinstance(shear, numbers.Number) else list(shear)
    if len(shear) == 1:
        shear = [shear[0], shear[0]]
    if len(shear) != 2:
        raise ValueError(f"affine: shear should be a sequence containing two values. Got {shear}")
    if center is not None and not isinstance(center, (list, tuple)):
        raise TypeError("affine: argument center should be a sequence")
    angle = float(angle)
    h, w = image_size(img, "affine")
    if is_pil(img):
        pil_center = [w * 0.5, h * 0.5] if center is None else center
        matrix = _get_inverse_affine_matrix(pil_center, angle, list(translate), scale, shear)
        return img.transform(img.size, 0, matrix, _PIL_RESAMPLE[mode], fillcolor=_pil_fill(fill, img))  # AFFINE
    array, kind = to_chw(img, "affine")
    _check_grid_inputs(array, fill, mode, "affine")
    matrix = _get_inverse_affine_matrix(_center_offset(img, center), angle, [1.0 * t for t in translate], scale, shear)
    grid = _grid.affine_grid(matrix, w, h, w, h, _work_dtype(array.dtype))
    return from_chw(_grid.apply_grid(array, grid, mode, fill), kind, img)


def _get_perspective_coeffs(startpoints: Sequence[Sequence[int]], endpoints: Sequence[Sequence[int]]) -> list[float]:
    """The 8 coefficients mapping output points to input points (a least-squares solve in float64, rounded to
    float32 as torchvision does)."""
    if len(startpoints) != 4 or len(endpoints) != 4:
        raise ValueError(f"Please provide exactly four corners, got {len(startpoints)} startpoints and "
                         f"{len(endpoints)} endpoints.")
    rows = []
    for (x, y), (u, v) in zip(endpoints, startpoints):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    a = np.asarray(rows, dtype=np.float64)
    b = np.asarray(startpoints, dtype=np.float64).reshape(8)
    solution = np.linalg.lstsq(a, b, rcond=None)[0]
    return solution.astype(np.float32).tolist()


def perspective(img: Any, startpoints: Sequence[Sequence[int]], endpoints: Sequence[Sequence[int]],
                interpolation: Any = "bilinear", fill: Any = None) -> Any:
    """Warp so the four ``startpoints`` (top-left, top-right, bottom-right, bottom-left) land on ``endpoints``."""
    coeffs = _get_perspective_coeffs(startpoints, endpoints)
    mode = _interpolation(interpolation, "perspective")
    if is_pil(img):
        return img.transform(img.size, 2, coeffs, _PIL_RESAMPLE[mode], fillcolor=_pil_fill(fill, img))  # PERSPECTIVE
    array, kind = to_chw(img, "perspective")
    _check_grid_inputs(array, fill, mode, "perspective")
    h, w = array.shape[-2:]
    grid = _grid.perspective_grid(coeffs, w, h, _work_dtype(array.dtype))
    return from_chw(_grid.apply_grid(array, grid, mode, fill), kind, img)


def elastic_transform(img: Any, displacement: Any, interpolation: Any = "bilinear", fill: Any = None) -> Any:
    """Move every pixel by ``displacement`` (``[1, H, W, 2]``, in the normalized [-1, 1] units of
    ``grid_sample``); ``ElasticTransform.get_params`` draws a smooth random one."""
    mode = _interpolation(interpolation, "elastic_transform")
    if not (is_tensor(displacement) or isinstance(displacement, np.ndarray)):
        raise TypeError("elastic_transform: argument displacement should be a Tensor")
    shift = np.asarray(displacement.detach().cpu().numpy() if is_tensor(displacement) else displacement)
    array, kind = to_chw(img, "elastic_transform")  # PIL images take the tensor path too, as in torchvision
    h, w = array.shape[-2:]
    if shift.shape != (1, h, w, 2):
        raise ValueError(f"elastic_transform: argument displacement shape should be {(1, h, w, 2)}, but given "
                         f"{tuple(shift.shape)}")
    _check_grid_inputs(array, fill, mode, "elastic_transform")
    grid = (_grid.identity_grid(h, w) + shift)[0]  # float32 + displacement's dtype; the image is cast to it
    return from_chw(_grid.apply_grid(array, grid, mode, fill), kind, img)
