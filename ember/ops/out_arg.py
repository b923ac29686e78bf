"""PyTorch's ``out=`` argument: compute, then write the result into the caller's tensor(s) and return them.

Several functions took ``out=`` and ignored it (``linalg.inv(A, out=B)`` left ``B`` untouched: a silent wrong
result the trust fuzzer found); others refused it. :func:`with_out` gives a function torch's semantics:

* the result is cast into ``out``'s dtype when PyTorch's ``can_cast`` allows it (no float -> integer,
  complex -> real, or number -> bool), else ``RuntimeError: result type Float can't be cast to the desired
  output type Long``;
* an ``out`` of another shape is resized (PyTorch warns when it had elements; an empty one is resized
  silently), and ``out`` itself is returned (a tuple/named tuple of them for multi-output functions);
* with autograd recording and an input that requires grad, PyTorch refuses (out= is not differentiable).

Example:
    >>> import ember
    >>> o = ember.empty(0)
    >>> ember.sum(ember.ones(2, 3), 1, out=o) is o
    True
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from ember.autograd import grad_mode
from ember.autograd.grad_mode import no_grad
from ember.tensor import Tensor

_KIND = {"bool": 0, "int": 1, "float": 2, "complex": 3}


def _kind(dtype: Any) -> int:
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 0 if str(dtype).endswith("bool") else 1


def can_cast(source: Any, target: Any) -> bool:
    """PyTorch's ``torch.can_cast``: no lowering of the category (complex > float > integer > bool)."""
    return _kind(source) <= _kind(target)


def _requires_grad(args: tuple, kwargs: dict) -> bool:
    def walk(value: Any) -> bool:
        if isinstance(value, Tensor):
            return value.requires_grad
        if isinstance(value, (tuple, list)):
            return any(walk(v) for v in value)
        return False

    return any(walk(v) for v in args) or any(walk(v) for v in kwargs.values())


def write_out(op: str, result: Any, out: Any, policy: str = "cast") -> Any:
    """Write ``result`` (a tensor or a tuple of tensors) into ``out``; returns ``out`` (same structure).

    ``policy``: "cast" (PyTorch's can_cast into out's dtype), "exact" (out's dtype must be the result's: max, sort,
    linalg), "bool" (any/all: a bool or uint8 out)."""
    if isinstance(result, Tensor):
        if not isinstance(out, Tensor):
            raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
        _write_one(op, result, out, policy)
        return out
    results = tuple(result)
    if not isinstance(out, (tuple, list)) or len(out) != len(results):
        raise TypeError(f"{op}: out must be a tuple of {len(results)} tensors, got {type(out).__name__}")
    for r, o in zip(results, out):
        write_out(op, r, o, policy)
    return type(result)(*out) if hasattr(result, "_fields") else tuple(out)


def _write_one(op: str, result: Tensor, out: Tensor, policy: str) -> None:
    if policy == "exact" and result.dtype is not out.dtype:
        raise RuntimeError(f"{op}: Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead")
    if policy == "bool" and _torch_name(out.dtype) not in ("Bool", "Byte"):
        raise RuntimeError(f"{op} only supports bool tensor for result, got: {_torch_name(out.dtype)}")
    if policy != "bool" and not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{op}: result type {_torch_name(result.dtype)} can't be cast to the desired output type "
                           f"{_torch_name(out.dtype)}")
    if result.device != out.device:
        raise RuntimeError(f"{op}: expected out on {result.device}, got out on {out.device}")
    with no_grad():
        if tuple(out.shape) == tuple(result.shape):
            out.copy_(result)
            return
        if out.numel():
            warnings.warn(f"{op}: an output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape {list(result.shape)}. "
                          "This behavior is deprecated; resize the output first (out.resize_(0)).", UserWarning,
                          stacklevel=4)
        out.data = result.detach().to(out.dtype).clone()
        out._bump()


def _torch_name(dtype: Any) -> str:
    names = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
             "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
    return names.get(str(dtype).split(".")[-1], str(dtype))


def with_out(function: Callable, name: str | None = None, policy: str = "cast") -> Callable:
    """``function`` with a keyword ``out=``: computed without it, then written by :func:`write_out`.

    ``policy="dtype"``: the function takes ``dtype=`` and accumulates in out's dtype (sum, prod, cumsum: PyTorch
    computes ``sum(x, out=int8_tensor)`` in int8, wrapping)."""
    op = name or function.__name__

    @functools.wraps(function)
    def wrapper(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return function(*args, **kwargs)
        if grad_mode.STATE.enabled and _requires_grad(args, kwargs):
            raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, "
                               "but one of the arguments requires grad.")
        if policy == "dtype" and isinstance(out, Tensor) and kwargs.get("dtype") is None:
            kwargs["dtype"] = out.dtype
        if policy == "input" and isinstance(out, Tensor) and args and isinstance(args[0], Tensor) and (
                out.dtype.is_floating_point and not args[0].dtype.is_complex
                and (args[0].dtype.is_floating_point or op in ("logsumexp", "logcumsumexp"))):
            args = (args[0].to(out.dtype),) + args[1:]  # std(bfloat16 x, out=float64) is computed in float64
        return write_out(op, function(*args, **kwargs), out, "cast" if policy in ("dtype", "input") else policy)

    wrapper.__wrapped_out__ = True
    return wrapper


def adopt(namespace: dict, names: tuple, prefix: str = "", policy: str = "exact") -> None:
    """Replace each function ``namespace[name]`` (which takes an ``out`` it does not use) by :func:`with_out` of it."""
    for name in names:
        namespace[name] = with_out(namespace[name], prefix + name, policy)
