"""as_strided_scatter, resize/resize_as, as_strided_, sparse_mask, map2_, new_empty_strided, const_data_ptr
against torch 2.13 (and float64 finite differences where torch's own gradient is wrong)."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("size, stride, offset", [((2, 2), (1, 2), 1), ((2,), (4,), None), ((3,), (3,), 2)])
def test_as_strided_scatter_values_equal_torch(size, stride, offset) -> None:
    x = np.random.default_rng(0).standard_normal((3, 3))
    src = np.arange(float(np.prod(size))).reshape(size) + 10
    t = torch.as_strided_scatter(torch.tensor(x), torch.tensor(src), size, stride, offset)
    e = ember.as_strided_scatter(ember.tensor(x), ember.tensor(src), size, stride, offset)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(ember.tensor(x).as_strided_scatter(ember.tensor(src), size, stride, offset).numpy(),
                                  t.numpy())


def test_as_strided_scatter_gradients_by_finite_differences() -> None:
    # torch 2.13 returns the window's gradient for `input` (zeros outside it); the function's derivative is the
    # complement: `input` matters only outside the window. Checked in float64 by finite differences.
    rng = np.random.default_rng(1)
    x, src, w = rng.standard_normal((3, 3)), rng.standard_normal(2), rng.standard_normal((3, 3))
    ex, es = ember.tensor(x, requires_grad=True), ember.tensor(src, requires_grad=True)
    (ember.as_strided_scatter(ex, es, (2,), (4,)) * ember.tensor(w)).sum().backward()

    def f(xv: np.ndarray, sv: np.ndarray) -> float:
        return float((ember.as_strided_scatter(ember.tensor(xv), ember.tensor(sv), (2,), (4,)).numpy() * w).sum())

    eps = 1e-6
    fd_x = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        fd_x[i] = (f(x + d, src) - f(x - d, src)) / (2 * eps)
    fd_s = np.array([(f(x, src + eps * e) - f(x, src - eps * e)) / (2 * eps) for e in np.eye(2)])
    np.testing.assert_allclose(ex.grad.numpy(), fd_x, atol=1e-8)
    np.testing.assert_allclose(es.grad.numpy(), fd_s, atol=1e-8)
    np.testing.assert_array_equal(ex.grad.numpy().ravel()[[0, 4]], [0.0, 0.0])


def test_deprecated_resize_and_resize_as_warn_and_reshape() -> None:
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = ember.arange(6.0).resize(2, 3)
    np.testing.assert_array_equal(r.numpy(), torch.arange(6.0).resize(2, 3).numpy())
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert tuple(ember.arange(6.0).resize_as(ember.ones(3, 2)).shape) == (3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="has 4 elements"):
            ember.arange(6.0).resize(2, 2)


def test_as_strided_in_place_sparse_mask_map2_and_pointers() -> None:
    b = ember.arange(9.0)
    assert b.as_strided_((3,), (3,)) is b
    np.testing.assert_array_equal(b.numpy(), torch.arange(9.0).as_strided_((3,), (3,)).numpy())
    with pytest.raises(RuntimeError, match="requires grad"):
        ember.ones(3, requires_grad=True).as_strided_((1,), (1,))
    i = [[0, 1, 1], [1, 0, 1]]
    e = ember.arange(4.0).view(2, 2).sparse_mask(ember.sparse_coo_tensor(ember.tensor(i), ember.ones(3), (2, 2)))
    t = torch.arange(4.0).view(2, 2).sparse_mask(torch.sparse_coo_tensor(torch.tensor(i), torch.ones(3), (2, 2)))
    assert e.is_sparse
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())
    m = ember.zeros(3)
    m.map2_(ember.ones(3), ember.full((3,), 2.0), lambda a, x, y: a + x * y)
    np.testing.assert_array_equal(m.numpy(), [2.0, 2.0, 2.0])
    z = ember.zeros(4)
    assert z.const_data_ptr() == z.data_ptr()
    n = ember.ones(2, 3, dtype=ember.float64).new_empty_strided((4, 5), (5, 1))
    assert tuple(n.shape) == (4, 5) and n.dtype == ember.float64
