"""PyTorch names ember adds to its top-level namespace (imported by ``ember/__init__.py`` in one line).

Kept apart from ``ember/__init__.py`` so the PyTorch surface grows in one place.

Example:
    >>> import ember as torch
    >>> torch.jit.trace, torch.accelerator.is_available()      # doctest: +ELLIPSIS
    (<function trace at ...>, False)
"""
from __future__ import annotations

from ember import accelerator, jit  # noqa: F401  (torch.accelerator, torch.jit)
__all__ = ["accelerator", "jit"]
