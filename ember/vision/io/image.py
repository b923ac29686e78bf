"""Image files as tensors, torchvision's way: ``read_file`` gives the bytes as a 1-D ``uint8`` tensor,
``decode_*`` turn such bytes into a ``uint8`` ``(C, H, W)`` tensor (PNG, JPEG, GIF, WebP through Pillow, an
optional extra), ``encode_*`` / ``write_*`` the reverse. ``ImageReadMode`` picks the channels: UNCHANGED keeps the
file's, GRAY/GRAY_ALPHA/RGB/RGB_ALPHA convert (Pillow's conversions: ITU-R 601 luma for gray, as libjpeg's).
Decoding reads only pixel data: no code in a file runs, and Pillow's decompression-bomb limit stays on.

Example:
    >>> import ember
    >>> from ember.vision.io.image import encode_png, decode_png, ImageReadMode
    >>> rgb = ember.full((3, 2, 2), 200, dtype=ember.uint8)
    >>> decode_png(encode_png(rgb), mode=ImageReadMode.GRAY).shape
    ember.Size([1, 2, 2])
"""
from __future__ import annotations

import enum
import io
import os
from typing import Any

import numpy as np

from ember import creation, dtypes
from ember.serialization.atomic import atomic_write
from ember.tensor import Tensor
from ember.vision.transforms._image import require_pillow


class ImageReadMode(enum.Enum):
    """Which channels a decoded image has (torchvision's values)."""

    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = RGB_ALPHA


_PIL_MODES = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
              ImageReadMode.RGB_ALPHA: "RGBA"}


def read_file(path: str | os.PathLike) -> Tensor:
    """The bytes of a file as a 1-D ``uint8`` tensor."""
    with open(os.fspath(path), "rb") as f:
        data = f.read()
    return creation.tensor(np.frombuffer(data, dtype=np.uint8).copy())


def write_file(filename: str | os.PathLike, data: Tensor) -> None:
    """Write a 1-D ``uint8`` tensor's bytes to ``filename`` (atomically)."""
    _check_bytes("write_file", data)
    payload = data.numpy().tobytes()
    atomic_write(os.fspath(filename), lambda f: f.write(payload))


def _check_bytes(op: str, data: Any) -> None:
    if not isinstance(data, Tensor) or data.dtype != dtypes.uint8 or data.ndim != 1:
        raise RuntimeError(f"{op}: expected a 1-D uint8 tensor of encoded bytes, got "
                           f"{getattr(data, 'dtype', type(data).__name__)} of shape {tuple(getattr(data, 'shape', ()))}"
                           "; read the file with torchvision.io.read_file")


def _decode(op: str, data: Any, mode: Any, apply_exif_orientation: bool, formats: tuple | None) -> Tensor:
    image_module = require_pillow(op)
    if isinstance(data, (str, os.PathLike)):
        data = read_file(data)
    _check_bytes(op, data)
    mode = ImageReadMode(mode) if not isinstance(mode, ImageReadMode) else mode
    try:
        image = image_module.open(io.BytesIO(data.numpy().tobytes()))
        if formats is not None and image.format not in formats:
            raise RuntimeError(f"{op}: the data is a {image.format} image, not {'/'.join(formats)}; use decode_image")
        image.load()
    except OSError as error:
        raise RuntimeError(f"{op}: could not decode the image bytes ({error})") from None
    if apply_exif_orientation:
        from PIL import ImageOps  # Pillow is an optional extra: imported where used

        image = ImageOps.exif_transpose(image)
    if mode is ImageReadMode.UNCHANGED:
        if image.mode not in ("L", "LA", "RGB", "RGBA"):
            image = image.convert("RGBA" if "A" in image.mode or "transparency" in image.info else "RGB")
    else:
        image = image.convert(_PIL_MODES[mode])
    pixels = np.asarray(image, dtype=np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    return creation.tensor(np.ascontiguousarray(pixels.transpose(2, 0, 1)))


def decode_image(input: Any, mode: Any = ImageReadMode.UNCHANGED, apply_exif_orientation: bool = False) -> Tensor:
    """Decode PNG, JPEG, GIF or WebP bytes (or a path) into a ``uint8`` ``(C, H, W)`` tensor."""
    return _decode("decode_image", input, mode, apply_exif_orientation, None)


def read_image(path: str | os.PathLike, mode: Any = ImageReadMode.UNCHANGED,
               apply_exif_orientation: bool = False) -> Tensor:
    """``decode_image(read_file(path))``."""
    return _decode("read_image", read_file(path), mode, apply_exif_orientation, None)


def decode_png(input: Tensor, mode: Any = ImageReadMode.UNCHANGED, apply_exif_orientation: bool = False) -> Tensor:
    return _decode("decode_png", input, mode, apply_exif_orientation, ("PNG",))


def decode_jpeg(input: Any, mode: Any = ImageReadMode.UNCHANGED, device: Any = "cpu",
                apply_exif_orientation: bool = False) -> Any:
    """One JPEG (or a list of them) decoded on the CPU, then moved to ``device``."""
    if isinstance(input, (list, tuple)):
        return [decode_jpeg(item, mode, device, apply_exif_orientation) for item in input]
    return _decode("decode_jpeg", input, mode, apply_exif_orientation, ("JPEG", "MPO")).to(device)


def decode_gif(input: Tensor) -> Tensor:
    return _decode("decode_gif", input, ImageReadMode.RGB, False, ("GIF",))


def decode_webp(input: Tensor, mode: Any = ImageReadMode.UNCHANGED) -> Tensor:
    return _decode("decode_webp", input, mode, False, ("WEBP",))


def decode_avif(input: Tensor, mode: Any = ImageReadMode.UNCHANGED) -> Tensor:
    return _decode("decode_avif", input, mode, False, ("AVIF",))


def decode_heic(input: Tensor, mode: Any = ImageReadMode.UNCHANGED) -> Tensor:
    return _decode("decode_heic", input, mode, False, ("HEIF", "HEIC"))


def _to_pil(op: str, input: Tensor) -> Any:
    image_module = require_pillow(op)
    if not isinstance(input, Tensor) or input.dtype != dtypes.uint8 or input.ndim != 3 or input.shape[0] not in (
            1, 2, 3, 4):
        raise RuntimeError(f"{op}: expected a uint8 (C, H, W) tensor with 1-4 channels, got "
                           f"{getattr(input, 'dtype', type(input).__name__)} of shape "
                           f"{tuple(getattr(input, 'shape', ()))}")
    pixels = input.detach().cpu().numpy().transpose(1, 2, 0)
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[pixels.shape[2]]
    return image_module.fromarray(np.ascontiguousarray(pixels[:, :, 0] if mode == "L" else pixels), mode=mode)


def _encoded(image: Any, **save: Any) -> Tensor:
    buffer = io.BytesIO()
    image.save(buffer, **save)
    return creation.tensor(np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy())


def encode_png(input: Tensor, compression_level: int = 6) -> Tensor:
    """PNG bytes of a ``uint8`` ``(C, H, W)`` image (lossless)."""
    if not 0 <= compression_level <= 9:
        raise ValueError(f"encode_png: compression_level must be between 0 and 9, got {compression_level}")
    return _encoded(_to_pil("encode_png", input), format="PNG", compress_level=compression_level)


def encode_jpeg(input: Any, quality: int = 75) -> Any:
    """JPEG bytes of a ``uint8`` ``(C, H, W)`` image with 1 or 3 channels (or a list of them)."""
    if isinstance(input, (list, tuple)):
        return [encode_jpeg(item, quality) for item in input]
    if not 1 <= quality <= 100:
        raise ValueError(f"encode_jpeg: quality must be between 1 and 100, got {quality}")
    if input.ndim == 3 and input.shape[0] not in (1, 3):
        raise RuntimeError(f"encode_jpeg: JPEG holds 1 or 3 channels, got {input.shape[0]}")
    return _encoded(_to_pil("encode_jpeg", input), format="JPEG", quality=quality)


def write_png(input: Tensor, filename: str | os.PathLike, compression_level: int = 6) -> None:
    write_file(filename, encode_png(input, compression_level))


def write_jpeg(input: Tensor, filename: str | os.PathLike, quality: int = 75) -> None:
    write_file(filename, encode_jpeg(input, quality))
