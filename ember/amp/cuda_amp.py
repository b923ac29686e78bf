"""``torch.cuda.amp``: the deprecated CUDA spellings of ``ember.amp.autocast("cuda")`` and ``GradScaler``.

Without a GPU, as in PyTorch, both warn and turn themselves off, so scripts written for a GPU still run.

Example:
    >>> import warnings, ember as torch
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     scaler = torch.cuda.amp.GradScaler()
    >>> scaler.is_enabled()
    False
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ember import dtypes
from ember.amp import autocast_mode, grad_scaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler", "amp_definitely_not_available"]


def amp_definitely_not_available() -> bool:
    """True when CUDA AMP cannot run here (no CUDA device/backend), as ``torch.cuda.amp`` answers."""
    from ember import cuda

    return not cuda.is_available()


class autocast(autocast_mode.autocast):
    """``torch.cuda.amp.autocast(...)`` is ``ember.amp.autocast("cuda", ...)`` (deprecated, as in PyTorch)."""

    def __init__(self, enabled: bool = True, dtype: Any = dtypes.float16, cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """``torch.cuda.amp.GradScaler(...)`` is ``ember.amp.GradScaler("cuda", ...)`` (deprecated, as in PyTorch)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs: Any = None) -> Callable:
    """``torch.cuda.amp.custom_fwd``: ``ember.amp.custom_fwd`` with ``device_type="cuda"``."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return autocast_mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable) -> Callable:
    """``torch.cuda.amp.custom_bwd``: ``ember.amp.custom_bwd`` with ``device_type="cuda"``."""
    return autocast_mode.custom_bwd(bwd, device_type="cuda")
