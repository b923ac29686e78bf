"""Tensor operators return ``NotImplemented`` for operands they do not take, as torch's, so Python asks the other
operand: zuko's ODE solver multiplies ``dt * NestedTensor(...)`` (a tuple subclass with ``__rmul__``), and programs
write ``if mask == None``. ember raised its own TypeError instead (the reflected method never ran; ``t == None``
raised). Plain lists, tuples and NumPy arrays stay accepted (a documented leniency: torch refuses most of them)."""
from __future__ import annotations

import operator

import numpy as np
import pytest
import torch

import ember


class Pair(tuple):
    """A tuple of tensors with elementwise arithmetic (the pattern zuko's NestedTensor uses)."""

    def __rmul__(self, other):
        return Pair(other * x for x in self)

    def __radd__(self, other):
        return Pair(other + x for x in self)

    def __rsub__(self, other):
        return Pair(other - x for x in self)


class Quantity:
    """Another library's number type with reflected operators."""

    def __init__(self, value):
        self.value = value

    def __rtruediv__(self, other):
        return ("rtruediv", other.tolist())

    def __rmatmul__(self, other):
        return ("rmatmul", other.tolist())

    def __eq__(self, other):
        return "Quantity.__eq__"


def _ops(lib):
    t = lib.tensor([1.0, 2.0])
    return {
        "t * Pair": lambda: [x.tolist() for x in t * Pair((t, 2 * t))],
        "t + Pair": lambda: [x.tolist() for x in t + Pair((t, t))],
        "t - Pair": lambda: [x.tolist() for x in t - Pair((t, t))],
        "t / Quantity": lambda: t / Quantity(3),
        "t @ Quantity": lambda: t @ Quantity(3),
        "t == Quantity": lambda: t == Quantity(3),
        "t == None": lambda: t == None,  # noqa: E711 (the pattern under test)
        "t != None": lambda: t != None,  # noqa: E711
        "t == 'a'": lambda: t == "a",
        "t in [None, 'a']": lambda: t in [None, "a"],
    }


@pytest.mark.parametrize("name", sorted(_ops(torch)))
def test_reflected_operand_and_fallbacks_like_torch(name):
    assert _ops(ember)[name]() == _ops(torch)[name]()


@pytest.mark.parametrize("op", [operator.add, operator.mul, operator.truediv, operator.lt, operator.and_,
                                operator.pow, operator.mod, operator.floordiv, operator.matmul, operator.sub])
@pytest.mark.parametrize("other", [None, "a", {1: 2}, object()])
def test_unsupported_operand_raises_pythons_type_error_like_torch(op, other):
    texts = []
    for lib in (torch, ember):
        with pytest.raises(TypeError) as info:
            op(lib.ones(2, dtype=lib.int64), other)
        texts.append(str(info.value).replace("'Tensor'", "T"))
        if not (isinstance(other, str) and op is operator.mod):  # "a" % t is string formatting
            with pytest.raises(TypeError):
                op(other, lib.ones(2, dtype=lib.int64))
    assert texts[0] == texts[1]


def test_functions_still_raise_and_numbers_arrays_still_work():
    with pytest.raises(TypeError, match="unsupported operand type NoneType"):
        ember.mul(ember.ones(2), None)  # a function call raises (there is no reflected method to ask)
    t = ember.tensor([1.0, 2.0])
    np.testing.assert_array_equal((t * 2).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal((t * np.float64(2)).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal((t + np.array([1.0, 1.0])).numpy(), [2.0, 3.0])
    np.testing.assert_array_equal((t + [1.0, 1.0]).numpy(), [2.0, 3.0])  # ember's leniency, kept
