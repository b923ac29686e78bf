"""Pixel-value functions of ``torchvision.transforms.functional``: adjust_gamma, invert, posterize, solarize,
adjust_sharpness, autocontrast, equalize, gaussian_blur, to_grayscale, erase, get_image_num_channels.

Tensors and NumPy images follow torchvision's tensor formulas in the same float32 arithmetic (uint8 results
are pixel-equal to torchvision's); PIL images go through Pillow's ``ImageOps`` / ``ImageEnhance`` as
torchvision does. Re-exported by ``ember.vision.transforms.functional``.

Example:
    >>> import numpy as np
    >>> from ember.vision.transforms import functional as F
    >>> img = np.array([[0, 100, 200]], dtype=np.uint8)
    >>> F.invert(img).tolist(), F.posterize(img, 2).tolist(), F.solarize(img, 150).tolist()
    ([[255, 155, 55]], [[0, 64, 192]], [[0, 100, 55]])
"""
from __future__ import annotations

import importlib
import numbers
from typing import Any, Sequence

import numpy as np

from ember.vision.transforms._image import from_chw, is_pil, is_tensor, max_value, require_pillow, to_chw
from ember.vision.transforms.functional import _blend, _gray


def _pil(module: str, op: str) -> Any:
    """``PIL.<module>`` (Pillow is optional: only PIL images need it)."""
    require_pillow(op)
    return importlib.import_module(f"PIL.{module}")


def _channels_1_or_3(array: np.ndarray, op: str) -> None:
    if array.shape[-3] not in (1, 3):
        raise TypeError(f"{op}: input image tensor permitted channel values are [1, 3], but found {array.shape[-3]}")


def get_image_num_channels(img: Any) -> int:
    """Number of channels (bands of a PIL image)."""
    if is_pil(img):
        return len(img.getbands())
    if is_tensor(img):
        if img.ndim < 2:
            raise TypeError(f"get_image_num_channels: input ndim should be 2 or more. Got {img.ndim}")
        return 1 if img.ndim == 2 else int(img.shape[-3])
    return int(to_chw(img, "get_image_num_channels")[0].shape[-3])


def to_grayscale(img: Any, num_output_channels: int = 1) -> Any:
    """Grey version of the image with 1 or 3 channels (torchvision takes only PIL images here; ember also takes
    tensors and NumPy images, as ``rgb_to_grayscale``)."""
    if num_output_channels not in (1, 3):
        raise ValueError("to_grayscale: num_output_channels should be either 1 or 3")
    if is_pil(img):
        gray = img.convert("L")
        if num_output_channels == 1:
            return gray
        plane = np.asarray(gray, dtype=np.uint8)
        return require_pillow("to_grayscale").fromarray(np.dstack([plane, plane, plane]), "RGB")
    array, kind = to_chw(img, "to_grayscale")
    _channels_1_or_3(array, "to_grayscale")
    gray = _gray(array) if array.shape[-3] == 3 else array
    return from_chw(np.repeat(gray, num_output_channels, axis=-3), kind, img)


def adjust_gamma(img: Any, gamma: float, gain: float = 1) -> Any:
    """``gain * img ** gamma`` on [0, 1] intensities (integers are scaled to [0, 1] and back)."""
    if gamma < 0:
        raise ValueError("Gamma should be a non-negative real number")
    if is_pil(img):
        mode = img.mode
        table = [int((255 + 1 - 0.001) * gain * pow(v / 255.0, gamma)) for v in range(256)] * 3
        return img.convert("RGB").point(table).convert(mode)
    array, kind = to_chw(img, "adjust_gamma")
    _channels_1_or_3(array, "adjust_gamma")
    if array.dtype.kind == "f":
        out = np.clip(array.dtype.type(gain) * np.power(array, array.dtype.type(gamma)), 0, 1).astype(array.dtype)
    else:
        f32 = np.float32
        unit = array.astype(f32) / f32(max_value(array.dtype))
        scaled = np.clip(f32(gain) * np.power(unit, f32(gamma)), 0, 1)
        out = (scaled * f32(max_value(array.dtype) + 1.0 - 1e-3)).astype(array.dtype)  # convert_image_dtype
    return from_chw(out, kind, img)


def invert(img: Any) -> Any:
    """``max - img`` (255 for uint8, 1.0 for floats)."""
    if is_pil(img):
        return _pil("ImageOps", "invert").invert(img)
    array, kind = to_chw(img, "invert")
    _channels_1_or_3(array, "invert")
    return from_chw((array.dtype.type(max_value(array.dtype)) - array).astype(array.dtype), kind, img)


def posterize(img: Any, bits: int) -> Any:
    """Keep the ``bits`` highest bits of each uint8 channel value."""
    if not 0 <= bits <= 8:
        raise ValueError(f"The number if bits should be between 0 and 8. Got {bits}")
    if is_pil(img):
        return _pil("ImageOps", "posterize").posterize(img, bits)
    array, kind = to_chw(img, "posterize")
    if array.dtype != np.uint8:
        raise TypeError(f"posterize: only uint8 images are supported, but found {array.dtype}")
    _channels_1_or_3(array, "posterize")
    mask = np.uint8((-int(2 ** (8 - bits))) & 0xFF)
    return from_chw(array & mask, kind, img)


def solarize(img: Any, threshold: float) -> Any:
    """Invert the values at or above ``threshold``."""
    if is_pil(img):
        return _pil("ImageOps", "solarize").solarize(img, threshold)
    array, kind = to_chw(img, "solarize")
    _channels_1_or_3(array, "solarize")
    if threshold > max_value(array.dtype):
        raise TypeError("Threshold should be less than bound of img.")
    inverted = (array.dtype.type(max_value(array.dtype)) - array).astype(array.dtype)
    return from_chw(np.where(array >= threshold, inverted, array), kind, img)


def _depthwise_3x3_smooth(array: np.ndarray) -> np.ndarray:
    """PIL's SMOOTH filter (1 1 1 / 1 5 1 / 1 1 1, / 13) on the interior, the border kept (torchvision's
    ``_blurred_degenerate_image``)."""
    work = array.dtype if array.dtype.kind == "f" else np.dtype(np.float32)
    kernel = np.ones((3, 3), dtype=work)
    kernel[1, 1] = 5.0
    kernel /= kernel.sum()
    x = array.astype(work, copy=False)
    h, w = x.shape[-2:]
    inner = None
    for dy in range(3):
        for dx in range(3):
            term = x[..., dy:dy + h - 2, dx:dx + w - 2] * kernel[dy, dx]
            inner = term if inner is None else inner + term
    if array.dtype.kind != "f":
        inner = np.round(inner)
    out = array.copy()
    out[..., 1:-1, 1:-1] = inner.astype(array.dtype)
    return out


def adjust_sharpness(img: Any, sharpness_factor: float) -> Any:
    """Blend with a smoothed copy: 0 gives the smoothed image, 1 the original, 2 doubles the sharpness."""
    if sharpness_factor < 0:
        raise ValueError(f"sharpness_factor ({sharpness_factor}) is not non-negative.")
    if is_pil(img):
        return _pil("ImageEnhance", "adjust_sharpness").Sharpness(img).enhance(sharpness_factor)
    array, kind = to_chw(img, "adjust_sharpness")
    _channels_1_or_3(array, "adjust_sharpness")
    if array.shape[-1] <= 2 or array.shape[-2] <= 2:
        return img
    return from_chw(_blend(array, _depthwise_3x3_smooth(array), sharpness_factor), kind, img)


def autocontrast(img: Any) -> Any:
    """Stretch each channel so its darkest pixel becomes 0 and its brightest the maximum."""
    if is_pil(img):
        return _pil("ImageOps", "autocontrast").autocontrast(img)
    array, kind = to_chw(img, "autocontrast")
    _channels_1_or_3(array, "autocontrast")
    bound = max_value(array.dtype)
    work = array.dtype if array.dtype.kind == "f" else np.dtype(np.float32)
    low = array.min(axis=(-2, -1), keepdims=True).astype(work)
    high = array.max(axis=(-2, -1), keepdims=True).astype(work)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = (work.type(1) / (high - low)) * work.type(bound)  # torch's `number / tensor` is reciprocal * number
    flat = ~np.isfinite(scale)  # a constant channel is left alone
    low = np.where(flat, work.type(0), low)
    scale = np.where(flat, work.type(1), scale)
    out = np.clip((array.astype(work) - low) * scale, 0, bound)
    return from_chw(out.astype(array.dtype), kind, img)


def equalize(img: Any) -> Any:
    """Histogram equalization of each channel of a uint8 image (PIL's lookup-table rule)."""
    if is_pil(img):
        return _pil("ImageOps", "equalize").equalize(img)
    array, kind = to_chw(img, "equalize")
    if array.dtype != np.uint8:
        raise TypeError(f"equalize: only uint8 images are supported, but found {array.dtype}")
    _channels_1_or_3(array, "equalize")
    flat = array.reshape(-1, array.shape[-2] * array.shape[-1]).astype(np.int64)
    rows = flat.shape[0]
    hist = np.bincount((flat + 256 * np.arange(rows)[:, None]).ravel(), minlength=256 * rows).reshape(rows, 256)
    last_nonzero = 255 - np.argmax(hist[:, ::-1] > 0, axis=1)
    # step = (sum of the non-empty bins but the last) // 255
    step = (hist.sum(axis=1) - hist[np.arange(rows), last_nonzero]) // 255
    safe_step = np.maximum(step, 1)[:, None]
    lut = (np.cumsum(hist, axis=1) + step[:, None] // 2) // safe_step
    lut = np.clip(np.concatenate([np.zeros((rows, 1), dtype=lut.dtype), lut[:, :-1]], axis=1), 0, 255)
    mapped = np.take_along_axis(lut, flat, axis=1)
    out = np.where(step[:, None] == 0, flat, mapped).astype(np.uint8)
    return from_chw(out.reshape(array.shape), kind, img)


def _gaussian_kernel1d(size: int, sigma: float, dtype: np.dtype) -> np.ndarray:
    half = (size - 1) * 0.5
    x = np.linspace(-half, half, size).astype(dtype)
    pdf = np.exp(dtype.type(-0.5) * (x / dtype.type(sigma)) ** 2)
    return pdf / pdf.sum()


def gaussian_blur(img: Any, kernel_size: Any, sigma: Any = None) -> Any:
    """Blur with a Gaussian kernel of odd ``kernel_size`` (x, y) and ``sigma`` (x, y; default
    ``0.3 * ((k - 1) * 0.5 - 1) + 0.8``), reflecting at the borders."""
    if not isinstance(kernel_size, (int, list, tuple)):
        raise TypeError(f"kernel_size should be int or a sequence of integers. Got {type(kernel_size)}")
    kernel_size = [kernel_size, kernel_size] if isinstance(kernel_size, int) else list(kernel_size)
    if len(kernel_size) != 2:
        raise ValueError(f"If kernel_size is a sequence its length should be 2. Got {len(kernel_size)}")
    for k in kernel_size:
        if k % 2 == 0 or k < 0:
            raise ValueError(f"kernel_size should have odd and positive integers. Got {kernel_size}")
    if sigma is None:
        sigma = [k * 0.15 + 0.35 for k in kernel_size]
    if not isinstance(sigma, (int, float, list, tuple)):
        raise TypeError(f"sigma should be either float or sequence of floats. Got {type(sigma)}")
    sigma = [float(sigma), float(sigma)] if isinstance(sigma, numbers.Number) else list(sigma)
    if len(sigma) == 1:
        sigma = [sigma[0], sigma[0]]
    if len(sigma) != 2:
        raise ValueError(f"If sigma is a sequence, its length should be 2. Got {len(sigma)}")
    if any(s <= 0.0 for s in sigma):
        raise ValueError(f"sigma should have positive values. Got {sigma}")
    array, kind = to_chw(img, "gaussian_blur")  # PIL images take the tensor path too, as in torchvision
    work = array.dtype if array.dtype.kind == "f" and array.dtype != np.float16 else np.dtype(np.float32)
    kx = _gaussian_kernel1d(kernel_size[0], sigma[0], work)
    ky = _gaussian_kernel1d(kernel_size[1], sigma[1], work)
    # torch convolves with the 2-D outer product in float32; the separable form in float64 is that sum exactly
    # (up to torch's own float32 rounding), at 2k instead of k*k passes
    x = array.astype(np.float64)
    h, w = x.shape[-2:]
    lead = [(0, 0)] * (x.ndim - 2)
    padded = np.pad(x, lead + [(kernel_size[1] // 2,) * 2, (kernel_size[0] // 2,) * 2], mode="reflect")
    rows = sum(float(kx[j]) * padded[..., :, j:j + w] for j in range(kernel_size[0]))
    out = sum(float(ky[i]) * rows[..., i:i + h, :] for i in range(kernel_size[1])).astype(work)
    if array.dtype.kind != "f":
        out = np.round(out)
    return from_chw(out.astype(array.dtype), kind, img)


def erase(img: Any, i: int, j: int, h: int, w: int, v: Any, inplace: bool = False) -> Any:
    """Set ``img[..., i:i+h, j:j+w]`` to ``v`` (a tensor broadcast over the region); ``inplace`` writes into
    ``img`` itself."""
    if is_tensor(img):
        out = img if inplace else img.clone()
        out[..., i:i + h, j:j + w] = v
        return out
    if isinstance(img, np.ndarray):
        array, kind = to_chw(img, "erase")
        out = array if inplace else array.copy()
        value = np.asarray(v.detach().cpu().numpy() if is_tensor(v) else v)
        out[..., i:i + h, j:j + w] = value
        return from_chw(out, kind, img) if not inplace else img
    raise TypeError(f"erase: img should be a Tensor image (or a NumPy image). Got {type(img).__name__}")
