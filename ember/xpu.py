"""``torch.xpu`` on a machine without Intel GPUs (ember has no XPU backend): what PyTorch's CPU build answers.

Programs probe it next to CUDA (PyTorch's profiler recipe: ``elif torch.xpu.is_available(): ...``), so the
queries answer as a PyTorch build without XPU does: not available, no devices, seeding and cache calls are
silent no-ops, zero memory; calls that need a device raise PyTorch's AssertionError.

Example:
    >>> is_available(), device_count()
    (False, 0)
"""
from __future__ import annotations

from typing import Any

__all__ = ["is_available", "device_count", "is_initialized", "is_bf16_supported", "manual_seed", "manual_seed_all",
           "seed", "seed_all", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "synchronize", "current_device", "set_device", "get_device_name", "get_device_properties", "initial_seed",
           "get_rng_state", "set_rng_state", "init"]

_NO_XPU = "Torch not compiled with XPU enabled"


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Silent without a device, as PyTorch (the seed would apply lazily once one exists)."""


def manual_seed_all(seed: int) -> None:
    """Silent without a device, as PyTorch."""


def seed() -> None:
    """Silent without a device, as PyTorch."""


def seed_all() -> None:
    """Silent without a device, as PyTorch."""


def empty_cache() -> None:
    """Nothing cached without a device."""


def memory_allocated(device: Any = None) -> int:
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def _no_device(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(_NO_XPU)


synchronize = current_device = set_device = get_device_name = get_device_properties = _no_device
initial_seed = get_rng_state = set_rng_state = init = _no_device
