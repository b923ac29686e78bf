"""The training-epoch fast paths of docs/cpu-performance.md ("A training epoch outside the
convolutions"): the native relu forward and the einsum sum_to (a conv bias's gradient). Each is
checked against NumPy's reference bit for bit where the fast path computes the same thing, and
against float64 and torch where it sums in another order; special values and odd shapes included."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_kernels
from ember.ops import elementwise, reductions

torch = pytest.importorskip("torch")

SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38]


def _with_specials(shape: tuple, dtype: type, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    picks = np.random.default_rng(seed + 1).choice(flat.size, len(SPECIALS), replace=False)
    flat[picks] = np.array(SPECIALS, dtype=np.float64).astype(dtype)
    flat[[0, -1]] = [np.nan, -np.inf]  # first and last chunk of a split see them
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4096,), (5, 3, 17, 19), (64, 32, 28, 28), (3, 1, 4099)])
def test_relu_native_matches_numpy_bitwise_and_torch(dtype, shape) -> None:
    if cpu_kernels.get("relu") is None:
        pytest.skip("numba kernels unavailable")
    x = _with_specials(shape, dtype)
    got = ember.relu(ember.tensor(x)).numpy()
    want = np.where(x < 0, np.zeros_like(x), x)  # negatives to +0; -0.0, NaN payloads and subnormals kept
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    # torch 2.13 keeps relu(-0.0) = -0.0 too: compare sign bits of the zeros, values everywhere
    theirs = torch.relu(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(got, theirs)
    zeros = got == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(theirs[zeros]))


def test_relu_native_used_and_fallbacks_agree(monkeypatch) -> None:
    """The kernel runs for big float tensors; small, integer and non-contiguous inputs take NumPy's maximum, with
    the same values. A float16 input is computed on a float32 copy (PyTorch's opmath, ember/ops/opmath.py), so the
    kernel may see that copy, never a float16 array."""
    if cpu_kernels.get("relu") is None:
        pytest.skip("numba kernels unavailable")
    calls = []
    real = cpu_kernels.get("relu")
    table = dict(cpu_kernels._KERNELS)
    table["relu"] = lambda x, out: (calls.append((x.dtype, x.size)), real(x, out))
    monkeypatch.setattr(cpu_kernels, "_KERNELS", table)
    x = _with_specials((8, 9, 70), np.float32)
    np.testing.assert_array_equal(ember.relu(ember.tensor(x)).numpy(), np.maximum(x, 0))
    assert sum(size for _, size in calls) == x.size
    calls.clear()
    with np.errstate(over="ignore"):  # 3.4e38 becomes inf in float16: a special value too
        half = x.astype(np.float16)
    for other in (x[:, :, ::2], half, x[:2, :2, :2], np.arange(-5000, 5000).reshape(100, 100)):
        other = np.asarray(other)
        got = ember.relu(ember.tensor(other)).numpy()
        np.testing.assert_array_equal(got, np.maximum(other, 0))
        assert got.dtype == other.dtype
    assert all(dt == np.float32 for dt, _ in calls), "the kernel ran on an input it does not handle"
    assert [size for _, size in calls] in ([], [half.size]), "only the float32 copy of the float16 input may use it"


def test_relu_without_numba_same_bits(monkeypatch) -> None:
    x = _with_specials((16, 1000), np.float32)
    with_kernel = ember.relu(ember.tensor(x)).numpy()
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
    cpu_kernels.reset()
    try:
        without = ember.relu(ember.tensor(x)).numpy()
    finally:
        cpu_kernels.reset()
    np.testing.assert_array_equal(with_kernel.view(np.uint32), without.view(np.uint32))


def test_relu_native_split_over_threads(monkeypatch) -> None:
    """Chunks of a split relu write disjoint parts: the same bits as one call."""
    from ember.backends import cpu_threads

    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    monkeypatch.setattr(elementwise, "_SPLIT_ELEMENTS", 1000)
    x = _with_specials((7, 1001), np.float32)
    try:
        got = ember.relu(ember.tensor(x)).numpy()
    finally:
        if cpu_threads._POOL is not None:
            cpu_threads._POOL.shutdown()
    want = np.where(x < 0, np.zeros_like(x), x)  # relu keeps -0.0 as torch does
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# ---- sum_to (the adjoint of broadcasting) -------------------------------------------------------
SUM_CASES = [
    ((64, 32, 28, 28), (1, 32, 1, 1)),  # MNIST conv1's bias gradient
    ((64, 64, 14, 14), (64, 1, 1)),      # the bias as the module holds it: leading axis dropped
    ((3, 5, 7, 2), (1, 5, 1, 1)),        # odd sizes
    ((2, 3, 4, 5), (1, 1, 4, 1)),        # kept axis in the middle
    ((2, 3, 4, 5), (3, 4, 1)),           # two kept axes
    ((6, 4, 1, 9), (1, 4, 1, 1)),        # a size-1 axis inside the reduced tail
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,target", SUM_CASES)
def test_sum_to_fast_path_vs_float64_and_torch(shape, target, dtype) -> None:
    x = (np.random.default_rng(3).standard_normal(shape) + 1.0).astype(dtype)
    got = ember.tensor(x).sum_to_size(*target).numpy()
    lead = len(shape) - len(target)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(target) if s == 1 and shape[i + lead] != 1)
    exact = x.astype(np.float64).sum(axis=axes, keepdims=True).reshape(target)
    magnitude = np.abs(x).astype(np.float64).sum(axis=axes, keepdims=True).reshape(target)
    assert got.dtype == x.dtype and got.shape == target
    bound = 2e-6 if dtype == np.float32 else 1e-14
    assert np.max(np.abs(got - exact) / magnitude) < bound
    want = torch.from_numpy(x).sum_to_size(*target).numpy()
    np.testing.assert_allclose(got, want, rtol=bound, atol=bound * float(magnitude.max()))


def test_sum_to_fast_path_taken_only_where_it_is_exact_enough() -> None:
    x = np.ones((2, 3, 5, 7), np.float32)
    assert reductions._outer_inner_sum(np, x, (0, 2, 3)) is not None
    assert reductions._outer_inner_sum(np, x, (0, 1)) is None          # trailing kept axis: NumPy's own sum
    assert reductions._outer_inner_sum(np, x, (1, 3)) is None          # kept axes not one block
    assert reductions._outer_inner_sum(np, x.astype(np.float16), (0, 2, 3)) is None
    assert reductions._outer_inner_sum(np, x.astype(np.int64), (0, 2, 3)) is None
    assert reductions._outer_inner_sum(np, np.asfortranarray(x), (0, 2, 3)) is None
    long = np.ones((1, 2, reductions._EINSUM_RUN + 1), np.float32)
    assert reductions._outer_inner_sum(np, long, (0, 2)) is None       # a long run: pairwise NumPy sum


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_sum_to_fast_path_special_values(special) -> None:
    x = np.random.default_rng(4).standard_normal((4, 3, 5, 5)).astype(np.float32)
    x[2, 1, 3, 4] = special
    got = ember.tensor(x).sum_to_size(1, 3, 1, 1).numpy()
    want = torch.from_numpy(x).sum_to_size(1, 3, 1, 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # NaN/inf in channel 1 only, same sign
    assert np.isfinite(got[0, [0, 2]]).all()


def test_conv_bias_gradient_vs_torch() -> None:
    """The path the fast sum_to serves: a conv layer's bias gradient in a backward pass."""
    x = np.random.default_rng(5).standard_normal((8, 3, 11, 13)).astype(np.float32)
    ec = ember.nn.Conv2d(3, 6, 3, padding=1)
    tc = torch.nn.Conv2d(3, 6, 3, padding=1)
    with torch.no_grad():
        tc.weight.copy_(torch.from_numpy(ec.weight.detach().numpy()))
        tc.bias.copy_(torch.from_numpy(ec.bias.detach().numpy()))
    ec(ember.tensor(x)).square().sum().backward()
    tc(torch.from_numpy(x)).square().sum().backward()
    np.testing.assert_allclose(ec.bias.grad.numpy(), tc.bias.grad.numpy(), rtol=1e-4, atol=1e-3)


# ---- max pool 3x3: the unrolled kernel against the general one -----------------------------------------
POOL_3X3 = [  # (shape, stride, padding, ceil_mode)
    ((4, 8, 16, 16), 2, 1, False),   # ResNet-18's pool on 32x32 images
    ((2, 3, 15, 17), 2, 1, True),    # odd sizes, ceil_mode: a last window past the edge
    ((2, 3, 9, 8), 1, 1, False),
    ((2, 3, 9, 8), 1, 0, False),
    ((2, 3, 10, 11), 3, 0, True),
    ((2, 3, 7, 6), (2, 1), (0, 1), False),
    ((1, 2, 3, 3), 2, 1, False),     # one interior window at most
    ((1, 2, 2, 5), 1, 1, False),     # fewer rows than the window: border windows only
]


def _pool_input(shape: tuple, dtype: type, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    x[0, 0, :3, :3] = 1.0           # ties: the first maximum wins
    x[0, -1, :, :] = -np.inf        # windows of -inf only
    x[-1, 0, 0, :] = -0.0           # -0.0 against 0.0 ties
    x[-1, 0, 1, :] = 0.0
    return x


@pytest.mark.parametrize("shape, s, p, ceil", POOL_3X3)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [None, np.nan, np.inf, "inf pair"])
def test_max_pool_3x3_kernel_equals_general_kernel_and_torch(shape, s, p, ceil, dtype, special) -> None:
    fast, general = cpu_kernels.get("max_pool2d_3x3_planes"), cpu_kernels.get("max_pool2d_planes")
    if fast is None:
        pytest.skip("numba kernels unavailable")
    x = _pool_input(shape, dtype, 1)
    if special == "inf pair":
        x[0, 0, 4 % shape[2], 1] = np.inf
        x[0, 0, 4 % shape[2], 2] = -np.inf
    elif special is not None:
        x[-1, -1, shape[2] // 2, shape[3] // 2] = special
    tv, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, s, p, ceil_mode=ceil, return_indices=True)
    n, c, h, w = shape
    sh, sw = (s, s) if isinstance(s, int) else s
    ph, pw = (p, p) if isinstance(p, int) else p
    planes = x.reshape(n * c, h, w)
    results = []
    for kernel in (fast, general):
        out = np.empty((n * c,) + tuple(tv.shape[2:]), dtype)
        idx = np.empty(out.shape, np.int64)
        nans = kernel(planes, 3, 3, sh, sw, ph, pw, 1, 1, out, idx, 0, n * c)
        results.append((out, idx, nans))
    (out, idx, nans), (gout, gidx, gnans) = results
    if special is np.nan:  # both report it; their raw outputs are discarded (the op redoes it in NumPy)
        assert nans > 0 and gnans > 0
    else:
        np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), gout.view(f"u{out.itemsize}"))  # -0.0 kept
        np.testing.assert_array_equal(idx, gidx)
        assert gnans == 0 and (nans == 0 or special == "inf pair")  # +inf with -inf: a false alarm, recomputed
        np.testing.assert_array_equal(out.reshape(tv.shape), tv.numpy())
        np.testing.assert_array_equal(idx.reshape(ti.shape), ti.numpy())
    # through the op (NaN windows redone on the NumPy path): torch's values and indices
    ev, ei = ember.nn.functional.max_pool2d(ember.tensor(x), 3, s, p, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())


@pytest.mark.parametrize("shape, s, p, ceil", POOL_3X3 + [((2, 3, 9, 7), 2, 1, True)])
@pytest.mark.parametrize("special", [None, np.nan, "nan window", np.inf, -np.inf])
def test_max_pool_numpy_path_vs_torch(shape, s, p, ceil, special, monkeypatch) -> None:
    """The NumPy tap scan (NaN-free fast scan, PyTorch's NaN rule when a NaN shows), forward and
    backward, against torch; float64 so no kernel is skipped for the dtype."""
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
    cpu_kernels.reset()
    try:
        x = _pool_input(shape, np.float64, 2)
        if special == "nan window":
            x[0, 0, :2, :2] = np.nan  # several NaNs in one window: the last one's index
        elif special is not None:
            x[-1, -1, shape[2] // 2, shape[3] // 2] = special
        tx = torch.tensor(x, requires_grad=True)
        tv, ti = torch.nn.functional.max_pool2d(tx, 3, s, p, ceil_mode=ceil, return_indices=True)
        g = np.random.default_rng(3).standard_normal(tuple(tv.shape))
        tv.backward(torch.tensor(g))
        ex = ember.tensor(x, requires_grad=True)
        ev, ei = ember.nn.functional.max_pool2d(ex, 3, s, p, ceil_mode=ceil, return_indices=True)
        ev.backward(ember.tensor(g))
        np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    finally:
        cpu_kernels.reset()
