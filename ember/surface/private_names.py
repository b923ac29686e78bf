"""Underscore names of PyTorch's top level that library code calls: ``torch._assert``.

torchvision's ViT, MaxViT and RoI ops check shapes with ``torch._assert(cond, message)`` (an assert that
symbolic tracers can record); in eager mode it is Python's ``assert``, with the message, also under -O.

Example:
    >>> import ember
    >>> ember._assert(ember.tensor(3) == 3, "sizes differ")
    >>> ember._assert(2 > 3, "sizes differ")
    Traceback (most recent call last):
    ...
    AssertionError: sizes differ
"""
from __future__ import annotations

from typing import Any

__all__ = ["_assert"]


def _assert(condition: Any, message: str) -> None:
    """Raise ``AssertionError(message)`` when ``condition`` is false (a one-element tensor counts by value)."""
    if not bool(condition):
        raise AssertionError(message)
