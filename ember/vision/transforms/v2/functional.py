"""``torchvision.transforms.v2.functional``: the v1 functions, dispatched on what the input holds.

Images (``tv_tensors.Image``, plain tensors, PIL and NumPy images) go through
``ember.vision.transforms.functional``; ``tv_tensors.Mask`` through the same geometric functions with nearest
neighbours; ``tv_tensors.BoundingBoxes`` through box arithmetic (torchvision 0.28's, including its clamping to
the canvas); anything else passes through. tv_tensors come back as the class they came in.

Example:
    >>> import ember
    >>> from ember.vision import tv_tensors
    >>> from ember.vision.transforms.v2 import functional as F
    >>> boxes = tv_tensors.BoundingBoxes([[1, 2, 5, 6]], format="XYXY", canvas_size=(10, 10))
    >>> F.horizontal_flip(boxes).tolist()
    [[5, 2, 9, 6]]
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

import ember
from ember.tensor import Tensor
from ember.vision import tv_tensors
from ember.vision.transforms import _grid
from ember.vision.transforms import functional as F1
from ember.vision.transforms._functional_geometry import _check_grid_inputs, _interpolation, _work_dtype
from ember.vision.transforms._image import from_chw, is_pil, max_value, to_chw
from ember.vision.transforms.functional import (  # noqa: F401  (v2.functional re-exports the v1 names)
    InterpolationMode, adjust_brightness, adjust_contrast, adjust_gamma, adjust_hue, adjust_saturation,
    adjust_sharpness, autocontrast, elastic_transform, equalize, five_crop, gaussian_blur, get_dimensions, invert,
    perspective, posterize, rgb_to_grayscale, solarize, ten_crop, to_pil_image)
from ember.vision.tv_tensors import BoundingBoxes, BoundingBoxFormat, Mask

def is_pure_tensor(inpt: Any) -> bool:
    """A tensor that is not a tv_tensor (v2 treats the first one as the image when no image is given)."""
    return isinstance(inpt, Tensor) and not isinstance(inpt, tv_tensors.TVTensor)


def _is_image(inpt: Any) -> bool:
    return isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or is_pure_tensor(inpt) or is_pil(inpt) or \
        isinstance(inpt, np.ndarray)


def _rewrap(output: Any, like: Any) -> Any:
    """tv_tensors come back as their class; plain tensors, PIL and NumPy images as they are."""
    if isinstance(like, tv_tensors.TVTensor) and isinstance(output, Tensor):
        return tv_tensors.wrap(output, like=like)
    return output


def _image_op(fn: Any, inpt: Any, *args: Any, **kwargs: Any) -> Any:
    return _rewrap(fn(inpt, *args, **kwargs), inpt)


# ------------------------------------------------------------------------------------------------ boxes
def _box_array(boxes: BoundingBoxes) -> np.ndarray:
    return np.asarray(boxes.detach().cpu().numpy())


def _cxcywh_corner(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x1y1, wh) of CXCYWH boxes, in float32 for integer boxes (torchvision computes ``c - wh / 2`` there)."""
    work = array.astype(np.float32) if array.dtype.kind != "f" else array
    return work[..., :2] - work[..., 2:] / 2, work[..., 2:]


def _convert(array: np.ndarray, old: BoundingBoxFormat, new: BoundingBoxFormat) -> np.ndarray:
    """torchvision 0.28's box conversions, with its integer rules (floor halves one way, truncation the other)."""
    floating = array.dtype.kind == "f"
    out = array.copy()
    if old == new:
        return out
    if old == BoundingBoxFormat.XYWH and new == BoundingBoxFormat.CXCYWH:
        out[..., :2] += out[..., 2:] / 2 if floating else np.floor_divide(out[..., 2:], 2)
        return out
    if old == BoundingBoxFormat.CXCYWH:
        corner, wh = _cxcywh_corner(array)
        if new == BoundingBoxFormat.XYWH:
            if floating:
                return np.concatenate([corner, wh], axis=-1).astype(array.dtype)
            x1y1, x2y2 = corner.astype(array.dtype), (corner + wh).astype(array.dtype)  # truncation, as .to()
            return np.concatenate([x1y1, x2y2 - x1y1], axis=-1)
        out = np.concatenate([corner, corner + wh], axis=-1).astype(array.dtype)
    elif old == BoundingBoxFormat.XYWH:
        out[..., 2:] += out[..., :2]
    if new == BoundingBoxFormat.XYWH:
        out[..., 2:] -= out[..., :2]
    elif new == BoundingBoxFormat.CXCYWH:
        out[..., 2:] -= out[..., :2]
        doubled = out[..., :2] * 2 + out[..., 2:]
        out[..., :2] = doubled / 2 if floating else np.floor_divide(doubled, 2)
    return out


def _to_xyxy(array: np.ndarray, fmt: BoundingBoxFormat) -> np.ndarray:
    return _convert(array, fmt, BoundingBoxFormat.XYXY)


def _from_xyxy(array: np.ndarray, fmt: BoundingBoxFormat) -> np.ndarray:
    return _convert(array, BoundingBoxFormat.XYXY, fmt)


def convert_bounding_box_format(inpt: Any, old_format: Any = None, new_format: Any = None,
                                inplace: bool = False) -> Any:
    """Boxes in ``new_format`` (a BoundingBoxes input knows its own format)."""
    if new_format is None:
        raise TypeError("convert_bounding_box_format() missing 1 required argument: 'new_format'")
    new_format = BoundingBoxFormat[new_format.upper()] if isinstance(new_format, str) else new_format
    if isinstance(inpt, BoundingBoxes):
        out = _convert(_box_array(inpt), inpt.format, new_format)
        return BoundingBoxes.wrap(ember.from_numpy(out), like=inpt, format=new_format)
    old_format = BoundingBoxFormat[old_format.upper()] if isinstance(old_format, str) else old_format
    array = np.asarray(inpt.detach().cpu().numpy())
    return ember.from_numpy(_convert(array, old_format, new_format))


def _clamp(array: np.ndarray, fmt: BoundingBoxFormat, canvas_size: tuple[int, int], mode: str | None) -> np.ndarray:
    """torchvision's ``_clamp_bounding_boxes``: in float, via XYXY, then back to the boxes' dtype."""
    if mode is None:
        return array.copy()
    work = array.astype(np.float32) if array.dtype.kind != "f" else array.copy()
    xyxy = _to_xyxy(work, fmt)
    xyxy[..., 0::2] = np.clip(xyxy[..., 0::2], 0, canvas_size[1])
    xyxy[..., 1::2] = np.clip(xyxy[..., 1::2], 0, canvas_size[0])
    return _from_xyxy(xyxy, fmt).astype(array.dtype)


def _new_boxes(array: np.ndarray, like: BoundingBoxes, canvas_size: tuple[int, int]) -> BoundingBoxes:
    return BoundingBoxes.wrap(ember.from_numpy(np.ascontiguousarray(array)), like=like, canvas_size=canvas_size)


def _flip_boxes(boxes: BoundingBoxes, axis: int) -> BoundingBoxes:
    """Mirror across the canvas: x (axis 0) over the width, y (axis 1) over the height."""
    array = _box_array(boxes).copy()
    extent = boxes.canvas_size[1 - axis]
    if boxes.format == BoundingBoxFormat.XYXY:
        low, high = array[..., axis].copy(), array[..., axis + 2].copy()
        array[..., axis], array[..., axis + 2] = extent - high, extent - low
    elif boxes.format == BoundingBoxFormat.XYWH:
        array[..., axis] = extent - (array[..., axis] + array[..., axis + 2])
    else:
        array[..., axis] = extent - array[..., axis]
    return _new_boxes(array, boxes, boxes.canvas_size)


def _shift_boxes(boxes: BoundingBoxes, dx: int, dy: int, canvas_size: tuple[int, int]) -> BoundingBoxes:
    """Move by (dx, dy) onto a new canvas and clamp (the crop / pad rule)."""
    array = _box_array(boxes)
    shift = [dx, dy, dx, dy] if boxes.format == BoundingBoxFormat.XYXY else [dx, dy, 0, 0]
    moved = array + np.asarray(shift, dtype=array.dtype)
    return _new_boxes(_clamp(moved, boxes.format, canvas_size, boxes.clamping_mode), boxes, canvas_size)


def clamp_bounding_boxes(inpt: BoundingBoxes, format: Any = None, canvas_size: Any = None,  # noqa: A002
                         clamping_mode: Any = "auto") -> BoundingBoxes:
    if not isinstance(inpt, BoundingBoxes):
        raise TypeError("clamp_bounding_boxes: ember supports BoundingBoxes inputs only")
    mode = inpt.clamping_mode if clamping_mode == "auto" else clamping_mode
    return _new_boxes(_clamp(_box_array(inpt), inpt.format, inpt.canvas_size, mode), inpt, inpt.canvas_size)


# ------------------------------------------------------------------------------------------- dispatchers
def _mask_op(fn: Any, mask: Mask, *args: Any, **kwargs: Any) -> Mask:
    return tv_tensors.wrap(fn(mask.as_subclass(Tensor), *args, **kwargs), like=mask)


def horizontal_flip(inpt: Any) -> Any:
    if isinstance(inpt, BoundingBoxes):
        return _flip_boxes(inpt, 0)
    if isinstance(inpt, Mask) or _is_image(inpt):
        return _image_op(F1.hflip, inpt)
    return inpt


def vertical_flip(inpt: Any) -> Any:
    if isinstance(inpt, BoundingBoxes):
        return _flip_boxes(inpt, 1)
    if isinstance(inpt, Mask) or _is_image(inpt):
        return _image_op(F1.vflip, inpt)
    return inpt


hflip, vflip = horizontal_flip, vertical_flip  # v2 keeps the v1 names as aliases


def crop(inpt: Any, top: int, left: int, height: int, width: int) -> Any:
    if isinstance(inpt, BoundingBoxes):
        return _shift_boxes(inpt, -left, -top, (height, width))
    if isinstance(inpt, Mask) or _is_image(inpt):
        return _image_op(F1.crop, inpt, top, left, height, width)
    return inpt


def _canvas(inpt: Any) -> tuple[int, int]:
    if isinstance(inpt, BoundingBoxes):
        return inpt.canvas_size
    _, h, w = F1.get_dimensions(inpt)
    return h, w


def resize(inpt: Any, size: Any, interpolation: Any = InterpolationMode.BILINEAR, max_size: int | None = None,
           antialias: bool | None = True) -> Any:
    if size is None:
        raise ValueError("resize: size=None (resize by max_size only) is not supported in ember yet; give a size")
    if isinstance(interpolation, str):
        interpolation = InterpolationMode(interpolation)
    if isinstance(inpt, BoundingBoxes):
        old_h, old_w = inpt.canvas_size
        new_h, new_w = F1._output_size(old_h, old_w, size, max_size)
        if (new_h, new_w) == (old_h, old_w):
            return inpt
        ratios = np.asarray([new_w / old_w, new_h / old_h] * 2, dtype=np.float32)
        array = _box_array(inpt)
        scaled = (array.astype(np.float32) if array.dtype.kind != "f" else array) * ratios
        return _new_boxes(scaled.astype(array.dtype), inpt, (new_h, new_w))
    if isinstance(inpt, Mask):
        mode = interpolation if interpolation in (InterpolationMode.NEAREST, InterpolationMode.NEAREST_EXACT) \
            else InterpolationMode.NEAREST
        return _mask_op(F1.resize, inpt, size, mode, max_size)
    if _is_image(inpt):
        return _image_op(F1.resize, inpt, size, interpolation, max_size, antialias)
    return inpt


def center_crop(inpt: Any, output_size: Any) -> Any:
    if isinstance(inpt, BoundingBoxes):
        crop_h, crop_w = (output_size, output_size) if isinstance(output_size, numbers.Number) else \
            ((output_size[0], output_size[0]) if len(output_size) == 1 else tuple(output_size))
        h, w = inpt.canvas_size
        top, left = int(round((h - crop_h) / 2.0)), int(round((w - crop_w) / 2.0))
        return _shift_boxes(inpt, -left, -top, (crop_h, crop_w))
    if isinstance(inpt, Mask) or _is_image(inpt):
        return _image_op(F1.center_crop, inpt, output_size)
    return inpt


def resized_crop(inpt: Any, top: int, left: int, height: int, width: int, size: Any,
                 interpolation: Any = InterpolationMode.BILINEAR, antialias: bool | None = True) -> Any:
    return resize(crop(inpt, top, left, height, width), size, interpolation, antialias=antialias)


def pad(inpt: Any, padding: Any, fill: Any = None, padding_mode: str = "constant") -> Any:
    """``padding``: an int, [left/right, top/bottom] or [left, top, right, bottom] (v1's order)."""
    if isinstance(inpt, BoundingBoxes):
        if padding_mode != "constant":
            raise ValueError(f"Padding mode '{padding_mode}' is not supported with bounding boxes")
        left, top, right, bottom = F1._pad_list(padding)
        h, w = inpt.canvas_size
        return _shift_boxes(inpt, left, top, (h + top + bottom, w + left + right))
    if isinstance(inpt, Mask) or _is_image(inpt):
        return _image_op(F1.pad, inpt, padding, 0 if fill is None else fill, padding_mode)
    return inpt


def normalize(inpt: Any, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> Any:
    if is_pil(inpt):
        raise TypeError("normalize: PIL images are not supported (convert with ToImage and ToDtype first)")
    if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or is_pure_tensor(inpt):
        if not inpt.is_floating_point():
            raise TypeError(f"Input tensor should be a float tensor. Got {inpt.dtype}.")
        return _rewrap(F1.normalize(inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt,
                                    mean, std, inplace), inpt)
    return inpt


def to_image(inpt: Any) -> tv_tensors.Image:
    """A PIL image, NumPy ``HxWxC`` image or tensor ``[..., C, H, W]`` as a ``tv_tensors.Image``."""
    if isinstance(inpt, np.ndarray):
        array = inpt[..., None] if inpt.ndim == 2 else inpt
        return tv_tensors.Image(ember.from_numpy(np.ascontiguousarray(np.moveaxis(array, -1, -3))))
    if is_pil(inpt) or isinstance(inpt, Tensor):
        return tv_tensors.Image(inpt)
    raise TypeError(f"to_image: input can either be a pure Tensor, a numpy array or a PIL image, but got "
                    f"{type(inpt).__name__} instead.")


def to_dtype(inpt: Any, dtype: Any = ember.float32, scale: bool = False) -> Any:
    """Change the dtype; with ``scale``, images map value ranges (uint8 255 <-> float 1.0) by v2's rules."""
    if not (isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or is_pure_tensor(inpt)):
        return _rewrap(inpt.as_subclass(Tensor).to(dtype), inpt) if isinstance(inpt, Tensor) else inpt
    plain = inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt
    if plain.dtype == dtype:
        return inpt
    if not scale:
        return _rewrap(plain.to(dtype), inpt)
    array = np.asarray(plain.detach().cpu().numpy())
    target = np.dtype(ember.empty(0, dtype=dtype).numpy().dtype)
    if array.dtype.kind == "f":
        if target.kind == "f":
            return _rewrap(plain.to(dtype), inpt)
        if (array.dtype == np.float32 and target in (np.int32, np.int64)) or \
                (array.dtype == np.float64 and target == np.int64):
            raise RuntimeError(f"The conversion from {plain.dtype} to {dtype} cannot be performed safely.")
        out = (array * array.dtype.type(max_value(target) + 1.0 - 1e-3)).astype(target)
    elif target.kind == "f":
        # v2 multiplies by the reciprocal of the maximum (v1 divides): the results differ in the last bit
        out = array.astype(target) * target.type(1.0 / max_value(array.dtype))
    else:
        bits_in, bits_out = _value_bits(array.dtype), _value_bits(target)
        shift = abs(bits_in - bits_out)
        if bits_in > bits_out:
            out = (array >> shift).astype(target) if array.dtype != np.uint16 else (array / 2 ** shift).astype(target)
        else:
            out = array.astype(target) << shift if target != np.uint16 else array.astype(target) * 2 ** shift
    return _rewrap(ember.from_numpy(np.ascontiguousarray(out)).to(plain.device), inpt)


def _value_bits(dtype: np.dtype) -> int:
    bits = {np.dtype(np.uint8): 8, np.dtype(np.int8): 7, np.dtype(np.int16): 15, np.dtype(np.uint16): 16,
            np.dtype(np.int32): 31, np.dtype(np.int64): 63}
    if np.dtype(dtype) not in bits:
        raise TypeError(f"Number of value bits is only defined for integer dtypes, but got {dtype}.")
    return bits[np.dtype(dtype)]


def to_pure_tensor(inpt: Any) -> Any:
    return inpt.as_subclass(Tensor) if isinstance(inpt, tv_tensors.TVTensor) else inpt


def erase(inpt: Any, i: int, j: int, h: int, w: int, v: Any, inplace: bool = False) -> Any:
    if isinstance(inpt, (tv_tensors.Image, tv_tensors.Video)) or is_pure_tensor(inpt):
        return _rewrap(F1.erase(to_pure_tensor(inpt), i, j, h, w, v, inplace), inpt)
    return inpt


def get_size(inpt: Any) -> list[int]:
    """[height, width] of an image, mask or the canvas of boxes."""
    return list(_canvas(inpt) if isinstance(inpt, BoundingBoxes) else F1.get_dimensions(inpt)[1:])


# ------------------------------------------------------------------------------------- rotate and affine
def _v2_inverse_affine_matrix(center: Sequence[float], angle: float, translate: Sequence[float], scale: float,
                              shear: Sequence[float]) -> list[float]:
    """v2's ``_get_inverse_affine_matrix``: v1's matrix with the terms grouped differently (last-bit changes)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    cos_sy, tan_sx, rot_minus_sy = math.cos(sy), math.tan(sx), rot - sy
    cx_plus_tx, cy_plus_ty = cx + translate[0], cy + translate[1]
    a = math.cos(rot_minus_sy) / cos_sy
    b = -(a * tan_sx + math.sin(rot))
    c = math.sin(rot_minus_sy) / cos_sy
    d = math.cos(rot) - c * tan_sx
    m = [d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0]
    m[2] += cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty
    m[5] += cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty
    return m


def _v2_output_size(matrix: Sequence[float], w: int, h: int) -> tuple[int, int]:
    half_w, half_h = 0.5 * w, 0.5 * h
    corners = np.array([[-half_w, -half_h, 1.0], [-half_w, half_h, 1.0], [half_w, half_h, 1.0],
                        [half_w, -half_h, 1.0]], dtype=np.float32)
    moved = corners @ np.asarray(matrix, dtype=np.float32).reshape(2, 3).T
    halfs = np.array([half_w, half_h], dtype=np.float32)
    low, high = moved.min(axis=0) + halfs, moved.max(axis=0) + halfs
    tol = np.float32(1e-4)
    inv_tol = np.float32(1.0 / 1e-4)
    size = np.ceil(np.trunc(high * inv_tol) * tol) - np.floor(np.trunc(low * inv_tol) * tol)
    return int(size[0]), int(size[1])


def _grid_kernel(inpt: Any, matrix: list[float], out_size: tuple[int, int], mode: str, fill: Any, op: str) -> Any:
    array, kind = to_chw(inpt, op)
    _check_grid_inputs(array, fill, mode, op)
    h, w = array.shape[-2:]
    grid = _grid.affine_grid(matrix, w, h, out_size[0], out_size[1], _work_dtype(array.dtype))
    return from_chw(_grid.apply_grid(array, grid, mode, fill, v2_blend=True), kind, inpt)


def _refuse_boxes(inpt: Any, op: str) -> None:
    if isinstance(inpt, BoundingBoxes):
        raise TypeError(f"v2.functional.{op}: bounding boxes are not supported by ember yet (images and masks are)")


def _rotate_image(img: Any, angle: float, mode: str, expand: bool, center: Any, fill: Any) -> Any:
    angle = angle % 360
    if center is None and not is_pil(img):
        array, kind = to_chw(img, "rotate")
        square = array.shape[-1] == array.shape[-2]
        quarter_turns = {0: 0, 180: 2, 90: 1, 270: 3}.get(angle) if angle in (0, 180) or expand or square else None
        if quarter_turns is not None:  # v2 turns exact multiples of 90 degrees without resampling
            return from_chw(np.ascontiguousarray(np.rot90(array, quarter_turns, axes=(-2, -1))), kind, img)
    if is_pil(img):
        return F1.rotate(img, angle, mode, expand, center, fill)
    h, w = F1.get_dimensions(img)[1:]
    center_f = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    matrix = _v2_inverse_affine_matrix(center_f, -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    out_size = _v2_output_size(matrix, w, h) if expand else (w, h)
    return _grid_kernel(img, matrix, out_size, mode, fill, "rotate")


def rotate(inpt: Any, angle: float, interpolation: Any = InterpolationMode.NEAREST, expand: bool = False,
           center: Sequence[float] | None = None, fill: Any = None) -> Any:
    """Rotate counter-clockwise by ``angle`` degrees (v2's kernel: multiples of 90 degrees are exact turns)."""
    _refuse_boxes(inpt, "rotate")
    mode = _interpolation(interpolation, "rotate")
    if isinstance(inpt, Mask):
        return _mask_op(_rotate_image, inpt, angle, "nearest", expand, center, fill)
    if _is_image(inpt):
        return _rewrap(_rotate_image(to_pure_tensor(inpt), angle, mode, expand, center, fill), inpt)
    return inpt


def _affine_image(img: Any, angle: float, translate: Sequence[float], scale: float, shear: Any, mode: str, fill: Any,
                  center: Any) -> Any:
    if is_pil(img):
        return F1.affine(img, angle, list(translate), scale, shear, mode, fill, center)
    shear = [shear, 0.0] if isinstance(shear, numbers.Number) else list(shear)
    shear = [shear[0], shear[0]] if len(shear) == 1 else shear
    h, w = F1.get_dimensions(img)[1:]
    center_f = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    matrix = _v2_inverse_affine_matrix(center_f, float(angle), [float(t) for t in translate], scale, shear)
    return _grid_kernel(img, matrix, (w, h), mode, fill, "affine")


def affine(inpt: Any, angle: float, translate: Sequence[float], scale: float, shear: Any,
           interpolation: Any = InterpolationMode.NEAREST, fill: Any = None, center: Sequence[float] | None = None
           ) -> Any:
    """Rotate, scale, shear about ``center`` and translate, keeping the size (v2's kernel)."""
    _refuse_boxes(inpt, "affine")
    if scale <= 0.0:
        raise ValueError("Argument scale should be positive")
    mode = _interpolation(interpolation, "affine")
    if isinstance(inpt, Mask):
        return _mask_op(_affine_image, inpt, angle, translate, scale, shear, "nearest", fill, center)
    if _is_image(inpt):
        return _rewrap(_affine_image(to_pure_tensor(inpt), angle, translate, scale, shear, mode, fill, center), inpt)
    return inpt
