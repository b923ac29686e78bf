"""``torch.accelerator``: the device-agnostic questions scripts ask before picking a device.

ember runs on the CPU here (the CUDA backend is not built yet), and PyTorch's CPU is not an
accelerator, so these answer as PyTorch does on a machine without one: not available, no devices,
``current_accelerator()`` is None.

Example:
    >>> import ember as torch
    >>> device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    >>> device
    'cpu'
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ember.device import device as _device
from ember import cuda

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "current_stream", "device_count",
           "device_index", "empty_cache", "is_available", "max_memory_allocated", "max_memory_reserved",
           "memory_allocated", "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats", "set_device_idx", "set_device_index", "set_stream", "synchronize",
           "get_memory_info", "get_device_capability", "Graph", "empty_host_cache"]


def _cuda() -> Any:
    return cuda


def is_available() -> bool:
    """True when an accelerator (a CUDA GPU with ember's CUDA backend) can run tensors."""
    return _cuda().is_available()


def device_count() -> int:
    return _cuda().device_count() if is_available() else 0


def current_accelerator(check_available: bool = False) -> _device | None:
    """The accelerator's device type as a device (``cuda``), or None when there is none."""
    if _cuda().device_count() > 0 and (not check_available or is_available()):
        return _device("cuda")
    return None


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"torch.accelerator.{what}: no accelerator is available (ember runs on the CPU here); "
                           "check torch.accelerator.is_available() first")


def current_device_index() -> int:
    _require("current_device_index")
    return _cuda().current_device()


current_device_idx = current_device_index


def set_device_index(device: Any) -> None:
    _require("set_device_index")
    _cuda().set_device(device)


set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device: Any) -> Iterator[None]:
    """Use accelerator ``device`` inside the block (None: a no-op, as in PyTorch)."""
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)


def synchronize(device: Any = None) -> None:
    """Wait for the accelerator's queued work (nothing is queued without one)."""
    if is_available():
        _cuda().synchronize(device)


def current_stream(device: Any = None) -> Any:
    _require("current_stream")
    return _cuda().current_stream(device)


def set_stream(stream: Any) -> None:
    _require("set_stream")


def get_device_capability(device: Any = None) -> dict:
    _require("get_device_capability")
    return {}


class Graph:
    """Accelerator graph capture: not supported by ember (no accelerator backend)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _require("Graph")


def _zero(device: Any = None) -> int:
    return 0


memory_allocated = max_memory_allocated = memory_reserved = max_memory_reserved = _zero


def memory_stats(device: Any = None) -> dict:
    return {}


def get_memory_info(device: Any = None) -> tuple[int, int]:
    _require("get_memory_info")
    return (0, 0)


def reset_peak_memory_stats(device: Any = None) -> None:
    return None


reset_accumulated_memory_stats = reset_peak_memory_stats


def empty_cache() -> None:
    return None


def empty_host_cache() -> None:
    return None
