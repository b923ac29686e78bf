"""The CPU backend: NumPy arrays.

Example:
    >>> from ember.backends import get_backend
    >>> get_backend("cpu").xp.__name__
    'numpy'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import Backend, register_backend


class CPUBackend(Backend):
    name = "cpu"
    xp = np

    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> np.ndarray:
        if hasattr(data, "__cuda_array_interface__") or type(data).__module__.startswith("cupy"):
            data = data.get()  # a CuPy array: copy device -> host
        return np.asarray(data, dtype=np_dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return array


def tune_allocator() -> bool:
    """Let glibc reuse freed large buffers instead of returning them to the OS.

    By default glibc serves every allocation over ~128 KiB with a fresh ``mmap`` and unmaps it on
    free, so each new activation or gradient array page-faults on first touch: measured at ~25% of a
    small CNN's training step here. Raising the mmap and trim thresholds turns the heap into a
    caching pool (what PyTorch's CPU caching allocator achieves). Process-wide; a no-op off glibc.
    Disable with ``EMBER_CPU_ALLOCATOR=system``.
    """
    from ember import _config

    if _config.CPU_ALLOCATOR != "tuned":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's maximum on 64-bit
        ok &= libc.mallopt(m_trim_threshold, 512 * 1024 * 1024)
        return bool(ok)
    except (OSError, AttributeError):
        return False


ALLOCATOR_TUNED = tune_allocator()
register_backend("cpu", CPUBackend())
