"""Printed autograd nodes read as PyTorch's: ``<AccumulateGrad object at 0x...>`` for a leaf's node too.

Atcold's NYU-DLSP20 autograd notebook prints ``y.grad_fn.next_functions``; ember printed ``<AccumulateGrad>``.
"""
import re

import pytest

import ember

torch = pytest.importorskip("torch")


def _shapes(lib):
    a = lib.ones(2, requires_grad=True)
    y = (a * 2).sum()
    return [repr(y.grad_fn), repr(y.grad_fn.next_functions), str(y.grad_fn.next_functions[0][0].next_functions)]


def test_node_printouts_equal_torchs_up_to_addresses():
    strip = lambda text: re.sub(r"0x[0-9a-f]+", "0x?", text)  # noqa: E731
    assert [strip(t) for t in _shapes(ember)] == [strip(t) for t in _shapes(torch)]
