"""``torch.autograd.grad`` / ``backward`` take any iterable where they take a sequence of tensors (torch calls
``tuple()`` on them): captum's ``_compute_jacobian_wrt_params`` passes ``model.parameters()`` (a generator) as
``inputs``; ember read the generator as one tensor. Also ``torch.linalg.pinv(A, rcond)``, the older overload
captum's naive influence calls (``rcond=1e-4``), which is ``rtol``."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _model_and_loss(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    x = lib.arange(12.0).reshape(4, 3) / 10
    return m, (m(x) ** 2).sum()


@pytest.mark.parametrize("form", ["generator", "dict_values", "map", "list"])
def test_grad_inputs_iterables_equal_torch(form):
    def grads(lib):
        m, loss = _model_and_loss(lib)
        params = {"generator": lambda: m.parameters(), "dict_values": lambda: dict(m.named_parameters()).values(),
                  "map": lambda: map(lambda p: p, m.parameters()), "list": lambda: list(m.parameters())}[form]()
        outs = (o for o in [loss * 1.0])
        return [g.detach().numpy() for g in lib.autograd.grad(outs, params, grad_outputs=iter([lib.tensor(2.0)]))]

    got, ref = grads(ember), grads(torch)
    assert len(got) == len(ref) == 2
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_backward_inputs_generator_equal_torch():
    def weight_grad(lib):
        m, loss = _model_and_loss(lib)
        lib.autograd.backward(iter([loss]), inputs=(p for p in [m.weight]))
        return m.weight.grad.numpy(), m.bias.grad

    (gw, gb), (tw, tb) = weight_grad(ember), weight_grad(torch)
    np.testing.assert_allclose(gw, tw, rtol=1e-6)
    assert gb is None and tb is None


@pytest.mark.parametrize("call", ["keyword", "positional", "tensor", "hermitian"])
def test_pinv_rcond_overload_equals_torch(call):
    a = np.array([[2.0, 0.5, 0.0], [0.5, 1e-5, 0.0], [0.0, 0.0, 3e-6]])

    def run(lib):
        A = lib.tensor(a)
        if call == "keyword":
            return lib.linalg.pinv(A, rcond=1e-4)
        if call == "positional":
            return lib.linalg.pinv(A, 1e-4)
        if call == "tensor":
            return lib.linalg.pinv(A, lib.tensor(1e-4))
        return lib.linalg.pinv(A, 1e-4, True)

    np.testing.assert_allclose(run(ember).numpy(), run(torch).numpy(), rtol=1e-9, atol=1e-12)
