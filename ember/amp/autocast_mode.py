"""``ember.autocast``: mixed-precision regions with PyTorch's names and semantics.

Inside ``with ember.autocast("cpu"):`` ops run in an op-specific dtype (see
:mod:`ember.amp.policy`): matmul/linear/conv in bfloat16 (or ``dtype=``), losses and a few
precision-sensitive ops in float32, everything else in the dtype of its inputs. The casts are
ordinary recorded ops, so gradients reach float32 parameters as float32. The state is per thread;
regions nest, ``enabled=False`` switches autocast off inside a region, and an instance also works as
a decorator. Backward passes should run outside the region (as in PyTorch).

Example:
    >>> import ember
    >>> w = ember.ones(3, 3, requires_grad=True)
    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     y = ember.ones(2, 3) @ w
    >>> y.dtype
    ember.bfloat16
    >>> y.float().sum().backward(); w.grad.dtype
    ember.float32
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ember import dtypes
from ember.amp.state import DEFAULT_DTYPES, STATE, SUPPORTED_DTYPES

_DEVICE_TYPES = tuple(DEFAULT_DTYPES)


def is_autocast_available(device_type: str) -> bool:
    """True for the device types autocast supports (``"cpu"``, ``"cuda"``)."""
    return device_type in _DEVICE_TYPES


def _check_device_type(device_type: Any, fn: str) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"{fn}: expected `device_type` of type `str` (e.g. 'cpu' or 'cuda'), got "
                         f"{type(device_type).__name__} {device_type!r}")
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f"{fn}: unsupported autocast device_type {device_type!r}; supported device types are "
                           f"{', '.join(map(repr, _DEVICE_TYPES))}")
    return device_type


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for ``device_type`` in this thread (PyTorch's default type is 'cuda')."""
    return bool(STATE.enabled.get(_check_device_type(device_type, "is_autocast_enabled")))


def set_autocast_enabled(device_type: str, enabled: bool | None = None) -> None:
    """Switch autocast for ``device_type`` (``set_autocast_enabled(True)`` alone means 'cuda', as PyTorch)."""
    if enabled is None and isinstance(device_type, bool):
        device_type, enabled = "cuda", device_type
    STATE.enabled[_check_device_type(device_type, "set_autocast_enabled")] = bool(enabled)
    STATE.refresh()


def get_autocast_dtype(device_type: str) -> Any:
    """The lower-precision dtype autocast uses for ``device_type`` (bfloat16 on cpu, float16 on cuda)."""
    return STATE.dtype[_check_device_type(device_type, "get_autocast_dtype")]


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    STATE.dtype[_check_device_type(device_type, "set_autocast_dtype")] = _check_dtype(dtype, "set_autocast_dtype")
    STATE.refresh()


def get_autocast_cpu_dtype() -> Any:
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype() -> Any:
    return get_autocast_dtype("cuda")


def is_autocast_cpu_enabled() -> bool:
    return is_autocast_enabled("cpu")


def is_autocast_cache_enabled() -> bool:
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop the casts of weights cached in this thread's autocast regions."""
    STATE.cache.clear()


def _check_dtype(dtype: Any, fn: str) -> Any:
    if isinstance(dtype, str):
        dtype = dtypes.to_dtype(dtype)
    if not isinstance(dtype, dtypes.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{fn}: dtype must be a floating ember dtype (ember.bfloat16 or ember.float16), got "
                         f"{dtype!r}")
    return dtype


class autocast:
    """Context manager / decorator running the ops inside in mixed precision (``torch.autocast``).

    Args:
        device_type: ``"cpu"`` or ``"cuda"`` (the ``type`` of a device).
        dtype: the lower-precision dtype; ``None`` is :func:`get_autocast_dtype` (bfloat16 on cpu,
            float16 on cuda). float32/float64 disable autocast with a warning, as in PyTorch.
        enabled: ``False`` makes the region run without autocast (also inside an enabled one).
        cache_enabled: reuse the cast of a weight within the region; ``None`` keeps the current setting.
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _check_device_type(device_type, "autocast")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else _check_dtype(dtype, "autocast")
        if enabled and self.fast_dtype not in SUPPORTED_DTYPES:
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype {self.fast_dtype} is not "
                          f"supported. Disabling autocast. {device_type.upper()} autocast only supports dtypes "
                          "of ember.bfloat16, ember.float16 currently.", stacklevel=2)
            enabled = False
        if enabled and self.device == "cuda":
            from ember import cuda

            if not cuda.is_available():  # PyTorch's behaviour: a GPU script still runs, without autocast
                warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling",
                              stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        self._saved: list[tuple] = []  # a stack, so one instance can be entered again (decorator, recursion)

    def __enter__(self) -> "autocast":
        device = self.device
        self._saved.append((STATE.enabled.get(device, False), STATE.dtype[device], STATE.cache_enabled))
        STATE.enabled[device] = self._enabled
        STATE.dtype[device] = self.fast_dtype
        if self._cache_enabled is not None:
            STATE.cache_enabled = bool(self._cache_enabled)
        STATE.nesting += 1
        STATE.refresh()
        return self

    def __exit__(self, *exc: Any) -> bool:
        STATE.nesting -= 1
        if STATE.nesting == 0:  # back outside every region: drop the cached weight casts
            STATE.cache.clear()
        enabled, dtype, cache_enabled = self._saved.pop()
        STATE.enabled[self.device] = enabled
        STATE.dtype[self.device] = dtype
        STATE.cache_enabled = cache_enabled
        STATE.refresh()
        return False

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorate_autocast(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return decorate_autocast

    def __repr__(self) -> str:
        return f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled})"


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs: Any = None) -> Callable:
    """Decorator for a custom ``Function.forward``: runs it in the surrounding autocast state, or, with
    ``cast_inputs=dtype``, casts floating tensor inputs to it and runs it with autocast off (PyTorch's)."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _check_device_type(device_type, "custom_fwd")

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        enabled = is_autocast_enabled(device_type)
        ctx = args[0] if args else None
        if ctx is not None:
            try:
                ctx._fwd_used_autocast = enabled
                ctx._dtype = get_autocast_dtype(device_type)
            except AttributeError:
                pass
        if cast_inputs is None or not enabled:
            return fwd(*args, **kwargs)
        if ctx is not None:
            ctx._fwd_used_autocast = False  # the forward ran without autocast: so will the backward
        from ember.amp.policy import _cast_tree
        from ember.tensor import Tensor

        target = _check_dtype(cast_inputs, "custom_fwd")
        args = tuple(_cast_tree(a, target, device_type, Tensor) for a in args)
        kwargs = {k: _cast_tree(v, target, device_type, Tensor) for k, v in kwargs.items()}
        with autocast(device_type, enabled=False):
            return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorator for a custom ``Function.backward``: runs it in the autocast state its forward saw."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _check_device_type(device_type, "custom_bwd")

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0] if args else None
        used = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_dtype", None)
        with autocast(device_type, enabled=used, dtype=dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
