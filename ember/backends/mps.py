"""``torch.backends.mps``: Apple's Metal backend, which ember does not have (both answers are False).

Example:
    >>> import ember as torch
    >>> torch.backends.mps.is_available()
    False
"""
from __future__ import annotations

__all__ = ["is_available", "is_built", "is_macos_or_newer", "is_macos13_or_newer"]


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    return False


def is_macos13_or_newer(minor: int = 0) -> bool:
    return False
