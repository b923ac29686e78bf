"""The builtins a TorchScript archive's code may call, each mapped to an ember function (the allow-list).

TorchScript prints every ATen operator as ``torch.<name>(...)`` (or ``ops.aten.<name>``), TorchScript's own
primitives as ``ops.prim.<name>``, and list/str/dict/number operations as ATen names too (``torch.append(xs, x)``,
``torch.len``, ``torch.format``, ``torch.add(i, 2)`` on ints). :func:`resolve` answers a dotted name with a callable
only when the name is in one of the tables here: :data:`PYTHON` (the operation on Python numbers, lists, strings and
dicts, used when no argument is a tensor), :data:`SPECIAL` (ATen operators whose arguments differ from ember's
public functions of the same name) and :data:`ATEN` (operators that are ember's public function, Tensor method or
``nn.functional`` function of the same name, found through :func:`ember.custom_ops.namespaces._resolve_aten`, the
``torch.ops.aten`` mapping). Any other name is refused by the interpreter, so an archive cannot reach
``torch.save``, ``torch.load``, file or process functions, or attributes of Python objects.

TorchScript passes dtypes as integers (ATen's ``ScalarType`` codes), so ``dtype=6`` is float32; :func:`to_dtype`
converts them. Layouts, ``pin_memory`` and memory formats are accepted and dropped (ember tensors are strided and
contiguous-or-viewed; there is no pinned memory on the CPU path).

Example:
    >>> import ember
    >>> resolve("torch.add")(2, 3), resolve("torch.add")(ember.ones(1), 1).tolist()
    (5, [2.0])
    >>> resolve("torch.format")("got {} and {}", 1, [2])
    'got 1 and [2]'
"""
from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Callable

from ember import dtypes
from ember.autograd import grad_mode
from ember.custom_ops import namespaces
from ember.custom_ops.namespaces import _ember
from ember.device import device as make_device
from ember.jit.torchscript import fastpath
from ember.nn import functional as F
from ember.tensor import Tensor

# ATen's ScalarType codes (c10/core/ScalarType.h), as TorchScript prints dtypes
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                7: "float64", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16", 23: "float8_e5m2",
                24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz"}


def to_dtype(value: Any) -> Any:
    """An ember dtype from TorchScript's ScalarType code (or an ember dtype, or None)."""
    if value is None or isinstance(value, dtypes.dtype):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in SCALAR_TYPES:
        return dtypes.to_dtype(SCALAR_TYPES[value])
    raise ValueError(f"TorchScript dtype code {value!r:.40} is not one ember has "
                     f"(known: {', '.join(f'{k}={v}' for k, v in SCALAR_TYPES.items())})")


def _has_tensor(args: tuple, kwargs: dict) -> bool:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(v, Tensor) for v in a):
            return True
    return False


def _kwargs(kwargs: dict) -> dict:
    """TorchScript's keyword arguments in ember's terms: dtype codes to dtypes, layout/pin_memory/format dropped."""
    out = dict(kwargs)
    if "dtype" in out:
        out["dtype"] = to_dtype(out["dtype"])
    for key in ("layout", "pin_memory", "memory_format"):
        out.pop(key, None)
    if out.get("device", 0) is None:
        del out["device"]
    return out


def _format(fmt: str, *args: Any) -> str:
    """``aten::format``: each ``{}`` in turn becomes ``str(arg)``; no other field syntax is read (so a format
    string from a file cannot reach attributes, as ``str.format``'s ``{0.__class__}`` would)."""
    if not isinstance(fmt, str):
        raise TypeError(f"torch.format expects a string, got {type(fmt).__name__}")
    parts = fmt.split("{}")
    out = [parts[0]]
    for k, part in enumerate(parts[1:]):
        out.append(_str(args[k]) if k < len(args) else "{}")
        out.append(part)
    return "".join(out)


def _str(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_str(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float, str, type(None), Tensor, dtypes.dtype)) or type(value).__name__ == "device":
        return str(value)
    return f"<{type(value).__name__}>"


def _append(xs: list, x: Any) -> list:
    xs.append(x)
    return xs


def _size(x: Any, dim: Any = None) -> Any:
    return list(x.shape) if dim is None else x.size(dim)


def _len(x: Any) -> int:
    return len(x) if not isinstance(x, Tensor) else x.shape[0]


def _pow(a: Any, b: Any) -> Any:
    out = a ** b
    return float(out) if isinstance(a, int) and isinstance(b, int) else out  # aten::pow.int returns float


def _slice_list(xs: Any, start: Any = None, end: Any = None, step: int = 1) -> Any:
    return xs[start:end:step]


def _getitem(xs: Any, index: Any) -> Any:
    return xs[index]


def _set_item(xs: Any, index: Any, value: Any) -> Any:
    if not isinstance(xs, (list, dict)):
        raise TypeError(f"torch._set_item expects a list or dict, got {type(xs).__name__}")
    xs[index] = value
    return xs


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, dtypes.dtype) and isinstance(b, int):
        b = to_dtype(b)
    if isinstance(b, dtypes.dtype) and isinstance(a, int):
        a = to_dtype(a)
    return a == b


def _warn(message: Any, stacklevel: int = 2) -> None:
    warnings.warn(str(message), UserWarning, stacklevel=2)


def _get(d: dict, key: Any, default: Any = None) -> Any:
    return d.get(key, default)


# Operations on Python values (numbers, lists, strings, dicts), used when no argument is a tensor.
PYTHON: dict[str, Callable] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "remainder": operator.mod, "pow": _pow, "neg": operator.neg,
    "eq": _eq, "ne": lambda a, b: not _eq(a, b), "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "__and__": operator.and_, "__or__": operator.or_, "__xor__": operator.xor,
    "__not__": operator.not_, "__is__": operator.is_, "__isnot__": operator.is_not,
    "__contains__": lambda container, x: x in container, "__getitem__": _getitem, "_set_item": _set_item,
    "len": _len, "list": list, "format": _format, "append": _append, "str": _str,
    "extend": lambda xs, ys: xs.extend(ys), "insert": lambda xs, i, x: xs.insert(i, x),
    "pop": lambda xs, i=-1: xs.pop(i), "clear": lambda xs: xs.clear(), "copy": lambda xs: xs.copy(),
    "reverse": lambda xs: xs.reverse(), "index": lambda xs, x: xs.index(x), "count": lambda xs, x: xs.count(x),
    "keys": lambda d: list(d.keys()), "values": lambda d: list(d.values()),
    "items": lambda d: list(d.items()), "get": _get, "slice": _slice_list, "select": _getitem,
    "any": any, "all": all, "sum": sum, "min": min, "max": max, "abs": abs,
    "floor": math.floor, "ceil": math.ceil, "sqrt": math.sqrt, "exp": math.exp, "log": math.log,
    "sin": math.sin, "cos": math.cos, "tanh": math.tanh, "fabs": math.fabs, "log10": math.log10,
    "isnan": math.isnan, "isinf": math.isinf,
    "startswith": lambda s, p: s.startswith(p), "endswith": lambda s, p: s.endswith(p),
    "join": lambda sep, parts: sep.join(parts), "lower": lambda s: s.lower(), "upper": lambda s: s.upper(),
    "warn": _warn, "device": make_device,
}


def _to(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``aten::to`` in its overloads: (dtype, non_blocking, copy, memory_format), (device, dtype, ...), (other, ...),
    or keywords only."""
    kwargs = _kwargs(kwargs)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    target_device, target_dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        other = rest.pop(0)
        target_device, target_dtype = other.device, other.dtype
    elif rest and (type(rest[0]).__name__ == "device" or isinstance(rest[0], str)):
        target_device = rest.pop(0)
        if rest:
            target_dtype = to_dtype(rest.pop(0))
    elif rest:
        target_dtype = to_dtype(rest.pop(0))
    if len(rest) >= 2:
        copy = bool(rest[1])
    out = x.to(device=target_device or x.device, dtype=target_dtype or x.dtype)
    return out.clone() if copy and out is x else out


def _softmax(name: str) -> Callable:
    fn = getattr(F, name)

    def call(x: Tensor, dim: int, dtype: Any = None, **kwargs: Any) -> Tensor:
        return fn(x, dim, dtype=to_dtype(kwargs.get("dtype", dtype)))
    return call


def _batch_norm(x: Tensor, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool,
                momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    return F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)


def _instance_norm(x: Tensor, weight: Any, bias: Any, running_mean: Any, running_var: Any, use_input_stats: bool,
                   momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    return F.instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def _convolution(x: Tensor, weight: Tensor, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
                 output_padding: Any, groups: int, *_flags: Any) -> Tensor:
    return namespaces._convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _slice(x: Any, *args: Any, **kwargs: Any) -> Any:
    if not isinstance(x, Tensor):
        return _slice_list(x, *args, **kwargs)
    dim, start, end, step = (list(args) + [None] * 4)[:4]
    dim = kwargs.get("dim", 0 if dim is None else dim)
    start, end = kwargs.get("start", start), kwargs.get("end", end)
    step = kwargs.get("step", 1 if step is None else step)
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _select(x: Any, *args: Any) -> Any:
    return x.select(*args) if isinstance(x, Tensor) else x[args[0]]


def _einsum(equation: str, tensors: Any, path: Any = None) -> Tensor:
    return _ember().einsum(equation, *tensors)


def _adaptive_max_pool(dims: int) -> Callable:
    fn = getattr(F, f"adaptive_max_pool{dims}d")
    return lambda x, output_size: fn(x, output_size, True)


def _max_pool_with_indices(dims: int) -> Callable:
    fn = getattr(F, f"max_pool{dims}d")
    return lambda x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False: fn(
        x, kernel, stride or None, padding, dilation, ceil_mode, True)


def _prim_min(*args: Any) -> Any:
    return min(args[0]) if len(args) == 1 else min(args)


def _prim_max(*args: Any) -> Any:
    return max(args[0]) if len(args) == 1 else max(args)


def _raise(message: Any, kind: Any = "builtins.RuntimeError") -> None:
    """``ops.prim.RaiseException``: the named builtin exception (only these; anything else is a RuntimeError)."""
    raise _EXCEPTIONS.get(kind, RuntimeError)(str(message))


_EXCEPTIONS: dict[str, type] = {f"builtins.{e.__name__}": e for e in (
    RuntimeError, ValueError, TypeError, IndexError, KeyError, AssertionError, NotImplementedError,
    AttributeError, ZeroDivisionError, StopIteration)}


def _num_to_tensor(value: Any) -> Tensor:
    return _ember().tensor(value)


# ATen operators whose arguments differ from ember's functions of the same name, and TorchScript's primitives.
SPECIAL: dict[str, Callable] = {
    "torch.to": _to, "torch.softmax": _softmax("softmax"), "torch.log_softmax": _softmax("log_softmax"),
    "torch.batch_norm": _batch_norm, "torch.instance_norm": _instance_norm,
    "torch.layer_norm": lambda x, shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True: F.layer_norm(
        x, shape, weight, bias, eps),
    "torch.group_norm": lambda x, groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True: F.group_norm(
        x, groups, weight, bias, eps),
    "torch._convolution": _convolution, "torch.slice": _slice, "torch.select": _select,
    "torch.size": _size, "torch.dim": lambda x: x.dim(), "torch.numel": lambda x: x.numel(),
    "torch.einsum": _einsum, "torch.contiguous": lambda x, memory_format=0: x.contiguous(),
    "torch.clone": lambda x, memory_format=None: x.clone(),
    "torch.adaptive_max_pool1d": _adaptive_max_pool(1), "torch.adaptive_max_pool2d": _adaptive_max_pool(2),
    "torch.max_pool1d_with_indices": _max_pool_with_indices(1),
    "torch.max_pool2d_with_indices": _max_pool_with_indices(2),
    "torch.constant_pad_nd": lambda x, pad, value=0: F.pad(x, pad, value=value),
    "torch.rsub": lambda x, other, alpha=1: _ember().sub(other, x, alpha=alpha),
    "torch.item": lambda x: x.item(), "torch.Bool": lambda x: bool(x), "torch.Int": lambda x: int(x),
    "torch.Float": lambda x: float(x), "torch.IntImplicit": lambda x: int(x), "torch.FloatImplicit": lambda x: float(x),
    "torch.ScalarImplicit": lambda x: x.item(), "torch.is_grad_enabled": grad_mode.is_grad_enabled,
    "torch.is_autocast_enabled": lambda *args: _ember().is_autocast_enabled(*args),
    "torch.is_floating_point": lambda x: x.is_floating_point(),
    "torch.requires_grad_": lambda x, requires_grad=True: x.requires_grad_(requires_grad),
    "torch.tensor": lambda data, **kw: _ember().tensor(data, **{k: v for k, v in _kwargs(kw).items()}),
    "torch._native_multi_head_attention": fastpath.native_multi_head_attention,
    "torch._transformer_encoder_layer_fwd": fastpath.transformer_encoder_layer_fwd,
    "ops.prim.RaiseException": _raise, "ops.prim.dtype": lambda x: x.dtype, "ops.prim.device": lambda x: x.device,
    "ops.prim.type": lambda d: d.type, "ops.prim.layout": lambda x: 0,
    "ops.prim.requires_grad": lambda x: x.requires_grad, "ops.prim.is_nested": lambda x: False,
    "ops.prim.is_cuda": lambda x: x.device.type == "cuda", "ops.prim.is_quantized": lambda x: False,
    "ops.prim.is_sparse": lambda x: False, "ops.prim.is_mkldnn": lambda x: False, "ops.prim.is_meta": lambda x: False,
    "ops.prim.is_xpu": lambda x: False, "ops.prim.data": lambda x: x.detach(), "ops.prim.shape": _size,
    "ops.prim.NumToTensor": _num_to_tensor, "ops.prim.unchecked_unwrap_optional": lambda x: x,
    "ops.prim.min": _prim_min, "ops.prim.max": _prim_max, "ops.prim.abs": abs,
}

# ATen operators that are ember's public function / Tensor method / nn.functional function of the same name.
ATEN = frozenset("""
abs abs_ acos acosh adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d add add_ addbmm addcdiv addcmul addmm
all allclose alpha_dropout amax amin any arange argmax argmin argsort asin asinh atan atan2 atanh avg_pool1d
avg_pool2d avg_pool3d baddbmm bernoulli bitwise_and bitwise_not bitwise_or bitwise_xor bmm broadcast_to bucketize cat
cdist ceil celu chunk clamp clamp_ clamp_max clamp_min clip conv1d conv2d conv3d conv_transpose1d conv_transpose2d
conv_transpose3d convolution copy_ cos cosh cosine_similarity cross cumprod cumsum detach detach_ diag diagonal
dist div div_ dropout dropout_ elu embedding empty empty_like eq equal erf erfc exp exp2 expand expand_as expm1 eye
feature_dropout fill_ flatten flip floor floor_divide fmod frac full full_like gather ge gelu glu gt hardshrink
hardsigmoid hardswish hardtanh hardtanh_ index_select isfinite isinf isnan le leaky_relu leaky_relu_ lerp linear
linspace log log10 log1p log2 logical_and logical_not logical_or logical_xor logsigmoid logsumexp lstm gru rnn_tanh
rnn_relu lt masked_fill masked_fill_ masked_select matmul max max_pool1d max_pool2d max_pool3d maximum mean median
min minimum mish mm movedim mul mul_ nan_to_num narrow ne neg new_empty new_full new_ones new_zeros nonzero norm
normalize numel one_hot ones ones_like outer pad permute pixel_shuffle pixel_unshuffle pow prelu prod rand rand_like
randint randn randn_like reciprocal relu relu6 relu_ remainder repeat repeat_interleave reshape reshape_as roll round
rsqrt scaled_dot_product_attention scatter scatter_add selu sigmoid sigmoid_ sign silu sin sinh softplus softshrink
softsign sort split split_with_sizes sqrt square squeeze stack std sub sub_ sum t tan tanh tanh_ tanhshrink
tensor_split threshold tile topk transpose tril triu true_divide trunc type_as unbind unflatten unique unsqueeze
var view view_as where zero_ zeros zeros_like alias lift_fresh _unsafe_view _to_copy scalar_tensor _softmax
_log_softmax sym_size sym_numel detach_copy fill lerp_ exponential_ uniform_ normal_
""".split())


def _aten(name: str) -> Callable:
    """An ATen operator: the Python operation when no argument is a tensor (or when only a Python one exists:
    ``__is__``, ``len``, ``format``...), else ember's."""
    python = PYTHON.get(name)
    ember_fn = namespaces._resolve_aten(name) if name in ATEN else None

    def call(*args: Any, **kwargs: Any) -> Any:
        if ember_fn is None or (python is not None and not _has_tensor(args, kwargs)):
            return python(*args, **kwargs)  # type: ignore[misc]
        return ember_fn(*args, **_kwargs(kwargs))

    call.__name__ = name
    return call


_CACHE: dict[str, Callable] = {}


def resolve(path: str) -> Callable | None:
    """The callable for dotted name ``path`` (``torch.linear``, ``ops.aten.add``, ``ops.prim.dtype``) or None."""
    if path in _CACHE:
        return _CACHE[path]
    found: Callable | None = None
    namespace, _, name = path.rpartition(".")
    if namespace == "ops.aten":
        path, namespace = "torch." + name, "torch"
    if path in SPECIAL:
        special = SPECIAL[path]
        python = PYTHON.get(name) if namespace == "torch" else None
        found = special if python is None else _python_first(python, special)
    elif namespace == "torch" and (name in ATEN or name in PYTHON):
        found = _aten(name)
    if found is not None:
        _CACHE[path] = found
    return found


def _python_first(python: Callable, special: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _has_tensor(args, kwargs) and not (args and isinstance(args[0], Tensor)):
            return python(*args, **kwargs)
        return special(*args, **kwargs)
    return call


def known_names() -> list[str]:
    """Every dotted name :func:`resolve` answers (for documentation and tests)."""
    names = set(SPECIAL) | {f"torch.{n}" for n in ATEN | set(PYTHON)}
    return sorted(names)

