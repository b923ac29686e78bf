"""Fractional max pooling against torch 2.13: the same windows, indices and values for the same samples
(ties, NaN, zero samples), gradients, errors, unbatched inputs and the modules."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _case(rng: np.random.Generator, dims: int) -> tuple:
    spatial = tuple(int(n) for n in rng.integers(4, 10, size=dims))
    kernel = tuple(int(rng.integers(1, 4)) for _ in range(dims))
    out = tuple(int(rng.integers(1, n - k + 2)) for n, k in zip(spatial, kernel))
    return spatial, kernel, out


@pytest.mark.parametrize("dims", [2, 3])
def test_windows_indices_and_values_equal_torch(dims: int) -> None:
    rng = np.random.default_rng(dims)
    checked = refused = 0
    for trial in range(120):
        spatial, kernel, out = _case(rng, dims)
        x = rng.standard_normal((2, 3) + spatial).astype(np.float32)
        if trial % 5 == 0:  # NaN wins; the last NaN of a window is picked
            x[0, 0].flat[rng.integers(0, x[0, 0].size, 4)] = np.nan
        if trial % 7 == 0:  # ties: the first maximum in row-major order
            x = np.round(x)
        u = rng.random((2, 3, dims)).astype(np.float32)
        if trial % 11 == 0:
            u[:] = 0.0
        t_pool, e_pool = getattr(TF, f"fractional_max_pool{dims}d"), getattr(EF, f"fractional_max_pool{dims}d")
        try:
            tv, ti = t_pool(torch.tensor(x), kernel, output_size=out, return_indices=True,
                            _random_samples=torch.tensor(u))
        except RuntimeError:
            with pytest.raises(RuntimeError, match="too large relative to input"):
                e_pool(ember.tensor(x), kernel, output_size=out, _random_samples=ember.tensor(u))
            refused += 1
            continue
        ev, ei = e_pool(ember.tensor(x), kernel, output_size=out, return_indices=True,
                        _random_samples=ember.tensor(u))
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())
        np.testing.assert_array_equal(ev.numpy(), tv.numpy())
        checked += 1
    assert checked > 30
    if dims == 3:
        assert refused > 0  # torch's 3-D size check is strict; ember refuses the same cases


def test_gradient_and_float64_equal_torch() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 9, 7))
    u = rng.random((2, 2, 2))
    g = rng.standard_normal((2, 2, 4, 3))
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    TF.fractional_max_pool2d(tx, (3, 2), output_size=(4, 3), _random_samples=torch.tensor(u)).backward(
        torch.tensor(g))
    EF.fractional_max_pool2d(ex, (3, 2), output_size=(4, 3), _random_samples=ember.tensor(u)).backward(
        ember.tensor(g))
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


def test_unbatched_and_output_ratio() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 10, 12)).astype(np.float32)
    u = rng.random((1, 3, 2)).astype(np.float32)
    tv = TF.fractional_max_pool2d(torch.tensor(x), 2, output_ratio=(0.5, 0.5), _random_samples=torch.tensor(u))
    ev = EF.fractional_max_pool2d(ember.tensor(x), 2, output_ratio=0.5, _random_samples=ember.tensor(u))
    assert tuple(ev.shape) == tuple(tv.shape) == (3, 5, 6)
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())


def test_modules_match_torch_and_keep_samples_as_a_buffer() -> None:
    u = ember.rand(1, 2, 3)
    pool = ember.nn.FractionalMaxPool3d(2, output_size=(2, 3, 3), return_indices=True, _random_samples=u)
    assert "_random_samples" in pool.state_dict()
    x = np.random.default_rng(5).standard_normal((1, 2, 5, 6, 7)).astype(np.float32)
    ev, ei = pool(ember.tensor(x))
    tv, ti = torch.nn.FractionalMaxPool3d(2, output_size=(2, 3, 3), return_indices=True,
                                          _random_samples=torch.tensor(u.numpy()))(torch.tensor(x))
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())
    drawn = ember.nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))(ember.randn(2, 3, 16, 16))
    assert tuple(drawn.shape) == (2, 3, 8, 8)


@pytest.mark.parametrize("make, message", [
    (lambda: ember.nn.FractionalMaxPool2d(2), "either an output size, or a pooling ratio"),
    (lambda: ember.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5), "only one of"),
    (lambda: ember.nn.FractionalMaxPool2d(2, output_ratio=1.5), "between 0 and 1"),
])
def test_module_argument_errors(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_samples_shape_and_integer_input_are_refused() -> None:
    with pytest.raises(RuntimeError, match=r"_random_samples must have shape \(1, 2, 2\)"):
        EF.fractional_max_pool2d(ember.randn(1, 2, 8, 8), 2, output_size=3, _random_samples=ember.rand(2, 2))
    with pytest.raises(RuntimeError, match="not implemented for ember.int64"):
        EF.fractional_max_pool2d(ember.ones(1, 1, 8, 8, dtype=ember.int64), 2, output_size=3)
