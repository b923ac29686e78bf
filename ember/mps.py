"""``torch.mps`` on a machine without Apple's Metal (ember has no MPS backend): PyTorch's answers there.

``is_available()`` is False and ``device_count()`` 0 (scripts choose ``"mps"`` with them), ``manual_seed`` is a
silent no-op; calls that need the device raise PyTorch's RuntimeError.

Example:
    >>> is_available(), device_count()
    (False, 0)
"""
from __future__ import annotations

from typing import Any

__all__ = ["is_available", "device_count", "manual_seed", "seed", "synchronize", "empty_cache", "get_rng_state",
           "set_rng_state", "current_allocated_memory", "driver_allocated_memory"]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Silent without a device, as PyTorch."""


def _needs(what: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"Cannot execute {what}() without MPS backend.")
    call.__name__ = what
    return call


seed = _needs("getDefaultGenerator")
get_rng_state = _needs("getDefaultGenerator")
set_rng_state = _needs("getDefaultGenerator")
synchronize = _needs("deviceSynchronize")
empty_cache = _needs("emptyCache")
current_allocated_memory = _needs("getCurrentAllocatedMemory")
driver_allocated_memory = _needs("getDriverAllocatedMemory")
