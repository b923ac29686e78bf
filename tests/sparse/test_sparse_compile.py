"""ember.compile with sparse COO tensors: passed as arguments (their indices and values become graph inputs),
captured from a closure, or built inside from indices and values with a given size."""
from __future__ import annotations

import numpy as np

import ember


def _adjacency(rng: np.random.Generator, n: int) -> ember.Tensor:
    dense = (rng.random((n, n)) < 0.3) * rng.random((n, n))
    return ember.tensor(dense + np.eye(n), dtype=ember.float32).to_sparse()


def test_compiled_gcn_step_with_sparse_arguments_equals_eager(rng) -> None:
    n, features = 12, 5
    adj, x = _adjacency(rng, n), ember.tensor(rng.random((n, features)), dtype=ember.float32).to_sparse()
    w1 = ember.tensor(rng.standard_normal((features, 4)), dtype=ember.float32, requires_grad=True)
    w2 = ember.tensor(rng.standard_normal((4, 3)), dtype=ember.float32, requires_grad=True)
    labels = ember.tensor(rng.integers(0, 3, n))

    def step(a: ember.Tensor, feats: ember.Tensor) -> ember.Tensor:
        h = ember.relu(ember.spmm(a, ember.mm(feats, w1)))
        return ember.nn.functional.cross_entropy(ember.spmm(a, h @ w2), labels)

    def run(fn) -> tuple:
        w1.grad = w2.grad = None
        loss = fn(adj, x)
        loss.backward()
        return loss.item(), w1.grad.numpy().copy(), w2.grad.numpy().copy()

    eager = run(step)
    compiled = ember.compile(step)
    for _ in range(3):  # warm-up calls run eagerly; the later ones run the graph
        result = run(compiled)
    assert compiled.last is not None and compiled.eager_reason is None
    np.testing.assert_allclose(result[0], eager[0], rtol=1e-6)
    for got, want in zip(result[1:], eager[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compiled_function_building_a_sparse_tensor_from_values(rng) -> None:
    idx = ember.tensor([[0, 2, 1, 0], [1, 0, 2, 1]])

    def fn(v: ember.Tensor, d: ember.Tensor) -> ember.Tensor:
        return ember.sparse.mm(ember.sparse_coo_tensor(idx, v, (3, 3)), d)

    v, d = ember.tensor(rng.standard_normal(4)), ember.tensor(rng.standard_normal((3, 2)))
    compiled = ember.compile(fn)
    for _ in range(3):
        out = compiled(v, d)
    assert compiled.last is not None
    np.testing.assert_allclose(out.numpy(), fn(v, d).numpy(), rtol=1e-12)
