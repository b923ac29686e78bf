"""``torch.nn.attention``: ``SDPBackend`` and ``sdpa_kernel``, the context manager choosing which
scaled-dot-product-attention backends may run.

ember computes attention with one implementation on each device (docs/transformer-speed.md), which gives the
math backend's results; ``sdpa_kernel`` sets the same flags as ``torch.backends.cuda.enable_*_sdp`` for the block
(``torch.backends.cuda.flash_sdp_enabled()`` and friends report them) and restores them after.

Example:
    >>> import ember
    >>> from ember.nn.attention import SDPBackend, sdpa_kernel
    >>> with sdpa_kernel(SDPBackend.MATH):
    ...     ember.backends.cuda.flash_sdp_enabled()
    False
    >>> ember.backends.cuda.flash_sdp_enabled()
    True
"""
from __future__ import annotations

import contextlib
import enum
from typing import Iterable, Iterator

from ember.backends import cuda_flags


class SDPBackend(enum.IntEnum):
    """PyTorch's attention backends, with its numbers."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_FLAG = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash", SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
         SDPBackend.CUDNN_ATTENTION: "cudnn"}
WARN_FOR_UNFUSED_KERNELS = False


@contextlib.contextmanager
def sdpa_kernel(backends: SDPBackend | Iterable[SDPBackend], set_priority: bool = False) -> Iterator[None]:
    """Allow only ``backends`` inside the block."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for backend in chosen:
        if not isinstance(backend, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    previous = dict(cuda_flags._SDP)
    cuda_flags._SDP.update({flag: backend in chosen for backend, flag in _FLAG.items()})
    try:
        yield
    finally:
        cuda_flags._SDP.update(previous)


__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]
