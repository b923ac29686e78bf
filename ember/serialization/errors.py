"""Errors raised when a file cannot be trusted or read.

Every rejection names the file, the entry (tensor, key or global) and what is wrong, so a user can
tell a truncated download from a hand-edited or malicious file.

Example:
    >>> str(CheckpointError("w.safetensors", "tensor 'fc.weight'", "shape entry -1 is negative"))
    "w.safetensors: tensor 'fc.weight': shape entry -1 is negative"
"""
from __future__ import annotations

import pickle
from typing import Any


class CheckpointError(ValueError):
    """A file that is corrupt, inconsistent, or not allowed; ``where``/``what`` say which part."""

    def __init__(self, where: Any, what: str | None, problem: str) -> None:
        self.where, self.what, self.problem = str(where), what, problem
        super().__init__(f"{where}: {what}: {problem}" if what else f"{where}: {problem}")


class UnsafeGlobalError(CheckpointError, pickle.UnpicklingError):
    """A pickle asked for a global outside the allow-list (PyTorch's ``weights_only=True`` promise)."""
