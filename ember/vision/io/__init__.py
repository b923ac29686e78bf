"""``torchvision.io`` on ember: reading, decoding and encoding images as ``uint8`` CHW tensors.

Example:
    >>> import ember
    >>> from ember.vision.io import encode_png, decode_image
    >>> image = ember.randint(0, 256, (3, 4, 5), dtype=ember.uint8)
    >>> bool((decode_image(encode_png(image)) == image).all())
    True
"""
from ember.vision.io.image import (  # noqa: F401
    ImageReadMode, decode_avif, decode_gif, decode_heic, decode_image, decode_jpeg, decode_png, decode_webp,
    encode_jpeg, encode_png, read_file, read_image, write_file, write_jpeg, write_png,
)
from ember.vision.io.video import read_video, read_video_timestamps, write_video  # noqa: F401

__all__ = ["ImageReadMode", "decode_avif", "decode_gif", "decode_heic", "decode_image", "decode_jpeg", "decode_png",
           "decode_webp", "encode_jpeg", "encode_png", "read_file", "read_image", "write_file", "write_jpeg",
           "write_png", "read_video", "read_video_timestamps", "write_video"]
