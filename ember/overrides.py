"""``torch.overrides``: the ``__torch_function__`` protocol's public API.

A ``Tensor`` subclass, or any class with a ``__torch_function__`` classmethod, sees the calls of ember's public
functions, Tensor methods, properties and operators that involve its objects; a :class:`TorchFunctionMode` entered
with ``with`` sees every such call on its thread. How ember implements it and what it costs a program that uses
none of it: :mod:`ember._torch_function` and docs/pytorch-compat.md.

Example:
    >>> import ember
    >>> class Logged(ember.Tensor):
    ...     calls = []
    ...     @classmethod
    ...     def __torch_function__(cls, func, types, args=(), kwargs=None):
    ...         cls.calls.append(func.__name__)
    ...         return super().__torch_function__(func, types, args, kwargs)
    >>> x = ember.ones(2).as_subclass(Logged)
    >>> type(x + 1).__name__, Logged.calls
    ('Logged', ['add'])
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterable, Iterator

from ember import _torch_function as _tf
from ember._torch_function import DisableTorchFunction, DisableTorchFunctionSubclass  # noqa: F401

__all__ = ["get_ignored_functions", "get_overridable_functions", "get_testing_overrides", "handle_torch_function",
           "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic", "is_tensor_like",
           "is_tensor_method_or_property", "resolve_name", "wrap_torch_function", "TorchFunctionMode",
           "BaseTorchFunctionMode", "enable_reentrant_dispatch"]


def _enabled() -> bool:
    return not _tf.STATE.no_torch_function


def has_torch_function(relevant_args: Iterable[Any]) -> bool:
    """True when a mode is active or an argument's type overrides (exact Tensors and Parameters do not)."""
    if not _enabled():
        return False
    if _tf.STATE.modes:
        return True
    if _tf.STATE.no_subclass:
        return False
    found = _tf.overloaded_args(relevant_args)
    for arg in found:  # a Tensor-like class: Tensor's methods dispatch on its objects from now on
        if not isinstance(arg, _tf._TENSOR):
            _tf.foreign_seen(type(arg))
    return bool(found)


def has_torch_function_unary(arg: Any) -> bool:
    return has_torch_function((arg,))


def has_torch_function_variadic(*args: Any) -> bool:
    return has_torch_function(args)


def handle_torch_function(public_api: Callable[..., Any], relevant_args: Iterable[Any], *args: Any,
                          **kwargs: Any) -> Any:
    """Call the active mode's or the overriding types' ``__torch_function__`` for ``public_api(*args, **kwargs)``;
    TypeError when every one returns NotImplemented."""
    overloaded = [] if _tf.STATE.no_subclass else _tf.overloaded_args(relevant_args)
    for arg in overloaded:
        if not isinstance(arg, _tf._TENSOR):
            _tf.foreign_seen(type(arg))
    return _tf.handle(public_api, overloaded, args, kwargs)


def is_tensor_like(inp: Any) -> bool:
    """A Tensor, or an object whose type defines ``__torch_function__``."""
    if type(inp) is _tf._TENSOR:
        return True
    if not hasattr(inp, "__torch_function__"):
        return False
    if not isinstance(inp, _tf._TENSOR) and _tf._is_overloaded_type(type(inp)):
        _tf.foreign_seen(type(inp))  # Tensor's methods dispatch on its objects from now on
    return True


def get_overridable_functions() -> dict[Any, list]:
    """Namespace -> the functions of it that ``__torch_function__`` can override (``Tensor``'s methods too)."""
    out: dict[Any, list] = {_tf.NAMESPACES[label]: list(funcs) for label, funcs in _tf.OVERRIDABLE.items()}
    out[_tf._TENSOR] = [getattr(_tf._TENSOR, name) for name in _tf._wrappers()]
    return out


def get_ignored_functions() -> set:
    """Public functions that ``__torch_function__`` never sees (creation, random seeding, global settings, ...)."""
    return {fn for funcs in _tf.IGNORED.values() for fn in funcs} | \
        {getattr(_tf._TENSOR, name) for name in ("as_subclass", "_make_subclass")}


def get_testing_overrides() -> dict[Callable[..., Any], Callable[..., Any]]:
    """Each overridable function -> a dummy with a compatible signature that returns -1 (torch's testing aid)."""
    out = {}
    for funcs in get_overridable_functions().values():
        for fn in funcs:
            if callable(fn):
                out[fn] = functools.wraps(fn)(lambda *args, **kwargs: -1)
    return out


def is_tensor_method_or_property(func: Callable[..., Any]) -> bool:
    """True for Tensor's methods and properties' getters (their first argument is the tensor)."""
    name = getattr(func, "__name__", None)
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        return isinstance(owner, property) and any(owner is p for p in vars(_tf._TENSOR).values()) or \
            owner in _tf._ORIGINAL.values() or owner in _tf._wrappers().values()
    return name is not None and (getattr(_tf._TENSOR, name, None) is func or _tf._ORIGINAL.get(name) is func)


def resolve_name(f: Any) -> str | None:
    """``torch.add`` -> ``'torch.add'``; ``Tensor.add`` -> ``'torch.Tensor.add'``; None when unknown."""
    if isinstance(f, (property, type(_tf._TENSOR.shape.__get__))) or getattr(f, "__name__", "") == "__get__":
        owner = getattr(f, "__self__", f)
        for name, attr in vars(_tf._TENSOR).items():
            if attr is owner:
                return f"torch.Tensor.{name}"
        return None
    name = getattr(f, "__name__", None)
    if name is None:
        return None
    if getattr(_tf._TENSOR, name, None) is f:
        return f"torch.Tensor.{name}"
    for label, funcs in _tf.OVERRIDABLE.items():
        if any(fn is f for fn in funcs):
            return f"{label}.{name}"
    return None


def wrap_torch_function(dispatcher: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``func`` becomes overridable; ``dispatcher(*args, **kwargs)`` names its relevant arguments."""
    def inner(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


class TorchFunctionMode:
    """Sees every overridable call on this thread while entered (``with mode:``); nested modes stack, the
    innermost first, and a mode is off while its own ``__torch_function__`` runs (so ``func(*args)`` inside
    runs the call, the outer modes seeing it)."""

    def __init__(self) -> None:
        pass

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError

    def __enter__(self) -> "TorchFunctionMode":
        _tf.push_mode(self)
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        _tf.pop_mode()

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> "TorchFunctionMode":
        """Deprecated by torch: ``with Mode():`` instead. Returns the instance, already usable with ``with``."""
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs each call unchanged (subclass it and override what you need)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def _get_current_function_mode() -> TorchFunctionMode | None:
    return _tf.STATE.modes[-1] if _tf.STATE.modes else None


def _get_current_function_mode_stack() -> list:
    return list(_tf.STATE.modes)


def _push_mode(mode: TorchFunctionMode) -> None:
    _tf.push_mode(mode)


def _pop_mode() -> TorchFunctionMode:
    return _tf.pop_mode()


@contextlib.contextmanager
def _pop_mode_temporarily() -> Iterator[TorchFunctionMode]:
    mode = _tf.pop_mode()
    try:
        yield mode
    finally:
        _tf.push_mode(mode)


def _is_torch_function_mode_enabled() -> bool:
    return bool(_tf.STATE.modes) and _enabled()


@contextlib.contextmanager
def enable_reentrant_dispatch() -> Iterator[None]:
    """torch's context for ``__torch_dispatch__`` re-entry; ember has no dispatcher below the Python API, so it
    changes nothing."""
    yield


# Names of ember's namespaces that ``__torch_function__`` never sees, as torch's ``get_ignored_functions``:
# factories and random draws (no tensor argument decides), seeding, global settings and their queries, files.
IGNORED_TOP_LEVEL = frozenset("""
arange are_deterministic_algorithms_enabled as_strided as_tensor asarray bartlett_window blackman_window
broadcast_shapes can_cast clear_autocast_cache compile cond empty empty_permuted empty_strided eye fill from_file
from_numpy frombuffer full get_autocast_cpu_dtype get_autocast_dtype get_autocast_gpu_dtype get_default_device
get_default_dtype get_deterministic_debug_mode get_device_module get_float32_matmul_precision
get_num_interop_threads get_num_threads get_rng_state hamming_window hann_window init_num_threads initial_seed
is_anomaly_check_nan_enabled is_anomaly_enabled is_autocast_cache_enabled is_autocast_cpu_enabled
is_autocast_enabled is_deterministic_algorithms_warn_only_enabled is_grad_enabled is_inference_mode_enabled
is_storage is_tensor is_warn_always_enabled kaiser_window linspace load logspace manual_seed normal ones
promote_types rand rand_like randint randint_like randn randn_like randperm range result_type save scalar_tensor
seed set_anomaly_enabled set_autocast_cache_enabled set_autocast_cpu_dtype set_autocast_cpu_enabled
set_autocast_dtype set_autocast_enabled set_autocast_gpu_dtype set_default_device set_default_tensor_type
set_deterministic_debug_mode set_float32_matmul_precision set_flush_denormal set_num_interop_threads
set_num_threads set_printoptions set_rng_state set_warn_always sparse_compressed_tensor sparse_coo_tensor
sparse_csc_tensor sparse_csr_tensor sym_constrain_range sym_constrain_range_for_size sym_fresh_size tensor
thread_safe_generator tril_indices triu_indices typename use_deterministic_algorithms vander vmap zeros
set_default_dtype is_autocast_available from_dlpack to_dlpack while_loop get_printoptions
""".split())
IGNORED_FUNCTIONAL = frozenset("""
has_torch_function has_torch_function_unary has_torch_function_variadic handle_torch_function boolean_dispatch
""".split())
IGNORED = {"torch": IGNORED_TOP_LEVEL, "torch.nn.functional": IGNORED_FUNCTIONAL}
# Ignored functions a mode still sees (torch's C++ factories go through its argument parser, which asks modes).
MODE_ONLY = {"torch": frozenset("""
arange as_strided as_tensor asarray bartlett_window blackman_window can_cast empty empty_permuted empty_strided eye
fill full hamming_window hann_window kaiser_window linspace logspace normal ones promote_types rand rand_like randint
randint_like randn randn_like randperm result_type scalar_tensor sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor
sparse_compressed_tensor tensor tril_indices triu_indices vander zeros
""".split())}

# torch's functions written in Python (their plain Tensor arguments appear in ``types``): these top-level ones, and
# every ``nn.functional`` function but the C++ builtins named here.
_PYTHON_TOP_LEVEL = frozenset("""
atleast_1d atleast_2d atleast_3d block_diag broadcast_tensors cartesian_prod cdist chain_matmul einsum lobpcg meshgrid
norm split stft tensordot unique_consecutive unravel_index
""".split())
_BUILTIN_FUNCTIONAL = frozenset("""
adaptive_avg_pool1d avg_pool1d avg_pool2d avg_pool3d bilinear channel_shuffle conv1d conv2d conv3d conv_tbc
conv_transpose1d conv_transpose2d conv_transpose3d cosine_similarity gelu hardshrink linear log_sigmoid
native_channel_shuffle one_hot pairwise_distance pdist pixel_shuffle pixel_unshuffle prelu scaled_dot_product_attention
softplus softshrink
""".split())


def python_level(label: str, name: str) -> bool:
    if label == "torch":
        return name in _PYTHON_TOP_LEVEL
    return label == "torch.nn.functional" and name not in _BUILTIN_FUNCTIONAL
