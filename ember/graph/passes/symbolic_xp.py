"""Run an op's ``impl`` on a symbolic array namespace to get the steps a fused kernel executes.

The fuser needs an elementwise op's math as a list of namespace calls. Instead of a second,
hand-written copy of that math (which drifts: a formula string once ignored gelu's
``approximate``), the op's own ``impl(xp, *arrays, **attrs)`` runs with ``xp`` a
:class:`SymbolicNamespace`: each ``xp.exp(a)``, ``a * 0.5``, ``a.astype(...)`` or
``special_function(xp, "erf")(a)`` appends one three-address step ``(name, fn, operands, kwargs)``.
Replaying the steps with the real namespace performs exactly the calls ``impl`` performs, so the
fused result equals eager bit for bit.

Each symbolic value carries a *witness*: a one-element NumPy array of its dtype and rank, on which
every step is also evaluated, so ``a.dtype`` and NumPy's promotion rules answer as in eager.
Anything the namespace does not model (a function it does not know, ``bool(a)``, ``a.shape``, an
operand that is not a number) raises :class:`Untraceable`; the op then simply does not fuse.
Constants in steps are only Python numbers, so generated kernel source never holds text that
came from outside ember.

Example:
    >>> import numpy as np
    >>> steps, out = trace_impl(lambda xp, x: xp.tanh(x * 0.5), [np.dtype("float32")], [1], {})
    >>> [s[1] for s in steps], out
    (['multiply', 'tanh'], 't2')
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

# Namespace functions besides ufuncs that a fused kernel may call; the reductions only as the last
# step of a group over its whole loop shape (the fuser checks shapes).
_FUNCTIONS = ("where", "clip", "round", "sum", "mean", "asarray")
# Special functions the backends provide (``ember.backends.special_function``).
SPECIAL = ("erf", "erfc", "fma")  # erfinv: SciPy only today, so a fused call could find none
# (fma: ember/ops/fma.py's a * b + c rounded once; one step, Numba's llvm.fma in compiled loops)


class Untraceable(Exception):
    """``impl`` did something a fused kernel cannot replay; the op runs as its own node."""


def _number(value: Any) -> Any:
    """A constant operand: Python numbers only (NumPy scalars become Python ones)."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        # A NumPy scalar is strongly typed (NEP 50): keep it as a 0-d array's dtype via a cast step.
        raise Untraceable(f"typed scalar {value!r}")
    raise Untraceable(f"operand of type {type(value).__name__}")


class Sym:
    """A symbolic array: the name of the step that makes it plus a witness of its dtype and rank."""

    __array_ufunc__ = None  # NumPy functions called on a Sym directly raise TypeError (untraceable)

    def __init__(self, name: str, witness: np.ndarray, tracer: "SymbolicNamespace", special: bool = False) -> None:
        self.name, self.witness, self.tracer = name, witness, tracer
        # Made by a special function: its witness dtype is a promise the real function may not keep
        # (SciPy's erf returns float64 for float16), so a cast to "the same" dtype is still recorded.
        self.special = special

    @property
    def dtype(self) -> np.dtype:
        return self.witness.dtype

    @property
    def ndim(self) -> int:
        return self.witness.ndim

    def __getattr__(self, name: str) -> Any:
        raise Untraceable(f"array attribute {name!r}")

    def __bool__(self) -> bool:
        raise Untraceable("data-dependent control flow")

    def astype(self, dtype: Any, copy: bool = True) -> "Sym":
        target = np.dtype(dtype)
        if target == self.dtype and not copy and not self.special:
            return self
        return self.tracer.record("cast", (self,), {"dtype": target})

    def _op(name: str, swap: bool = False) -> Callable:  # noqa: N805 - builds the dunders below
        def method(self: "Sym", other: Any = None) -> "Sym":
            args = (self,) if other is None and name in ("negative", "positive", "invert") else \
                ((other, self) if swap else (self, other))
            return self.tracer.record(name, args, {})

        return method

    __add__, __radd__ = _op("add"), _op("add", True)
    __sub__, __rsub__ = _op("subtract"), _op("subtract", True)
    __mul__, __rmul__ = _op("multiply"), _op("multiply", True)
    __truediv__, __rtruediv__ = _op("true_divide"), _op("true_divide", True)
    __floordiv__, __rfloordiv__ = _op("floor_divide"), _op("floor_divide", True)
    __mod__, __rmod__ = _op("remainder"), _op("remainder", True)
    __pow__, __rpow__ = _op("power"), _op("power", True)
    __and__, __rand__ = _op("bitwise_and"), _op("bitwise_and", True)
    __or__, __ror__ = _op("bitwise_or"), _op("bitwise_or", True)
    __xor__, __rxor__ = _op("bitwise_xor"), _op("bitwise_xor", True)
    __lt__, __le__, __gt__, __ge__ = _op("less"), _op("less_equal"), _op("greater"), _op("greater_equal")
    __eq__, __ne__ = _op("equal"), _op("not_equal")  # type: ignore[assignment]
    __neg__, __pos__, __invert__ = _op("negative"), _op("positive"), _op("invert")
    __hash__ = None  # type: ignore[assignment]
    del _op


class SymbolicNamespace:
    """An ``xp`` whose functions record steps instead of computing (see the module docstring)."""

    # Lets an impl that picks its fastest eager form by looking at values (relu's backward) take
    # its value-free form when it is being recorded for a fused kernel.
    records_steps = True

    def __init__(self) -> None:
        self.steps: list[tuple] = []

    def record(self, fn: str, args: Sequence[Any], kwargs: dict) -> Sym:
        operands = [a.name if isinstance(a, Sym) else _number(a) for a in args]
        witnesses = [a.witness if isinstance(a, Sym) else a for a in args]
        with np.errstate(all="ignore"):
            if fn == "cast":
                witness = witnesses[0].astype(kwargs["dtype"])
            elif fn == "fma":
                witness = np.asarray(witnesses[0] * witnesses[1] + witnesses[2])  # the operands' dtype (NEP 50)
            elif fn in SPECIAL:
                witness = np.asarray(witnesses[0] * 1.0)  # erf/erfinv keep a float input's dtype
            else:
                witness = np.asarray(getattr(np, fn)(*witnesses, **kwargs))
        name = f"t{len(self.steps) + 1}"
        self.steps.append((name, fn, operands, dict(kwargs)))
        return Sym(name, witness, self, special=fn in SPECIAL)

    def special_function(self, name: str) -> Callable:
        """What ``ember.backends.special_function`` answers for this namespace."""
        if name not in SPECIAL:
            raise Untraceable(f"special function {name!r}")
        return lambda *args: self.record(name, args, {})

    def __getattr__(self, name: str) -> Any:
        value = getattr(np, name, None)
        if isinstance(value, type) and issubclass(value, np.generic):
            return value  # dtypes such as xp.float32, xp.int64
        if not isinstance(value, np.ufunc) and name not in _FUNCTIONS:
            raise Untraceable(f"namespace function {name!r}")

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "asarray":
                if len(args) != 1 or kwargs or not isinstance(args[0], Sym):
                    raise Untraceable("asarray of a non-symbolic value")
                return args[0]
            for key, value in kwargs.items():
                if key in ("axis", "keepdims") and name in ("sum", "mean"):
                    continue
                if key != "dtype":
                    raise Untraceable(f"keyword {key!r} of {name}")
                kwargs[key] = np.dtype(value)
            return self.record(name, args, kwargs)

        return call


def trace_impl(impl: Callable, dtypes: Sequence[Any], ranks: Sequence[int], attrs: dict,
               constants: Sequence[Any] | None = None) -> tuple[list[tuple], Any]:
    """Steps computing ``impl`` for inputs of these dtypes and ranks, and the name (or constant) of
    its result. Inputs are named ``x0, x1, ...``; ``constants[k]`` (not None) replaces input k by a
    Python number. Raises :class:`Untraceable`."""
    tracer = SymbolicNamespace()
    args: list[Any] = []
    for k, (dtype, rank) in enumerate(zip(dtypes, ranks)):
        if constants is not None and constants[k] is not None:
            args.append(_number(constants[k]))
        else:
            args.append(Sym(f"x{k}", np.ones((1,) * rank, dtype=dtype), tracer))
    try:
        result = impl(tracer, *args, **attrs)
    except Untraceable:
        raise
    except (TypeError, AttributeError, ValueError) as error:  # e.g. NumPy refusing a Sym
        raise Untraceable(str(error)) from error
    if isinstance(result, Sym):
        return tracer.steps, result.name
    return tracer.steps, _number(result)
