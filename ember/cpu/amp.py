"""``torch.cpu.amp``: the deprecated CPU spellings of ``ember.amp.autocast`` and ``GradScaler``.

Example:
    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with ember.cpu.amp.autocast():
    ...         ember.is_autocast_enabled("cpu")
    True
"""
from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes
from ember.amp import autocast_mode, grad_scaler


class autocast(autocast_mode.autocast):
    """``ember.cpu.amp.autocast(...)`` is ``ember.amp.autocast("cpu", ...)`` (deprecated, as in PyTorch)."""

    def __init__(self, enabled: bool = True, dtype: Any = dtypes.bfloat16, cache_enabled: bool = True) -> None:
        warnings.warn("`ember.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`ember.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """``ember.cpu.amp.GradScaler(...)`` is ``ember.amp.GradScaler("cpu", ...)`` (deprecated, as in PyTorch)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        warnings.warn("`ember.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`ember.amp.GradScaler('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
