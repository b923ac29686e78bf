"""``torch._dynamo.utils.is_compile_supported``: can ``torch.compile`` run for a device type.

Example:
    >>> from ember._dynamo.utils import is_compile_supported
    >>> is_compile_supported("cpu"), is_compile_supported("meta")
    (True, False)
"""
from __future__ import annotations

from typing import Any

from ember.device import device as _device

__all__ = ["is_compile_supported"]


def is_compile_supported(device_type: Any) -> bool:
    """True for the devices ember.compile traces for (cpu and cuda; not meta), as PyTorch answers for cpu."""
    return _device(device_type).type in ("cpu", "cuda")
