"""``torch.autograd.grad``'s whole signature, in PyTorch's order: ``only_inputs`` (deprecated, accepted; a warning when
False), ``is_grads_batched`` (a batch of cotangents), ``materialize_grads``. PyTorch-GAN's wgan_gp passes
``only_inputs=True`` to compute its gradient penalty."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _graph(lib):
    x = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([0.3, -0.7, 1.1], dtype=lib.float64, requires_grad=True)
    return x, w, (x * w).tanh().sum(1)


def test_gradient_penalty_call_like_wgan_gp():
    def run(lib):
        x, w, y = _graph(lib)
        (g,) = lib.autograd.grad(outputs=y, inputs=x, grad_outputs=lib.ones(2, dtype=lib.float64), create_graph=True,
                                 retain_graph=True, only_inputs=True)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        return g.detach().numpy(), w.grad.numpy()

    for a, b in zip(run(ember), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_positional_order_like_torch():
    def run(lib):
        x, w, y = _graph(lib)
        # outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused
        unused = lib.zeros(1, requires_grad=True)
        return lib.autograd.grad(y.sum(), (x, unused), None, None, False, True, True)

    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-12)
    assert ours[1] is None and theirs[1] is None


def test_only_inputs_false_warns_like_torch():
    for lib in (ember, torch):
        x, w, y = _graph(lib)
        with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
            lib.autograd.grad(y.sum(), x, only_inputs=False)
        x, w, y = _graph(lib)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lib.autograd.grad(y.sum(), x, only_inputs=True)


@pytest.mark.parametrize("create_graph", [False, True])
def test_is_grads_batched_like_torch(create_graph):
    def run(lib):
        x, w, y = _graph(lib)
        cotangents = lib.tensor(np.eye(2), dtype=lib.float64)  # rows of the Jacobian
        gx, gw = lib.autograd.grad(y, (x, w), cotangents, is_grads_batched=True, create_graph=create_graph)
        return gx.detach().numpy(), gw.detach().numpy(), gx.requires_grad

    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    assert ours[2] == theirs[2]


def test_materialize_grads_like_torch():
    def run(lib):
        x, w, y = _graph(lib)
        unused = lib.ones(2, requires_grad=True)
        return lib.autograd.grad(y.sum(), (x, unused), allow_unused=True, materialize_grads=True)[1].tolist()

    assert run(ember) == run(torch) == [0.0, 0.0]
