"""Automatic mixed precision (``torch.amp``): :class:`autocast` regions and :class:`GradScaler`.

Example:
    >>> import ember
    >>> model = ember.nn.Linear(4, 2)
    >>> opt = ember.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = ember.amp.GradScaler("cpu")
    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     loss = model(ember.randn(8, 4)).float().pow(2).mean()
    >>> scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    >>> model.weight.grad.dtype
    ember.float32
"""
from ember.amp.autocast_mode import (  # noqa: F401
    autocast,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from ember.amp.grad_scaler import GradScaler  # noqa: F401
from ember.amp.policy import autocast_policy  # noqa: F401

__all__ = ["autocast", "GradScaler", "autocast_policy", "custom_fwd", "custom_bwd", "is_autocast_available",
           "is_autocast_enabled", "get_autocast_dtype"]
