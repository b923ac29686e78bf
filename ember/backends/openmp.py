"""``torch.backends.openmp``: whether PyTorch was built with OpenMP. ember's threads come from BLAS and Numba;
``is_available()`` answers as PyTorch's CPU wheels do.

Example:
    >>> is_available()
    True
"""
from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    return True
