"""``torch.backends.cudnn``: the flags scripts set (``benchmark``, ``deterministic``...).

ember has no cuDNN; the flags are kept (a future CUDA backend reads them) and ``is_available()`` is False.

Example:
    >>> import ember.backends.cudnn as cudnn
    >>> cudnn.benchmark = True
    >>> cudnn.is_available()
    False
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> int | None:
    return None


def is_acceptable(tensor: Any) -> bool:
    return False


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10, deterministic: bool = False,
          allow_tf32: bool = True) -> Iterator[None]:
    """Set the flags inside the block and restore them after."""
    module = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: module[n] for n in names}
    module.update(dict(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32))))
    try:
        yield
    finally:
        module.update(saved)
