"""``torch.backends.mkldnn`` (oneDNN): ember's CPU kernels are NumPy/BLAS and Numba, not oneDNN, but programs
read and set these switches (``torch.backends.mkldnn.enabled = False`` to get deterministic convolutions,
``is_available()`` before choosing a layout), so they exist with PyTorch's defaults and change nothing here.

Example:
    >>> is_available(), enabled
    (True, True)
"""
from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["is_available", "enabled", "deterministic", "allow_tf32", "flags", "set_flags", "VERBOSE_OFF", "VERBOSE_ON",
           "VERBOSE_ON_CREATION", "verbose"]

enabled = True
deterministic = False
allow_tf32 = False
VERBOSE_OFF, VERBOSE_ON, VERBOSE_ON_CREATION = 0, 1, 2


def is_available() -> bool:
    """PyTorch's CPU wheels are built with oneDNN; ember answers as they do (the flags are accepted)."""
    return True


def set_flags(_enabled: bool | None = None, _deterministic: bool | None = None,
              _allow_tf32: bool | None = None) -> tuple[bool, bool, bool]:
    global enabled, deterministic, allow_tf32
    previous = (enabled, deterministic, allow_tf32)
    if _enabled is not None:
        enabled = bool(_enabled)
    if _deterministic is not None:
        deterministic = bool(_deterministic)
    if _allow_tf32 is not None:
        allow_tf32 = bool(_allow_tf32)
    return previous


@contextlib.contextmanager
def flags(enabled: bool = False, deterministic: bool = False, allow_tf32: bool = True) -> Iterator[None]:
    """Set the switches inside the block and restore them after (PyTorch's ``mkldnn.flags``)."""
    previous = set_flags(enabled, deterministic, allow_tf32)
    try:
        yield
    finally:
        set_flags(*previous)


class verbose:
    """``with torch.backends.mkldnn.verbose(level):`` — oneDNN's logging; nothing to log here."""

    def __init__(self, level: int) -> None:
        self.level = level

    def __enter__(self) -> "verbose":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False
