"""``Tensor.set_`` with grad enabled on tensors that require grad, against torch 2.13 (autograd audit, func24): the
tensor's history becomes torch's NotImplemented node, with edges to its old history and to the source's, and backward
through it refuses; ember kept the old history before, so backward gave the gradient of values the tensor no longer
held. Under no_grad, or with nothing requiring grad, nothing is recorded."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _history(lib, self_requires_grad: bool, source_requires_grad: bool):
    x = lib.ones(3, requires_grad=True)
    y = x * 2 if self_requires_grad else lib.zeros(3)
    y.set_(x * 3 if source_requires_grad else lib.full((3,), 5.0))
    fn = y.grad_fn
    edges = None if fn is None else tuple(None if f is None else f.name() for f, _ in fn.next_functions)
    return y.requires_grad, None if fn is None else fn.name(), edges


@pytest.mark.parametrize("self_rg,source_rg", [(True, False), (True, True), (False, True), (False, False)])
def test_history_as_torch(self_rg: bool, source_rg: bool) -> None:
    assert _history(ember, self_rg, source_rg) == _history(torch, self_rg, source_rg)


def test_backward_through_set_refuses_as_torch() -> None:
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        y.set_(lib.zeros(3))
        with pytest.raises(RuntimeError, match="derivative for set_ is not implemented"):
            y.sum().backward()


def test_no_grad_records_nothing() -> None:
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            z = lib.zeros(3).set_(x)
        assert not z.requires_grad and z.grad_fn is None
