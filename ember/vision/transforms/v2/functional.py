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
    InterpolationMode, five_crop, get_dimensions, ten_crop, to_pil_image)
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


def _v2_forward_affine_matrix(center: Sequence[float], angle: float, translate: Sequence[float], scale: float,
                              shear: Sequence[float]) -> list[float]:
    """v2's ``_get_inverse_affine_matrix(..., inverted=False)``: input -> output (what boxes need)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    cos_sy, tan_sx, rot_minus_sy = math.cos(sy), math.tan(sx), rot - sy
    a = math.cos(rot_minus_sy) / cos_sy
    b = -(a * tan_sx + math.sin(rot))
    c = math.sin(rot_minus_sy) / cos_sy
    d = math.cos(rot) - c * tan_sx
    m = [a * scale, b * scale, 0.0, c * scale, d * scale, 0.0]
    m[2] += cx + translate[0] - m[0] * cx - m[1] * cy
    m[5] += cy + translate[1] - m[3] * cx - m[4] * cy
    return m


def _affine_boxes(boxes: BoundingBoxes, angle: float, translate: Sequence[float], scale: float, shear: Any,
                  center: Any, expand: bool) -> BoundingBoxes:
    """Move the four corners of each box and take their enclosing box (torchvision's rule), clamped."""
    array = _box_array(boxes)
    work = array.astype(np.float32) if array.dtype.kind != "f" else array.copy()
    xyxy = _to_xyxy(work, boxes.format).reshape(-1, 4)
    shear = [shear, 0.0] if isinstance(shear, numbers.Number) else list(shear)
    shear = [shear[0], shear[0]] if len(shear) == 1 else shear
    height, width = boxes.canvas_size
    center = [width * 0.5, height * 0.5] if center is None else [float(c) for c in center]
    forward = np.asarray(_v2_forward_affine_matrix(center, float(angle), [float(t) for t in translate], scale, shear),
                         dtype=work.dtype).reshape(2, 3)

    def move(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.stack([x * forward[0, 0] + y * forward[0, 1] + forward[0, 2],
                         x * forward[1, 0] + y * forward[1, 1] + forward[1, 2]], axis=-1)

    corners = move(xyxy[:, [0, 2, 2, 0]], xyxy[:, [1, 1, 3, 3]])  # (N, 4 corners, 2)
    out = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    canvas = boxes.canvas_size
    if expand:
        frame = move(np.array([0.0, 0.0, width, width], dtype=work.dtype),
                     np.array([0.0, height, height, 0.0], dtype=work.dtype))
        out = out - np.tile(frame.min(axis=0), 2)
        inverse = _v2_inverse_affine_matrix(center, float(angle), [float(t) for t in translate], scale, shear)
        new_width, new_height = _v2_output_size(inverse, width, height)
        canvas = (new_height, new_width)
    out = _clamp(out, BoundingBoxFormat.XYXY, canvas, boxes.clamping_mode)
    out = _from_xyxy(out, boxes.format).reshape(array.shape).astype(array.dtype)
    return _new_boxes(out, boxes, canvas)


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
    if isinstance(inpt, BoundingBoxes):
        return _affine_boxes(inpt, -angle, [0.0, 0.0], 1.0, [0.0, 0.0], center, expand)
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
    if scale <= 0.0:
        raise ValueError("Argument scale should be positive")
    if isinstance(inpt, BoundingBoxes):
        return _affine_boxes(inpt, angle, translate, scale, shear, center, expand=False)
    mode = _interpolation(interpolation, "affine")
    if isinstance(inpt, Mask):
        return _mask_op(_affine_image, inpt, angle, translate, scale, shear, "nearest", fill, center)
    if _is_image(inpt):
        return _rewrap(_affine_image(to_pure_tensor(inpt), angle, translate, scale, shear, mode, fill, center), inpt)
    return inpt


def permute_channels(inpt: Any, permutation: Sequence[int]) -> Any:
    """Reorder the channels of an image (``[..., C, H, W]``)."""
    if not _is_image(inpt):
        return inpt
    order = [int(i) for i in permutation]
    if is_pil(inpt):
        return F1.to_pil_image(F1.pil_to_tensor(inpt)[order])
    if isinstance(inpt, np.ndarray):
        return inpt[..., order] if inpt.ndim == 3 else inpt
    return _rewrap(to_pure_tensor(inpt)[..., order, :, :], inpt)


def sanitize_mask(boxes: BoundingBoxes, min_size: float = 1.0, min_area: float = 1.0) -> np.ndarray:
    """Which boxes to keep: at least ``min_size`` wide and high, ``min_area`` in area, inside the canvas."""
    xyxy = _to_xyxy(_box_array(boxes), boxes.format)
    image_h, image_w = boxes.canvas_size
    ws, hs = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    valid = (ws >= min_size) & (hs >= min_size) & (xyxy >= 0).all(axis=-1) & (ws * hs >= min_area)
    valid &= (xyxy[:, 0] <= image_w) & (xyxy[:, 2] <= image_w) & (xyxy[:, 1] <= image_h) & (xyxy[:, 3] <= image_h)
    return valid



# ------------------------------------------------------------------------- colour (v2's own kernels)
# v2 rewrote grey and blend with `add_(other, alpha=)`, which torch's CPU kernels fuse into one multiply-add;
# these reproduce that (float64 product, one rounding), so results are pixel-equal to v2 (v1's differ by one
# grey level on about 1% of uint8 pixels).
def _fma32(a: np.ndarray, b: float, c: np.ndarray) -> np.ndarray:
    if c.dtype == np.float32:
        return (a.astype(np.float64) * np.float64(np.float32(b)) + c.astype(np.float64)).astype(np.float32)
    return a * c.dtype.type(b) + c


def _v2_gray(array: np.ndarray) -> np.ndarray:
    """``r * 0.2989 + g * 0.587 + b * 0.114`` as v2 computes it, in float (not cast back)."""
    work = array.dtype if array.dtype.kind == "f" else np.dtype(np.float32)
    r, g, b = (array[..., i, :, :].astype(work) for i in range(3))
    gray = _fma32(b, 0.114, _fma32(g, 0.587, r * work.type(0.2989)))
    return gray[..., None, :, :]


def _v2_blend(image1: np.ndarray, image2: np.ndarray, ratio: float) -> np.ndarray:
    work = image1.dtype if image1.dtype.kind == "f" else np.dtype(np.float32)
    out = np.clip(_fma32(image2.astype(work), 1.0 - ratio, image1.astype(work) * work.type(ratio)), 0,
                  max_value(image1.dtype))
    return out.astype(image1.dtype)


def _v2_colour(inpt: Any, op: str, pil_fn: Any, kernel: Any) -> Any:
    if not _is_image(inpt):
        return inpt
    if is_pil(inpt):
        return pil_fn(inpt)
    plain = to_pure_tensor(inpt)
    array, kind = to_chw(plain, op)
    if array.shape[-3] not in (1, 3):
        raise TypeError(f"{op}: input image tensor permitted channel values are 1 or 3, but found {array.shape[-3]}")
    return _rewrap(from_chw(kernel(array), kind, plain), inpt)


def _images_only(fn: Any) -> Any:
    """A v1 pixel function for v2: applied to images (tv_tensors come back wrapped), other inputs pass through."""
    def wrapped(inpt: Any, *args: Any, **kwargs: Any) -> Any:
        return _rewrap(fn(to_pure_tensor(inpt), *args, **kwargs), inpt) if _is_image(inpt) else inpt

    wrapped.__name__, wrapped.__doc__ = fn.__name__, fn.__doc__
    return wrapped


adjust_gamma = _images_only(F1.adjust_gamma)
adjust_sharpness = _images_only(F1.adjust_sharpness)
autocontrast = _images_only(F1.autocontrast)
equalize = _images_only(F1.equalize)
invert = _images_only(F1.invert)
posterize = _images_only(F1.posterize)
solarize = _images_only(F1.solarize)
gaussian_blur = _images_only(F1.gaussian_blur)
perspective = _images_only(F1.perspective)
elastic_transform = _images_only(F1.elastic_transform)


def adjust_brightness(inpt: Any, brightness_factor: float) -> Any:
    if brightness_factor < 0:
        raise ValueError(f"brightness_factor ({brightness_factor}) is not non-negative.")

    def kernel(array: np.ndarray) -> np.ndarray:
        work = array.dtype if array.dtype.kind == "f" else np.dtype(np.float32)
        out = np.clip(array.astype(work) * work.type(brightness_factor), 0, max_value(array.dtype))
        return out.astype(array.dtype)

    return _v2_colour(inpt, "adjust_brightness", lambda img: F1.adjust_brightness(img, brightness_factor), kernel)


def rgb_to_grayscale(inpt: Any, num_output_channels: int = 1) -> Any:
    def kernel(array: np.ndarray) -> np.ndarray:
        gray = _v2_gray(array).astype(array.dtype) if array.shape[-3] == 3 else array
        return np.repeat(gray, num_output_channels, axis=-3)

    return _v2_colour(inpt, "rgb_to_grayscale", lambda img: F1.rgb_to_grayscale(img, num_output_channels), kernel)


def adjust_saturation(inpt: Any, saturation_factor: float) -> Any:
    if saturation_factor < 0:
        raise ValueError(f"saturation_factor ({saturation_factor}) is not non-negative.")

    def kernel(array: np.ndarray) -> np.ndarray:
        if array.shape[-3] == 1:
            return array
        gray = _v2_gray(array)
        gray = gray if array.dtype.kind == "f" else np.floor(gray)
        return _v2_blend(array, gray, saturation_factor)

    return _v2_colour(inpt, "adjust_saturation", lambda img: F1.adjust_saturation(img, saturation_factor), kernel)


def adjust_contrast(inpt: Any, contrast_factor: float) -> Any:
    if contrast_factor < 0:
        raise ValueError(f"contrast_factor ({contrast_factor}) is not non-negative.")

    def kernel(array: np.ndarray) -> np.ndarray:
        floating = array.dtype.kind == "f"
        if array.shape[-3] == 3:
            gray = _v2_gray(array)
            gray = gray if floating else np.floor(gray)
        else:
            gray = array if floating else array.astype(np.float32)
        mean = gray.mean(axis=(-3, -2, -1), keepdims=True, dtype=gray.dtype)
        return _v2_blend(array, mean, contrast_factor)

    return _v2_colour(inpt, "adjust_contrast", lambda img: F1.adjust_contrast(img, contrast_factor), kernel)


def _v2_rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    """v2's ``_rgb_to_hsv`` (it multiplies by 1/6 where v1 divides by 6)."""
    r, g, b = rgb[..., 0, :, :], rgb[..., 1, :, :], rgb[..., 2, :, :]
    maxc, minc = rgb.max(axis=-3), rgb.min(axis=-3)
    eqc = maxc == minc
    channel_range = maxc - minc
    ones = np.ones_like(maxc)
    s = channel_range / np.where(eqc, ones, maxc)
    divisor = np.where(eqc, ones, channel_range)
    rc, gc, bc = (maxc - r) / divisor, (maxc - g) / divisor, (maxc - b) / divisor
    neq_r, eq_g = maxc != r, maxc == g
    one = rgb.dtype.type(1.0)
    hg = (rc + rgb.dtype.type(2.0) - bc) * (eq_g & neq_r)
    hr = (bc - gc) * ~neq_r
    hb = (gc + rgb.dtype.type(4.0) - rc) * (neq_r & ~eq_g)
    h = np.fmod((hr + hg + hb) * rgb.dtype.type(1.0 / 6.0) + one, one)
    return np.stack((h, s, maxc), axis=-3)


def _v2_hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0, :, :], hsv[..., 1, :, :], hsv[..., 2, :, :]
    one = hsv.dtype.type(1.0)
    h6 = h * hsv.dtype.type(6)
    i = np.floor(h6)
    f = h6 - i
    i = i.astype(np.int32) % 6
    sxf, one_minus_s = s * f, one - s
    q = np.clip((one - sxf) * v, 0.0, 1.0)
    t = np.clip((sxf + one_minus_s) * v, 0.0, 1.0)
    p = np.clip(one_minus_s * v, 0.0, 1.0)
    vpqt = np.stack((v, p, q, t), axis=-3)
    select = np.array([[0, 2, 1, 1, 3, 0], [3, 0, 0, 2, 1, 1], [1, 1, 3, 0, 0, 2]])[:, i]  # (3, ..., H, W)
    return np.take_along_axis(vpqt, np.moveaxis(select, 0, -3), axis=-3).astype(hsv.dtype)


def adjust_hue(inpt: Any, hue_factor: float) -> Any:
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")

    def kernel(array: np.ndarray) -> np.ndarray:
        if array.shape[-3] == 1:
            return array
        floating = array.dtype.kind == "f"
        f32 = np.float32
        work = array.astype(f32) * f32(1.0 / max_value(array.dtype)) if not floating else array.astype(f32)
        hsv = _v2_rgb_to_hsv(work)
        hsv[..., 0, :, :] = np.mod(hsv[..., 0, :, :] + f32(hue_factor), f32(1.0))
        rgb = _v2_hsv_to_rgb(hsv)
        if floating:
            return rgb.astype(array.dtype)
        return (rgb * f32(max_value(array.dtype) + 1.0 - 1e-3)).astype(array.dtype)

    return _v2_colour(inpt, "adjust_hue", lambda img: F1.adjust_hue(img, hue_factor), kernel)
