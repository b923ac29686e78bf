"""``torch._foreach_*``: one op applied to every tensor of a list, as PyTorch's multi-tensor functions.

Library code calls them directly: timm's and ema_pytorch's model EMAs (``_foreach_lerp_``, ``_foreach_mul_``,
``_foreach_add_``), optimizers written outside PyTorch (Lion, Adan, LAMB), gradient clipping helpers
(``_foreach_norm``, ``_foreach_mul_``). PyTorch fuses each call into a few kernels; here each is the loop of
ember's own per-tensor function, so dtypes, broadcasting, in-place rules and autograd are those of the
single-tensor op (the out-of-place forms are differentiable, as PyTorch's).

Calling conventions, as torch 2.13's:

- out-of-place forms return a tuple of new tensors; in-place forms (trailing ``_``) change every tensor and
  return the list they were given;
- the second operand of a binary op is a number, a list of numbers (one per tensor), a list of tensors, or a
  0-d tensor used for every element (``_foreach_pow`` also takes a number as the base);
- lists must have the same length and at least one tensor (PyTorch's errors).

Example:
    >>> import ember
    >>> ema = [ember.zeros(2), ember.zeros(3)]
    >>> new = [ember.ones(2), ember.ones(3)]
    >>> _ = ember._foreach_lerp_(ema, new, 0.25)
    >>> ema[1]
    tensor([0.2500, 0.2500, 0.2500])
    >>> ember._foreach_norm(new)
    (tensor(1.4142), tensor(1.7321))
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from ember.tensor import Tensor

__all__ = ["install"]

# ember's top-level namespace, given by ``install`` (this module is imported by ``ember/__init__`` and must not
# import ``ember`` itself: that would be an import cycle through the package)
_ember: Any = None


def _check_list(name: str, tensors: Any) -> Sequence[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): expected a list or tuple of tensors, got {type(tensors).__name__}")
    if len(tensors) == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected every element to be a Tensor, got {type(t).__name__}")
    return tensors


def _same_length(first: Sequence[Tensor], other: Sequence[Any]) -> None:
    if len(first) != len(other):
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(first)} and {len(other)}")


def _is_number(x: Any) -> bool:
    return isinstance(x, (numbers.Number, bool))


def _per_element(name: str, tensors: Sequence[Tensor], other: Any) -> list[Any]:
    """The operand for each tensor: a number or 0-d tensor for all, or one list entry per tensor."""
    if isinstance(other, Tensor):
        if other.dim() != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.dim()} dimensions and "
                               f"{other.numel()} elements.")
        return [other] * len(tensors)
    if _is_number(other):
        return [other] * len(tensors)
    if isinstance(other, (list, tuple)):
        if other and all(isinstance(o, Tensor) for o in other):
            _same_length(tensors, other)
        elif all(_is_number(o) for o in other):
            if len(other) != len(tensors):
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        else:
            raise TypeError(f"{name}(): expected a list of tensors or a list of numbers as the operand")
        return list(other)
    raise TypeError(f"{name}(): expected a number, a 0-d tensor or a list as the operand, got {type(other).__name__}")


def _scalars_for_ternary(tensors: Sequence[Tensor], value: Any) -> list[Any]:
    """addcmul/addcdiv's ``value``: a number, a list of numbers, or a 1-D tensor of them (one per tensor)."""
    if isinstance(value, Tensor):
        if value.dim() != 1:
            raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got {value.dim()} instead.")
        if value.numel() != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return [float(v) for v in value.tolist()]
    if _is_number(value):
        return [value] * len(tensors)
    if len(value) != len(tensors):
        raise RuntimeError("Tensor list must have same number of elements as scalar list.")
    return list(value)


# ---- unary ---------------------------------------------------------------------------------------
_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
          "sin", "sinh", "sqrt", "tan", "tanh", "trunc")


def _unary(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    fn = getattr(_ember, op)

    def out_of_place(self: Sequence[Tensor]) -> tuple[Tensor, ...]:
        return tuple(fn(t) for t in _check_list(f"_foreach_{op}", self))

    def in_place(self: Sequence[Tensor]) -> Sequence[Tensor]:
        for t in _check_list(f"_foreach_{op}_", self):
            getattr(t, op + "_")()
        return self

    return out_of_place, in_place


# ---- binary --------------------------------------------------------------------------------------
def _maximum(t: Tensor, o: Any) -> Tensor:
    # PyTorch's scalar overload of _foreach_maximum is clamp_min's kernel
    return _ember.maximum(t, o) if isinstance(o, Tensor) else _ember.clamp_min(t, o)


def _minimum(t: Tensor, o: Any) -> Tensor:
    return _ember.minimum(t, o) if isinstance(o, Tensor) else _ember.clamp_max(t, o)


_BINARY = ("mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum")
_SCALAR_AWARE = {"maximum": _maximum, "minimum": _minimum}


def _binary(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    fn = _SCALAR_AWARE.get(op) or getattr(_ember, op)
    method = op + "_" if op not in ("maximum", "minimum") else None

    def out_of_place(self: Any, other: Any) -> tuple[Tensor, ...]:
        if op == "pow" and _is_number(self):  # _foreach_pow(2.0, exponents)
            return tuple(_ember.pow(self, e) for e in _check_list("_foreach_pow", other))
        tensors = _check_list(f"_foreach_{op}", self)
        return tuple(fn(t, o) for t, o in zip(tensors, _per_element(f"_foreach_{op}", tensors, other)))

    def in_place(self: Sequence[Tensor], other: Any) -> Sequence[Tensor]:
        tensors = _check_list(f"_foreach_{op}_", self)
        for t, o in zip(tensors, _per_element(f"_foreach_{op}_", tensors, other)):
            if method is not None:
                getattr(t, method)(o)
            else:
                t.copy_(fn(t, o))
        return self

    return out_of_place, in_place


def _add_sub(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    fn = getattr(_ember, op)

    def out_of_place(self: Sequence[Tensor], other: Any, *, alpha: Any = 1) -> tuple[Tensor, ...]:
        tensors = _check_list(f"_foreach_{op}", self)
        return tuple(fn(t, o, alpha=alpha) for t, o in zip(tensors, _per_element(f"_foreach_{op}", tensors, other)))

    def in_place(self: Sequence[Tensor], other: Any, *, alpha: Any = 1) -> Sequence[Tensor]:
        tensors = _check_list(f"_foreach_{op}_", self)
        for t, o in zip(tensors, _per_element(f"_foreach_{op}_", tensors, other)):
            getattr(t, op + "_")(o, alpha=alpha)
        return self

    return out_of_place, in_place


# ---- ternary -------------------------------------------------------------------------------------
def _addc(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    fn = getattr(_ember, op)

    def lists(name: str, self: Any, t1: Any, t2: Any, value: Any) -> tuple[Sequence[Tensor], ...]:
        tensors = _check_list(name, self)
        _same_length(tensors, _check_list(name, t1))
        _same_length(tensors, _check_list(name, t2))
        return tensors, t1, t2, _scalars_for_ternary(tensors, value)

    def out_of_place(self: Any, tensor1: Any, tensor2: Any, value: Any = 1) -> tuple[Tensor, ...]:
        tensors, t1, t2, values = lists(f"_foreach_{op}", self, tensor1, tensor2, value)
        return tuple(fn(t, a, b, value=v) for t, a, b, v in zip(tensors, t1, t2, values))

    def in_place(self: Any, tensor1: Any, tensor2: Any, value: Any = 1) -> Sequence[Tensor]:
        tensors, t1, t2, values = lists(f"_foreach_{op}_", self, tensor1, tensor2, value)
        for t, a, b, v in zip(tensors, t1, t2, values):
            getattr(t, op + "_")(a, b, value=v)
        return self

    return out_of_place, in_place


def _foreach_lerp(self: Any, tensors1: Any, weight: Any) -> tuple[Tensor, ...]:
    tensors = _check_list("_foreach_lerp", self)
    _same_length(tensors, _check_list("_foreach_lerp", tensors1))
    return tuple(_ember.lerp(t, e, w) for t, e, w in zip(tensors, tensors1,
                                                          _per_element("_foreach_lerp", tensors, weight)))


def _foreach_lerp_(self: Any, tensors1: Any, weight: Any) -> Sequence[Tensor]:
    tensors = _check_list("_foreach_lerp_", self)
    _same_length(tensors, _check_list("_foreach_lerp_", tensors1))
    for t, e, w in zip(tensors, tensors1, _per_element("_foreach_lerp_", tensors, weight)):
        t.lerp_(e, w)
    return self


# ---- reductions, products, copies ----------------------------------------------------------------
def _foreach_norm(self: Any, ord: Any = 2, dtype: Any = None) -> tuple[Tensor, ...]:
    """The vector norm of each tensor (``linalg.vector_norm``; integer tensors are refused, as PyTorch)."""
    return tuple(_ember.linalg.vector_norm(t, ord, dtype=dtype) for t in _check_list("_foreach_norm", self))


def _foreach_powsum(self: Any, ord: Any = 2, dtype: Any = None) -> tuple[Tensor, ...]:
    """``sum(|x| ** ord)`` of each tensor (the norm before its root)."""
    return tuple(_ember.sum(_ember.abs(t if dtype is None else t.to(dtype)) ** ord)
                 for t in _check_list("_foreach_powsum", self))


def _foreach_max(self: Any) -> tuple[Tensor, ...]:
    return tuple(t.max() for t in _check_list("_foreach_max", self))


def _foreach_mm(self: Any, mat2: Any) -> tuple[Tensor, ...]:
    tensors = _check_list("_foreach_mm", self)
    _same_length(tensors, _check_list("_foreach_mm", mat2))
    return tuple(_ember.mm(a, b) for a, b in zip(tensors, mat2))


def _foreach_clone(self: Any, *, memory_format: Any = None) -> tuple[Tensor, ...]:
    return tuple(t.clone() if memory_format is None else t.clone(memory_format=memory_format)
                 for t in _check_list("_foreach_clone", self))


def _foreach_copy_(self: Any, src: Any, non_blocking: bool = False) -> Sequence[Tensor]:
    tensors = _check_list("_foreach_copy_", self)
    _same_length(tensors, _check_list("_foreach_copy_", src))
    for t, s in zip(tensors, src):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_zero_(self: Any) -> Sequence[Tensor]:
    for t in _check_list("_foreach_zero_", self):
        t.zero_()
    return self


def _build() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {}
    pairs = [(op, _unary(op)) for op in _UNARY] + [(op, _binary(op)) for op in _BINARY]
    pairs += [(op, _add_sub(op)) for op in ("add", "sub")] + [(op, _addc(op)) for op in ("addcmul", "addcdiv")]
    for op, (out_of_place, in_place) in pairs:
        for fn, name in ((out_of_place, f"_foreach_{op}"), (in_place, f"_foreach_{op}_")):
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = f"``torch.{name}``: ``{op}`` applied to every tensor of a list."
            table[name] = fn
    for fn in (_foreach_lerp, _foreach_lerp_, _foreach_norm, _foreach_powsum, _foreach_max, _foreach_mm,
               _foreach_clone, _foreach_copy_, _foreach_zero_):
        table[fn.__name__] = fn
    return table


def install(namespace: dict[str, Any]) -> None:
    """Add every ``_foreach_*`` function to ``namespace`` (ember's top level), whose ops they call."""
    global _ember
    _ember = _Namespace(namespace)
    namespace.update(_build())


class _Namespace:
    """Attribute access to a module's globals dict (``_ember.add`` is ``namespace["add"]``)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        try:
            return self._namespace[name]
        except KeyError:
            raise AttributeError(name) from None
