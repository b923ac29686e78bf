"""ember's AVX-512 float32 GEMM (ember/backends/cpu_gemm_kernels.py): products against float64 references
for every layout the kernel reads (in place, transposed, packed panels, negative and zero strides), edge
tiles of every size, several k blocks, inf/NaN, the thread splits (bit-identical to one thread), and the
ops that use it (matmul, linear, matmul_t) against torch in eager and compiled mode.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _config
from ember.backends import cpu_gemm_choice as gemm_choice, cpu_kernels, cpu_threads

numba = pytest.importorskip("numba")
torch = pytest.importorskip("torch")
gemm_kernels = pytest.importorskip("ember.backends.cpu_gemm_kernels")
if not gemm_kernels.host_has_avx512():
    pytest.skip("ember's GEMM needs an AVX-512 CPU", allow_module_level=True)
from gemm_test_support import kernel, operand as _operand  # noqa: E402,F401  (kernel: a fixture)


_real_get = cpu_kernels.get


def _check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)  # bound of a float32 sum's error
    k = a.shape[1]
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= 2e-7 * (k + 2) * scale + 1e-30), np.max(np.abs(got - want) / (scale + 1e-30))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (12, 256, 32), (13, 257, 33), (11, 5, 31), (25, 513, 65),
                                     (144, 40, 64), (145, 300, 97), (7, 1000, 3), (300, 17, 200)])
@pytest.mark.parametrize("layouts", ["cc", "ct", "tc", "tt", "sc", "cs", "nn", "zc", "cz"])
def test_products_against_float64(kernel, m: int, k: int, n: int, layouts: str) -> None:
    rng = np.random.default_rng(m * 1000 + k + n)
    a, b = _operand(rng, m, k, layouts[0]), _operand(rng, k, n, layouts[1])
    _check(kernel(a, b), a, b)


def test_equals_numpy_up_to_rounding_and_leaves_other_dtypes_to_blas(kernel) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((96, 80)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert kernel(a.astype(np.float64), b.astype(np.float64)) is None
    assert kernel(a[None], b) is None  # stacks are not taken
    raw = np.zeros(64 * 96 * 4 + 4, np.uint8)
    unaligned = raw[1:1 + 64 * 96 * 4].view(np.float32).reshape(64, 96)
    unaligned[...] = a
    assert not unaligned.flags.aligned and kernel(unaligned, b) is None


def test_special_values_propagate_like_blas(kernel) -> None:
    """inf and NaN in either operand give inf/NaN where a float64 product does (0 * inf = NaN included)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((30, 40)).astype(np.float32), rng.standard_normal((40, 50)).astype(np.float32)
    a[3, 7], a[5, :] = np.inf, 0.0
    b[7, 9], b[:, 11], b[2, 4] = np.nan, 0.0, -np.inf
    b[11, 11] = np.inf  # a row 5 of zeros meets inf: NaN
    with np.errstate(invalid="ignore"):
        got, want = kernel(a, b), a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(600, 300, 700), (2000, 64, 40)])  # column panels; row blocks (few panels)
@pytest.mark.parametrize("b_layout", ["c", "t"])
def test_thread_splits_are_bit_identical_to_one_thread(kernel, monkeypatch, shape, b_layout) -> None:
    m, k, n = shape
    rng = np.random.default_rng(2)
    a, b = _operand(rng, m, k, "c"), _operand(rng, k, n, b_layout)
    one = kernel(a, b)
    monkeypatch.setattr(_config, "CPU_THREADS", 3)  # uneven chunks
    monkeypatch.setattr(gemm_kernels, "THREADED_MACS", 0)
    assert cpu_threads.num_threads() == 3
    assert np.array_equal(kernel(a, b), one)
    _check(one, a, b)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("k", [40, 700])  # one k block; two
def test_bias_added_inside_equals_adding_it_afterwards_bit_for_bit(kernel, monkeypatch, threads: int, k: int) -> None:
    monkeypatch.setattr(_config, "CPU_THREADS", threads)
    monkeypatch.setattr(gemm_kernels, "THREADED_MACS", 0)
    rng = np.random.default_rng(5)
    a, w = _operand(rng, 150, k, "c"), _operand(rng, 70, k, "c")
    bias = rng.standard_normal(70).astype(np.float32)
    bias[3] = -0.0
    want = kernel(a, w.T)
    want += bias
    assert np.array_equal(kernel(a, w.T, bias), want)
    # a bias the kernel does not take (float64, strided) is added afterwards, as NumPy would
    for other in (bias.astype(np.float64), np.repeat(bias, 2)[::2]):
        expected = kernel(a, w.T)
        expected += other
        assert np.array_equal(kernel(a, w.T, other), expected)
    zero_sign = kernel(np.zeros((20, k), np.float32), w.T[:, :40], np.full(40, -0.0, np.float32))
    assert np.all(np.signbit(zero_sign) == np.signbit(np.float32(0.0) + np.float32(-0.0)))


def test_switched_off_by_config(kernel, monkeypatch) -> None:
    a = np.ones((64, 64), np.float32)
    monkeypatch.setattr(_config, "GEMM", "blas")
    assert kernel(a, a) is None


def test_auto_follows_the_shape_rule_at_any_thread_count(kernel, monkeypatch) -> None:
    """"auto": ember's GEMM for the shapes the rule gives it when NumPy's BLAS runs AVX2 kernels, on one
    thread and on several alike; BLAS for everything when BLAS runs AVX-512 kernels (the rule's own cases:
    tests/backends/test_cpu_gemm_choice.py)."""
    a = np.ones((256, 256), np.float32)
    monkeypatch.setattr(_config, "GEMM", "auto")
    monkeypatch.setattr(gemm_choice, "MIN_MACS", 1 << 20)
    monkeypatch.setattr(gemm_choice, "blas_core_name", lambda: "Haswell")
    for threads in (1, 2):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        assert kernel(a, a) is not None
        assert kernel(a, a[:, :10]) is None  # N = 10: BLAS's
    monkeypatch.setattr(gemm_choice, "blas_core_name", lambda: "SkylakeX")
    assert kernel(a, a) is None


@pytest.fixture
def calls(monkeypatch):
    """How many times the kernel's driver ran (to show the ops below really use it), the kernel on."""
    monkeypatch.setattr(_config, "GEMM", "ember")
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    count = [0]
    driver = gemm_kernels.sgemm

    def counting(*args):
        count[0] += 1
        return driver(*args)

    monkeypatch.setattr(gemm_kernels, "sgemm", counting)
    return count


@pytest.mark.parametrize("compiled", [False, True])
def test_linear_matmul_and_gradients_against_torch(compiled: bool, calls) -> None:
    """An MLP step big enough for the kernel (linear forward, input and weight gradients through
    matmul / matmul_t), eager and compiled, against torch; compiled equals eager bit for bit."""
    rng = np.random.default_rng(3)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((256, 300), (200, 300), (300, 130)))
    results = {}
    for lib in (torch, ember):
        a, b = (lib.tensor(v, requires_grad=True) for v in (w1, w2))
        xs = lib.tensor(x)

        def step(xs, a=a, b=b, lib=lib):
            y = lib.nn.functional.linear(xs, a).relu()
            loss = (lib.matmul(y.T, xs) @ b).square().mean()
            a.grad = b.grad = None
            loss.backward()
            return loss

        fn = ember.compile(step, measure=False) if lib is ember and compiled else step
        for _ in range(3 if fn is not step else 1):
            loss = fn(xs)
        results[lib.__name__] = [loss.detach().numpy()] + [t.grad.numpy() for t in (a, b)]
    assert calls[0] >= 4  # linear, matmul and their gradients' products
    for got, want in zip(results["ember"], results["torch"]):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5 * np.abs(want).max())


def test_compiled_step_equals_eager_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((256, 784)).astype(np.float32))
    outs = []
    for mode in ("eager", "compiled"):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(784, 512), ember.nn.ReLU(), ember.nn.Linear(512, 64))
        opt = ember.optim.Adam(model.parameters(), 1e-3)

        def step(xb):
            loss = model(xb).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = ember.compile(step, measure=False) if mode == "compiled" else step
        for _ in range(4):
            fn(x)
        outs.append([p.detach().numpy().copy() for p in model.parameters()])
    for eager, compiled in zip(*outs):
        assert np.array_equal(eager, compiled)


def test_kernel_is_not_offered_when_numba_compiles_for_another_cpu(monkeypatch):
    """``NUMBA_CPU_NAME=generic`` (portable caches) compiles without AVX-512 registers: BLAS is faster then."""
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not gemm_kernels.host_has_avx512()
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    assert gemm_kernels.host_has_avx512()


@pytest.mark.parametrize("m,k,n,threads", [(300, 200, 100, 1), (3000, 200, 1000, 2)])
@pytest.mark.parametrize("b_layout", ["c", "t"])
def test_out_is_written_in_place_and_nothing_beside_it(kernel, monkeypatch, m, k, n, threads, b_layout):
    """``out=`` (the convolutions' preallocated rows) may have a row stride wider than n: the kernel writes
    exactly the (m, n) block, on one thread or split over two."""
    monkeypatch.setattr(_config, "CPU_THREADS", threads)
    rng = np.random.default_rng(3)
    a = _operand(rng, m, k, "c")
    b = _operand(rng, k, n, b_layout)
    wide = np.full((m, n + 28), 7.0, np.float32)
    out = wide[:, :n]
    assert kernel(a, b, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    assert (wide[:, n:] == 7.0).all()


def test_out_the_kernel_cannot_write_is_declined(kernel):
    a = np.ones((64, 64), np.float32)
    assert kernel(a, a, out=np.empty((64, 64), np.float64)) is None
    assert kernel(a, a, out=np.empty((64, 64), np.float32)[:, ::-1]) is None
    assert kernel(a, a, out=np.empty((64, 65), np.float32)) is None


@pytest.mark.parametrize("shape,o,kernel_size,padding", [((8, 16, 10, 10), 32, 3, 1), ((4, 3, 9, 9), 8, 5, 2)])
@pytest.mark.parametrize("choice", ["im2col", "auto"])
def test_convolutions_through_the_kernel_match_torch(kernel, monkeypatch, shape, o, kernel_size, padding, choice):
    """conv2d's im2col GEMMs (forward, input and weight gradients) reach ember's GEMM and match torch."""
    monkeypatch.setattr(_config, "CONV_ALGORITHM", choice)
    calls = []
    real = cpu_kernels.get("matmul_f32")
    monkeypatch.setattr(cpu_kernels, "get", lambda name: (lambda *a, **k: calls.append(1) or real(*a, **k))
                        if name == "matmul_f32" else _real_get(name))
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((o, shape[1], kernel_size, kernel_size)).astype(np.float32)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ey = F.conv2d(ex, ew, padding=padding)
    (ey * ey).sum().backward()
    ty = torch.nn.functional.conv2d(tx, tw, padding=padding)
    (ty * ty).sum().backward()
    if choice == "im2col":
        assert len(calls) >= 3  # forward, input gradient, weight gradient
    scale = float(np.abs(ty.detach().numpy()).max())
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5 * scale)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-5 * float(tx.grad.abs().max()))
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-3, atol=1e-5 * float(tw.grad.abs().max()))
