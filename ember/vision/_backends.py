"""torchvision's top-level switches: image/video backend names, ``_is_tracing`` (DETR's ``util/misc.py`` asks it
before padding images into a batch), ``disable_beta_transforms_warning``.

Example:
    >>> import ember.vision as torchvision
    >>> torchvision.get_image_backend(), torchvision._is_tracing()
    ('PIL', False)
"""
from __future__ import annotations

from ember.jit.api import is_tracing

_STATE = {"image": "PIL", "video": "pyav"}


def set_image_backend(backend: str) -> None:
    """Name the package that loads images: 'PIL' or 'accimage' (torchvision's choices; ember's datasets read
    images with PIL either way)."""
    if backend not in ("PIL", "accimage"):
        raise ValueError(f"Invalid backend '{backend}'. Options are 'PIL' and 'accimage'")
    _STATE["image"] = backend


def get_image_backend() -> str:
    return _STATE["image"]


def set_video_backend(backend: str) -> None:
    """Accepted and ignored, as torchvision 0.28 does (only 'pyav' remains)."""


def get_video_backend() -> str:
    return _STATE["video"]


def _is_tracing() -> bool:
    """True while ``torch.jit.trace`` (ember.jit.trace) records a function."""
    return is_tracing()


def disable_beta_transforms_warning() -> None:
    """No-op, as in torchvision (kept so that old code runs)."""
