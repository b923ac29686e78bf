"""Image functions with torchvision's names and semantics (``torchvision.transforms.functional``).

Each takes a PIL image, a NumPy ``HxW``/``HxWxC`` image or an ember tensor ``[..., C, H, W]`` and
returns the same kind. PIL images go through Pillow's own operations (as torchvision does); NumPy
images and tensors follow torchvision's tensor path (antialiased resampling, uint8 results
truncated where torchvision's ``.to(uint8)`` truncates).

Example:
    >>> import numpy as np
    >>> from ember.vision.transforms import functional as F
    >>> img = np.zeros((40, 60, 3), dtype=np.uint8)
    >>> F.resize(img, 20).shape, F.center_crop(img, 10).shape
    ((20, 30, 3), (10, 10, 3))
"""
from __future__ import annotations

import enum
import numbers
from typing import Any, Sequence

import numpy as np

from ember.vision.transforms import _resample, _tensor_geometry
from ember.vision.transforms._image import from_chw, image_size, is_pil, is_tensor, max_value, require_pillow, to_chw
from ember.data.transforms import Normalize
import ember


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_FILTERS = {"nearest": 0, "nearest-exact": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


def _mode(interpolation: Any) -> str:
    if isinstance(interpolation, InterpolationMode):
        return interpolation.value
    if isinstance(interpolation, int):  # PIL's integer filter codes
        return {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}[interpolation]
    return InterpolationMode(interpolation).value


def get_dimensions(img: Any) -> list[int]:
    """[channels, height, width]."""
    if is_pil(img):
        return [len(img.getbands()), img.size[1], img.size[0]]
    array, _ = to_chw(img, "get_dimensions")
    return [int(array.shape[-3]), int(array.shape[-2]), int(array.shape[-1])]


def get_image_size(img: Any) -> list[int]:
    """[width, height] (torchvision's order)."""
    h, w = image_size(img)
    return [w, h]


# ------------------------------------------------------------------------------------------- conversion
def to_tensor(pic: Any) -> Any:
    """PIL / NumPy ``HxWxC`` image -> float32 ``CxHxW`` tensor in [0, 1] (uint8 divided by 255)."""
    if is_tensor(pic):
        raise TypeError("to_tensor: pic should be a PIL Image or a NumPy ndarray, got a tensor")
    if not (is_pil(pic) or isinstance(pic, np.ndarray)):
        raise TypeError(f"to_tensor: pic should be a PIL Image or ndarray, got {type(pic).__name__}")
    if isinstance(pic, np.ndarray) and pic.ndim not in (2, 3):
        raise ValueError(f"to_tensor: pic should be 2 or 3 dimensional, got {pic.ndim} dimensions")
    array = np.asarray(pic)
    if is_pil(pic) and pic.mode == "1":
        array = array.astype(np.uint8) * 255
    chw = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    if chw.dtype == np.uint8:
        return ember.from_numpy(np.ascontiguousarray(chw).astype(np.float32) / np.float32(255.0))
    return ember.from_numpy(np.ascontiguousarray(chw))


def pil_to_tensor(pic: Any) -> Any:
    """PIL / NumPy image -> ``CxHxW`` tensor of the same dtype (no scaling)."""
    if not (is_pil(pic) or isinstance(pic, np.ndarray)):
        raise TypeError(f"pil_to_tensor: pic should be a PIL Image, got {type(pic).__name__}")
    array = np.asarray(pic)
    chw = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    return ember.from_numpy(np.ascontiguousarray(chw))


def to_pil_image(pic: Any, mode: str | None = None) -> Any:
    """``CxHxW`` tensor (floats scaled by 255) or ``HxWxC`` array -> PIL image."""
    Image = require_pillow("to_pil_image")
    if is_tensor(pic):
        array = np.asarray(pic.detach().cpu().numpy())
        array = array[None] if array.ndim == 2 else array
        if array.dtype.kind == "f":
            array = (array * 255).astype(np.uint8)  # torchvision truncates here too
        array = array.transpose(1, 2, 0)
    else:
        array = np.asarray(pic)
        array = array[..., None] if array.ndim == 2 else array
    if array.shape[-1] == 1:
        array = array[..., 0]
    return Image.fromarray(np.ascontiguousarray(array), mode=mode)


def convert_image_dtype(image: Any, dtype: Any = None) -> Any:
    """Convert a tensor image's dtype, rescaling values (uint8 255 <-> float 1.0)."""
    dtype = dtype or ember.float32
    array = np.asarray(image.detach().cpu().numpy())
    target = np.dtype(ember.empty(0, dtype=dtype).numpy().dtype)
    if array.dtype == target:
        return image
    if array.dtype.kind == "f" and target.kind == "f":
        out = array.astype(target)
    elif target.kind == "f":
        out = array.astype(target) / target.type(max_value(array.dtype))
    elif array.dtype.kind == "f":
        # torchvision: (x * (max + 1 - eps)) truncated, so 1.0 maps to max without overflow
        eps = 1e-3
        out = (array * (max_value(target) + 1.0 - eps)).astype(target)
    else:
        src, dst = max_value(array.dtype), max_value(target)
        out = (array.astype(np.int64) * int(dst + 1) // int(src + 1)).astype(target) if dst > src else \
            (array.astype(np.int64) // int((src + 1) // (dst + 1))).astype(target)
    return ember.from_numpy(np.ascontiguousarray(out))


def normalize(tensor: Any, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> Any:
    """``(x - mean) / std`` per channel of a float tensor ``[..., C, H, W]``."""
    return Normalize(mean, std, inplace)(tensor)


# ---------------------------------------------------------------------------------------------- geometry
def _output_size(h: int, w: int, size: Any, max_size: int | None) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        size = [int(size)]
    size = list(size)
    if len(size) == 1:  # the shorter edge becomes size[0], the aspect ratio is kept
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size[0], int(size[0] * long / short)
        if max_size is not None:
            if max_size <= size[0]:
                raise ValueError(f"max_size = {max_size} must be strictly greater than the requested size for the "
                                 f"smaller edge size = {size}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_long, new_short) if w <= h else (new_short, new_long)
    if len(size) != 2:
        raise ValueError(f"resize: size must be an int or a sequence of 1 or 2 ints, got {size}")
    if max_size is not None:
        raise ValueError("max_size should only be passed if size specifies the length of the smaller edge, i.e. "
                         "size should be an int or a sequence of length 1")
    return int(size[0]), int(size[1])


def resize(img: Any, size: Any, interpolation: Any = InterpolationMode.BILINEAR, max_size: int | None = None,
           antialias: bool | None = True) -> Any:
    """Resize to ``size`` ((h, w), or an int for the shorter edge). Bilinear/bicubic are antialiased when
    downscaling (``antialias=True``, torchvision's default); PIL images use Pillow's resampling."""
    mode = _mode(interpolation)
    h, w = image_size(img, "resize")
    out_h, out_w = _output_size(h, w, size, max_size)
    if (out_h, out_w) == (h, w):
        return img
    if is_pil(img):
        return img.resize((out_w, out_h), _PIL_FILTERS[mode])
    array, kind = to_chw(img, "resize")
    if mode in ("nearest", "nearest-exact"):
        out = _resample.nearest(array, (out_h, out_w), exact=mode == "nearest-exact")
    elif mode in ("bilinear", "bicubic"):
        out = _resample.resample(array, (out_h, out_w), mode, bool(antialias))
    else:
        raise ValueError(f"resize: interpolation {mode!r} is only available for PIL images; use bilinear, bicubic, "
                         "nearest or nearest-exact for arrays and tensors")
    return from_chw(out, kind, img)


def crop(img: Any, top: int, left: int, height: int, width: int) -> Any:
    """Crop ``[top:top+height, left:left+width]``; parts outside the image are zero (torchvision pads)."""
    if is_pil(img):
        return img.crop((left, top, left + width, top + height))
    if is_tensor(img):  # a view, differentiable, as torchvision's slice
        return _tensor_geometry.crop(img, top, left, height, width)
    array, kind = to_chw(img, "crop")
    h, w = array.shape[-2:]
    bottom, right = top + height, left + width
    if left < 0 or top < 0 or right > w or bottom > h:
        pads = [max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0)]
        array = _pad_array(array, pads, 0, "constant")
        top, left = max(top, 0), max(left, 0)
        bottom, right = top + height, left + width
    return from_chw(array[..., top:bottom, left:right], kind, img)


def center_crop(img: Any, output_size: Any) -> Any:
    """Crop the centre ``output_size`` ((h, w) or an int); pads with zeros if the image is smaller."""
    if isinstance(output_size, numbers.Number):
        output_size = (int(output_size), int(output_size))
    elif len(output_size) == 1:
        output_size = (output_size[0], output_size[0])
    crop_h, crop_w = output_size
    h, w = image_size(img)
    if crop_w > w or crop_h > h:
        pads = [(crop_w - w) // 2 if crop_w > w else 0, (crop_h - h) // 2 if crop_h > h else 0,
                (crop_w - w + 1) // 2 if crop_w > w else 0, (crop_h - h + 1) // 2 if crop_h > h else 0]
        img = pad(img, pads, fill=0)
        h, w = image_size(img)
        if crop_w == w and crop_h == h:
            return img
    top = int(round((h - crop_h) / 2.0))
    left = int(round((w - crop_w) / 2.0))
    return crop(img, top, left, crop_h, crop_w)


def resized_crop(img: Any, top: int, left: int, height: int, width: int, size: Any,
                 interpolation: Any = InterpolationMode.BILINEAR, antialias: bool | None = True) -> Any:
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def _pad_array(array: np.ndarray, pads: list[int], fill: Any, padding_mode: str) -> np.ndarray:
    left, top, right, bottom = pads
    width = [(0, 0)] * (array.ndim - 2) + [(top, bottom), (left, right)]
    if padding_mode == "constant":
        if isinstance(fill, (tuple, list)):  # one fill value per channel
            if len(fill) != array.shape[-3]:
                raise ValueError(f"pad: fill has {len(fill)} values for {array.shape[-3]} channels")
            return np.concatenate([np.pad(array[..., c:c + 1, :, :], width, constant_values=v)
                                   for c, v in enumerate(fill)], axis=-3)
        return np.pad(array, width, constant_values=fill)
    modes = {"edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}
    if padding_mode not in modes:
        raise ValueError(f"pad: padding_mode should be constant, edge, reflect or symmetric, got {padding_mode!r}")
    return np.pad(array, width, mode=modes[padding_mode])


def _pad_list(padding: Any) -> list[int]:
    if isinstance(padding, numbers.Number):
        return [int(padding)] * 4
    padding = list(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) == 4:
        return padding
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not a {len(padding)} element tuple")


def pad(img: Any, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> Any:
    """Pad the borders: ``padding`` is an int, (left/right, top/bottom) or (left, top, right, bottom)."""
    pads = _pad_list(padding)
    if is_pil(img):
        Image = require_pillow("pad")
        array, _ = to_chw(img, "pad")
        return from_chw(_pad_array(array, pads, fill, padding_mode), "pil", img) if img.mode != "P" else \
            Image.fromarray(np.pad(np.asarray(img), [(pads[1], pads[3]), (pads[0], pads[2])]), mode="P")
    if is_tensor(img) and isinstance(fill, numbers.Number):  # F.pad on the tensor, as torchvision's tensor path
        return _tensor_geometry.pad(img, pads, fill, padding_mode)
    array, kind = to_chw(img, "pad")
    return from_chw(_pad_array(array, pads, fill, padding_mode), kind, img)


def hflip(img: Any) -> Any:
    if is_pil(img):
        return img.transpose(0)  # FLIP_LEFT_RIGHT
    if is_tensor(img):
        return _tensor_geometry.hflip(img)
    array, kind = to_chw(img, "hflip")
    return from_chw(array[..., ::-1], kind, img)


def vflip(img: Any) -> Any:
    if is_pil(img):
        return img.transpose(1)  # FLIP_TOP_BOTTOM
    if is_tensor(img):
        return _tensor_geometry.vflip(img)
    array, kind = to_chw(img, "vflip")
    return from_chw(array[..., ::-1, :], kind, img)


# ------------------------------------------------------------------------------------------------ colour
def _blend(img1: np.ndarray, img2: np.ndarray, ratio: float) -> np.ndarray:
    """``ratio * img1 + (1 - ratio) * img2`` clipped to the valid range; integers are truncated (as torch's .to)."""
    bound = max_value(img1.dtype)
    if img1.dtype.kind == "f":
        return np.clip(ratio * img1 + (1.0 - ratio) * img2, 0, bound).astype(img1.dtype)
    out = np.clip(np.float32(ratio) * img1.astype(np.float32) + np.float32(1.0 - ratio) * img2, 0, bound)
    return out.astype(img1.dtype)


def _gray(array: np.ndarray) -> np.ndarray:
    r, g, b = array[..., 0, :, :], array[..., 1, :, :], array[..., 2, :, :]
    if array.dtype.kind == "f":
        gray = 0.2989 * r + 0.587 * g + 0.114 * b
    else:
        f32 = np.float32
        gray = f32(0.2989) * r.astype(f32) + f32(0.587) * g.astype(f32) + f32(0.114) * b.astype(f32)
    return gray.astype(array.dtype)[..., None, :, :]


def rgb_to_grayscale(img: Any, num_output_channels: int = 1) -> Any:
    """ITU-R 601-2 luma (0.2989 R + 0.587 G + 0.114 B)."""
    if is_pil(img):
        out = img.convert("L")
        return out if num_output_channels == 1 else out.convert("RGB")
    array, kind = to_chw(img, "rgb_to_grayscale")
    if array.shape[-3] not in (1, 3):
        raise TypeError(f"rgb_to_grayscale: input image tensor should have 1 or 3 channels, got {array.shape[-3]}")
    gray = _gray(array) if array.shape[-3] == 3 else array
    return from_chw(np.repeat(gray, num_output_channels, axis=-3), kind, img)


def _check_factor(name: str, factor: float) -> None:
    if factor < 0:
        raise ValueError(f"{name}: factor ({factor}) is not non-negative.")


def adjust_brightness(img: Any, brightness_factor: float) -> Any:
    _check_factor("adjust_brightness", brightness_factor)
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Brightness(img).enhance(brightness_factor)
    array, kind = to_chw(img, "adjust_brightness")
    return from_chw(_blend(array, np.zeros_like(array), brightness_factor), kind, img)


def adjust_contrast(img: Any, contrast_factor: float) -> Any:
    _check_factor("adjust_contrast", contrast_factor)
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Contrast(img).enhance(contrast_factor)
    array, kind = to_chw(img, "adjust_contrast")
    source = _gray(array) if array.shape[-3] == 3 else array
    mean = source.astype(np.float32).mean(axis=(-3, -2, -1), keepdims=True)
    return from_chw(_blend(array, mean, contrast_factor), kind, img)


def adjust_saturation(img: Any, saturation_factor: float) -> Any:
    _check_factor("adjust_saturation", saturation_factor)
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Color(img).enhance(saturation_factor)
    array, kind = to_chw(img, "adjust_saturation")
    if array.shape[-3] == 1:
        return img
    return from_chw(_blend(array, _gray(array), saturation_factor), kind, img)


def _rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    r, g, b = rgb[..., 0, :, :], rgb[..., 1, :, :], rgb[..., 2, :, :]
    maxc, minc = rgb.max(axis=-3), rgb.min(axis=-3)
    eqc = maxc == minc
    cr = maxc - minc
    ones = np.ones_like(maxc)
    s = cr / np.where(eqc, ones, maxc)
    cr_divisor = np.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / cr_divisor, (maxc - g) / cr_divisor, (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = np.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return np.stack((h, s, maxc), axis=-3)


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0, :, :], hsv[..., 1, :, :], hsv[..., 2, :, :]
    i = np.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.astype(np.int64) % 6
    p = np.clip(v * (1.0 - s), 0.0, 1.0)
    q = np.clip(v * (1.0 - s * f), 0.0, 1.0)
    t = np.clip(v * (1.0 - s * (1.0 - f)), 0.0, 1.0)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros(hsv.shape, dtype=hsv.dtype)
    for k, (rr, gg, bb) in enumerate(table):
        mask = i == k
        out[..., 0, :, :] = np.where(mask, rr, out[..., 0, :, :])
        out[..., 1, :, :] = np.where(mask, gg, out[..., 1, :, :])
        out[..., 2, :, :] = np.where(mask, bb, out[..., 2, :, :])
    return out


def adjust_hue(img: Any, hue_factor: float) -> Any:
    """Shift the hue by ``hue_factor`` (in [-0.5, 0.5], a fraction of the colour circle)."""
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    if is_pil(img):
        if img.mode in ("L", "1", "I", "F"):
            return img
        h, s, v = img.convert("HSV").split()
        np_h = np.array(h, dtype=np.uint8)
        np_h += np.uint8(int(hue_factor * 255) % 256)  # uint8 arithmetic wraps, as torchvision's PIL path
        from PIL import Image
        return Image.merge("HSV", (Image.fromarray(np_h, "L"), s, v)).convert(img.mode)
    array, kind = to_chw(img, "adjust_hue")
    if array.shape[-3] == 1:
        return img
    floating = array.dtype.kind == "f"
    work = array.astype(np.float32) / np.float32(255.0) if not floating else array
    hsv = _rgb_to_hsv(work)
    hsv[..., 0, :, :] = np.fmod(hsv[..., 0, :, :] + hue_factor, 1.0)
    hsv[..., 0, :, :] = np.where(hsv[..., 0, :, :] < 0, hsv[..., 0, :, :] + 1.0, hsv[..., 0, :, :])
    rgb = _hsv_to_rgb(hsv)
    # back to integers as convert_image_dtype does: times (max + 1 - 1e-3), truncated (not times max)
    out = rgb if floating else (rgb * np.float32(max_value(array.dtype) + 1.0 - 1e-3)).astype(array.dtype)
    return from_chw(out.astype(array.dtype), kind, img)


# ------------------------------------------------------------------------------------------ multi-crop
def five_crop(img: Any, size: Any) -> tuple:
    """The four corner crops and the centre crop of ``size`` ((h, w) or an int): (tl, tr, bl, br, center)."""
    if isinstance(size, numbers.Number):
        size = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 1:
        size = (size[0], size[0])
    if len(size) != 2:
        raise ValueError("Please provide only two dimensions (h, w) for size.")
    image_height, image_width = image_size(img, "five_crop")
    crop_height, crop_width = size
    if crop_width > image_width or crop_height > image_height:
        raise ValueError(f"Requested crop size {size} is bigger than input size {(image_height, image_width)}")
    tl = crop(img, 0, 0, crop_height, crop_width)
    tr = crop(img, 0, image_width - crop_width, crop_height, crop_width)
    bl = crop(img, image_height - crop_height, 0, crop_height, crop_width)
    br = crop(img, image_height - crop_height, image_width - crop_width, crop_height, crop_width)
    return tl, tr, bl, br, center_crop(img, [crop_height, crop_width])


def ten_crop(img: Any, size: Any, vertical_flip: bool = False) -> tuple:
    """``five_crop`` of the image, then of its horizontal (or vertical) mirror: ten images."""
    if isinstance(size, numbers.Number):
        size = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 1:
        size = (size[0], size[0])
    if len(size) != 2:
        raise ValueError("Please provide only two dimensions (h, w) for size.")
    flipped = vflip(img) if vertical_flip else hflip(img)
    return five_crop(img, size) + five_crop(flipped, size)


# The geometric and pixel-value functions live in their own modules (imported last: they use the helpers above).
from ember.vision.transforms._functional_geometry import (  # noqa: E402
    _get_inverse_affine_matrix, _get_perspective_coeffs, affine, elastic_transform, perspective, rotate)
from ember.vision.transforms._functional_color import (  # noqa: E402
    adjust_gamma, adjust_sharpness, autocontrast, equalize, erase, gaussian_blur, get_image_num_channels, invert,
    posterize, solarize, to_grayscale)
