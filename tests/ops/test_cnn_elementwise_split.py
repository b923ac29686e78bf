"""relu, relu's backward and 2x2 max pooling (forward and backward) split over ember's threads:
the same results as one thread, as NumPy, and as torch, with NaN and inf where a chunk sees them."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_threads
from ember.backends import cpu_hot_worker
from ember.ops import cnn_halves, elementwise, pooling

torch = pytest.importorskip("torch")


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    monkeypatch.setattr(elementwise, "_SPLIT_ELEMENTS", 1000)
    monkeypatch.setattr(pooling, "_SPLIT_ELEMENTS", 200)
    monkeypatch.setattr(cnn_halves, "POOL_MIN_ELEMENTS", 200)
    monkeypatch.setattr(cnn_halves, "HOT_MIN_ELEMENTS", 1 << 40)  # the hot halves: their own tests below
    calls = []
    real = cpu_threads.parallel_for

    def counting(fn, total, min_chunk=1):
        calls.append(min(cpu_threads.num_threads(), total // max(1, min_chunk)))
        return real(fn, total, min_chunk)

    monkeypatch.setattr(elementwise, "parallel_for", counting)
    monkeypatch.setattr(pooling, "parallel_for", counting)
    monkeypatch.setattr(cnn_halves, "parallel_for", counting)
    yield calls
    if cpu_threads._POOL is not None:
        cpu_threads._POOL.shutdown()


def _special(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[[0, 7, -1, -5]] = [np.nan, np.inf, -np.inf, 0.0]  # first and last chunk see them
    flat[len(flat) // 2] = -0.0
    return x


def test_relu_forward_backward_split(three_threads) -> None:
    x = _special((4, 3, 20, 20), 0)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    ey = ember.relu(ex)
    ey.backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.relu(tx)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())  # NaN in the same places
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(ey.detach().numpy(), np.maximum(x, 0))
    assert max(three_threads) == 3, "relu was not split"


def test_relu_grad_passes_nan_outputs_through() -> None:
    """PyTorch's threshold_backward: 0 where the output is <= 0, else the incoming gradient (NaN too)."""
    out = np.array([np.nan, 0.0, -0.0, 1.0, np.inf], dtype=np.float32)
    g = np.array([2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)
    want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(out), 0.0).numpy()
    np.testing.assert_array_equal(elementwise.relu_grad(ember.tensor(g), ember.tensor(out)).numpy(), want)


@pytest.mark.parametrize("nan", [False, True])
def test_max_pool_2x2_split(three_threads, nan) -> None:
    x = np.random.default_rng(2).standard_normal((5, 3, 8, 10)).astype(np.float32)
    x[:, :, 0, 0] = x[:, :, 0, 1]  # ties: the first maximum wins, as in PyTorch
    if nan:
        x[4, 1, 3, 3] = np.nan  # only the last thread's images
        x[4, 2, 6, 6] = x[4, 2, 7, 6] = np.nan  # two NaNs in a window: the last one wins, as in PyTorch
    g = np.random.default_rng(3).standard_normal((5, 3, 4, 5)).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    ey = ember.nn.functional.max_pool2d(ex, 2)
    ey.backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 2)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    if pooling.native_kernel(np, "max_pool2d_2x2") is not None:  # only the native kernels are split
        assert max(three_threads) >= 2, "max pooling was not split"


@pytest.fixture
def hot_halves(monkeypatch):
    """Every pass of these ops split in halves on the hot worker, even while it sleeps (it is woken, or the caller
    takes its half back: both give the same bits); yields the count of splits made."""
    monkeypatch.setattr(cnn_halves, "HOT_MIN_ELEMENTS", 1)
    monkeypatch.setattr(cnn_halves, "WAKE_ELEMENTS", 1)
    splits = []
    real = cpu_hot_worker.split_call_into

    def counting(*args, **kwargs):
        done = real(*args, **kwargs)
        splits.append(done)
        return done

    monkeypatch.setattr(cnn_halves.cpu_hot_worker, "split_call_into", counting)
    yield splits


@pytest.mark.parametrize("shape", [(5, 3, 8, 10), (64, 32, 28, 28)])
def test_hot_halves_match_torch(hot_halves, shape) -> None:
    """relu, max_pool2d 2x2 and both backwards in halves on the hot worker: torch's bits, with NaN/inf/-0.0 and ties
    in both halves (a NaN window takes the NumPy path whole) and the MNIST CNN's first-layer shape."""
    x = _special(shape, 4)
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 2.5  # a tie in the first half's window, one in the second's
    x[-1, -1, -2, -2] = x[-1, -1, -1, -1] = 3.5
    g = np.random.default_rng(5).standard_normal((shape[0], shape[1], shape[2] // 2, shape[3] // 2)).astype(np.float32)
    outs = []
    for lib in (ember, torch):
        tx = lib.tensor(x, requires_grad=True)
        ty = lib.nn.functional.max_pool2d(lib.relu(tx), 2)
        ty.backward(lib.tensor(g))
        outs.append((ty.detach().numpy(), tx.grad.numpy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    if cnn_halves.native_kernel(np, "hot_cnn") is not None and cpu_hot_worker.available():
        assert hot_halves and all(hot_halves), "the passes did not run in halves on the hot worker"


def test_hot_unpool_rejects_out_of_plane_index(hot_halves) -> None:
    """max_unpool2d with an index outside its plane: the same IndexError as the scatter's, from either half."""
    g = ember.ones(2, 1, 2, 2)
    bad = ember.tensor(np.array([[[[0, 2], [8, 99]]], [[[1, 3], [9, 11]]]], dtype=np.int64))
    with pytest.raises(IndexError, match="out of range"):
        ember.nn.functional.max_unpool2d(g, bad, 2)


def test_halves_without_the_hot_worker(monkeypatch) -> None:
    """With the hot worker off the same kernels run on ember's pool (or whole): NumPy's and torch's bits."""
    monkeypatch.setattr(_config, "HOT_WORKER", False)
    monkeypatch.setattr(cnn_halves, "HOT_MIN_ELEMENTS", 1)
    x = _special((8, 4, 12, 12), 6)
    g = np.random.default_rng(7).standard_normal(x.shape).astype(np.float32)
    relu = cnn_halves.relu(np, x)
    if relu is None:  # no kernels here (NumPy-only): nothing to compare
        return
    np.testing.assert_array_equal(relu, torch.relu(torch.tensor(x)).numpy())
    want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(relu), 0.0).numpy()
    np.testing.assert_array_equal(cnn_halves.relu_grad(np, g, relu), want)
    values, indices, nans = cnn_halves.pool_2x2(np, np.nan_to_num(x))
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(np.nan_to_num(x)), 2, return_indices=True)
    assert nans == 0
    np.testing.assert_array_equal(values, tv.numpy())
    np.testing.assert_array_equal(indices, ti.numpy())


def test_conv_bias_gradient_channel_sums(hot_halves) -> None:
    """A conv bias's gradient (sum_to (N, C, H, W) -> C) with the channel-sum kernel in halves: within float32
    rounding of a float64 sum (closer than NumPy's einsum), torch's within its tolerance, the same bits with the hot
    worker off, and inf/NaN where a channel holds them."""
    g = np.random.default_rng(8).standard_normal((64, 32, 28, 28)).astype(np.float32) * 3 + 1
    want = g.astype(np.float64).sum((0, 2, 3))
    got = ember.tensor(g).sum_to_size(1, 32, 1, 1).numpy().reshape(32)
    scale = np.abs(g).astype(np.float64).sum((0, 2, 3))
    assert np.max(np.abs(got - want) / scale) < 2e-7
    einsum = np.einsum("nck->c", g.reshape(64, 32, -1))
    assert np.max(np.abs(got - want)) <= np.max(np.abs(einsum - want))
    np.testing.assert_allclose(got, torch.tensor(g).sum((0, 2, 3)).numpy(), rtol=1e-5, atol=1e-3)
    whole = cnn_halves.channel_sums(np, g.reshape(64, 32, -1))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_config, "HOT_WORKER", False)
        assert whole is None or np.array_equal(whole, cnn_halves.channel_sums(np, g.reshape(64, 32, -1)))
    g[3, 1, 5, 5], g[9, 30, 0, 0], g[10, 31, 0, 0], g[11, 31, 1, 1] = np.nan, np.inf, np.inf, -np.inf
    got = ember.tensor(g).sum_to_size(1, 32, 1, 1).numpy().reshape(32)
    assert np.isnan(got[1]) and got[30] == np.inf and np.isnan(got[31]) and np.isfinite(np.delete(got, [1, 30, 31])).all()


def test_conv2d_bias_gradient_vs_torch() -> None:
    """MNIST's conv1 with a bias, backward: the bias gradient (channel sums in halves) as torch's."""
    x = np.random.default_rng(9).standard_normal((64, 1, 28, 28)).astype(np.float32)
    w = np.random.default_rng(10).standard_normal((32, 1, 3, 3)).astype(np.float32)
    b = np.random.default_rng(11).standard_normal(32).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        bias = lib.tensor(b, requires_grad=True)
        lib.nn.functional.conv2d(lib.tensor(x), lib.tensor(w), bias, padding=1).square().sum().backward()
        grads.append(bias.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-2)


def test_conv_bias_add_in_halves(hot_halves) -> None:
    """A conv's bias added in place in halves (MNIST's conv2 shape): the bits of the convolution plus a broadcast add,
    and torch's output within its tolerance."""
    x = np.random.default_rng(12).standard_normal((64, 32, 14, 14)).astype(np.float32)
    w = np.random.default_rng(13).standard_normal((64, 32, 3, 3)).astype(np.float32) * 0.1
    b = np.random.default_rng(14).standard_normal(64).astype(np.float32)
    F = ember.nn.functional
    with_bias = F.conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), padding=1).numpy()
    plain = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(with_bias, plain + b.reshape(1, -1, 1, 1))
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1).numpy()
    np.testing.assert_allclose(with_bias, want, rtol=1e-4, atol=1e-4)


def test_hot_halves_float64(hot_halves) -> None:
    """The float64 range kernels: relu, 2x2 max pooling, both backwards and a bias gradient as torch's (double)."""
    x = _special((6, 5, 12, 14), 15).astype(np.float64)
    g = np.random.default_rng(16).standard_normal((6, 5, 6, 7))
    outs = []
    for lib in (ember, torch):
        tx, tb = lib.tensor(x, requires_grad=True), lib.tensor(np.arange(5.0), requires_grad=True)
        ty = lib.nn.functional.max_pool2d(lib.relu(tx + tb.reshape(1, 5, 1, 1)), 2)
        ty.backward(lib.tensor(g))
        outs.append((ty.detach().numpy(), tx.grad.numpy(), tb.grad.numpy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_allclose(outs[0][2], outs[1][2], rtol=1e-12)


def test_nan_window_found_by_the_plane_kernels_is_not_scanned_again(monkeypatch) -> None:
    """After the plane kernels report a NaN window, the NumPy NaN rule runs next: the older whole-image kernel is
    not asked to scan the same windows again (it would find the same NaN). Values and indices stay torch's."""
    if cnn_halves.native_kernel(np, "hot_cnn") is None:
        pytest.skip("the plane kernels need numba")
    asked = []
    real = pooling.native_kernel
    monkeypatch.setattr(pooling, "native_kernel", lambda xp, name: asked.append(name) or real(xp, name))
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    x[1, 2, 4, 5] = np.nan
    values, indices = ember.nn.functional.max_pool2d(ember.tensor(x), 2, return_indices=True)
    t_values, t_indices = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), t_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), t_indices.numpy())
    assert "max_pool2d_2x2" not in asked
