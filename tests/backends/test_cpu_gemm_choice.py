"""The GEMM chosen per product (ember/backends/cpu_gemm_choice.py): the shape rule, the BLAS-kernel check
(NumPy's OpenBLAS core read through ``openblas_get_corename``), the modes, the fallback without AVX-512,
and BLAS held to one thread for the small products it keeps beside ember's kernel."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_gemm_choice as choice, cpu_kernels, cpu_mkl, cpu_threads
from ember.ops import linalg


@pytest.mark.parametrize("m, k, n, contiguous, want", [
    (256, 784, 512, False, True),    # W2's first layer (weight transposed: packed B, M = 256)
    (512, 256, 784, True, True),     # its weight gradient
    (256, 512, 10, False, False),    # its 10-class layer: N = 10
    (256, 10, 512, True, True),      # that layer's input gradient: K = 10 (0.62x BLAS's time)
    (256, 7, 1024, True, False),     # K = 7
    (1024, 8, 1024, True, False),    # K = 8 with C's rows 4 KB apart
    (1024, 8, 1040, True, True),
    (10, 256, 512, True, True),      # that layer's weight gradient (M = 10 is fine: 12-row tiles)
    (1000, 64, 100, True, True),     # W1's weight gradient: K = 64 (0.64x BLAS's time)
    (64, 1000, 100, True, True),     # W1's forward
    (64, 3136, 10, False, False),    # the MNIST CNN's linear layer: N = 10
    (64, 1024, 1024, False, True),   # a transposed B copied for 64 rows (0.98x)
    (16, 1024, 1024, False, False),  # ... for 16 rows only
    (256, 1024, 1024, False, True),
    (1024, 8, 256, True, True),      # K = 8 (0.57-0.62x)
    (1024, 256, 10, True, False),    # N = 10
    (1024, 256, 16, True, True),     # N = 16
    (100, 100, 100, True, False),    # 1,000,000 multiply-adds: below MIN_MACS (2^20)
    (64, 128, 64, True, False),      # below MIN_MACS
    (4096, 384, 1152, False, True),  # GPT's qkv projection
])
def test_shape_rule(m: int, k: int, n: int, contiguous: bool, want: bool) -> None:
    assert choice.shape_prefers_ember(m, k, n, contiguous) is want


def test_blas_with_avx512_kernels_takes_every_product(monkeypatch) -> None:
    monkeypatch.setattr(_config, "GEMM", "auto")
    for name, avx512 in (("SkylakeX", True), ("SapphireRapids", True), ("Cooperlake", True), ("Haswell", False),
                         ("Zen", False), (None, True)):  # None: not an OpenBLAS that says; trusted
        monkeypatch.setattr(choice, "blas_core_name", lambda name=name: name)
        assert choice.blas_has_avx512() is avx512
        assert choice.use_ember(256, 784, 512, True) is (not avx512)
        assert choice.kernel_in_use() is (not avx512)


def test_modes(monkeypatch) -> None:
    monkeypatch.setattr(choice, "blas_core_name", lambda: "SkylakeX")
    monkeypatch.setattr(_config, "GEMM", "ember")  # every product of MIN_MACS+, whatever the shape and BLAS
    assert choice.use_ember(256, 10, 512, True) and not choice.use_ember(8, 8, 8, True)
    monkeypatch.setattr(_config, "GEMM", "blas")
    monkeypatch.setattr(choice, "blas_core_name", lambda: "Haswell")
    assert not choice.use_ember(256, 784, 512, True) and not choice.kernel_in_use()


def test_core_name_is_the_one_openblas_runs() -> None:
    """Read from the library itself: the core ``OPENBLAS_CORETYPE`` forces, in a fresh process."""
    if choice.blas_core_name() is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS that reports its core")
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
    code = "from ember.backends.cpu_gemm_choice import blas_core_name; print(blas_core_name())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Haswell"


def test_without_avx512_blas_takes_everything(monkeypatch) -> None:
    """An AVX2-only CPU (or numba unable to compile for AVX-512): no kernel, every product is NumPy's."""
    gemm_kernels = pytest.importorskip("ember.backends.cpu_gemm_kernels")
    monkeypatch.setattr(gemm_kernels, "host_has_avx512", lambda: False)
    monkeypatch.setattr(_config, "CPU_KERNELS", "numba")
    monkeypatch.setattr(choice, "blas_core_name", lambda: "Haswell")
    cpu_kernels.reset()
    try:
        assert cpu_kernels.get("matmul_f32") is None
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal(s).astype(np.float32) for s in ((256, 784), (784, 512)))
        got = (ember.tensor(a) @ ember.tensor(b)).numpy()
        # BLAS multiplies it: in one call, or one call per ember thread where ember splits BLAS work
        split = cpu_blas_gemm.split_gemm(a, b)
        assert np.array_equal(got, cpu_mkl.gemm(a, b) if split is None else split)
        monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1 << 62)
        with cpu_blas.single_threaded_blas():  # ember's products run on one BLAS thread (OpenBLAS's bits differ
            expected = cpu_mkl.gemm(a, b)      # between one and two threads); MKL's where it is ember's BLAS
        assert np.array_equal((ember.tensor(a) @ ember.tensor(b)).numpy(), expected)
    finally:
        cpu_kernels.reset()


def _blas_threads_seen(monkeypatch, product) -> list[int]:
    """NumPy's BLAS thread count at each ``np.matmul`` call ``product()`` makes."""
    get = cpu_blas._controls()[0]
    seen: list[int] = []
    real = np.matmul

    def spy(*args, **kwargs):
        seen.append(get())
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "matmul", spy)
    product()
    monkeypatch.setattr(np, "matmul", real)
    return seen


@pytest.fixture
def numpys_blas():
    """NumPy's OpenBLAS as ember's BLAS for one test (these watch its thread count around ``np.matmul``), the
    process's choice (Intel MKL where installed, ``cpu_mkl``) restored afterwards."""
    cpu_mkl.use("openblas")
    yield
    cpu_mkl.use(None)


def test_products_run_on_one_blas_thread_unless_the_split_is_off(monkeypatch, numpys_blas) -> None:
    """Every product ember hands to OpenBLAS above its own one-thread size holds it to one thread (blas18): W2's
    10-class layer (1.3M multiply-adds), W1's 6.4M forward and a 67M product alike, with or without ember's kernel,
    at one or two of ember's threads, so OpenBLAS's workers never wake to spin; the count is restored afterwards
    (a program's own NumPy products keep BLAS's threads). ``EMBER_BLAS_SPLIT=0`` keeps the old rule: medium
    products on one thread, large ones on BLAS's threads."""
    if cpu_blas._controls() is None:
        pytest.skip("no controllable OpenBLAS")
    get, put = cpu_blas._controls()
    saved = get()
    put(2)
    try:
        rng = np.random.default_rng(1)
        x, w = ember.tensor(rng.standard_normal((256, 512)).astype(np.float32)), \
            ember.tensor(rng.standard_normal((10, 512)).astype(np.float32))
        big = ember.tensor(rng.standard_normal((512, 512)).astype(np.float32))
        w1x, w1w = ember.tensor(rng.standard_normal((64, 1000)).astype(np.float32)), \
            ember.tensor(rng.standard_normal((1000, 100)).astype(np.float32))
        product = lambda: ember.nn.functional.linear(x, w) + (x @ w.T)
        monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1 << 62)  # every product through BLAS's own call
        monkeypatch.setattr(_config, "HOT_WORKER", False)  # (the hot worker calls cblas itself: test_cpu_hot_worker)
        for split, gemm, threads in ((None, "blas", 2), (True, "auto", 2), (None, "auto", 1)):
            monkeypatch.setattr(_config, "BLAS_SPLIT", split)
            monkeypatch.setattr(_config, "GEMM", gemm)
            monkeypatch.setattr(_config, "CPU_THREADS", threads)
            assert _blas_threads_seen(monkeypatch, product) == [1, 1]
            assert get() == 2  # restored afterwards
            monkeypatch.setattr(_config, "GEMM", "blas")
            assert _blas_threads_seen(monkeypatch, lambda: x @ big) == [1]
            assert _blas_threads_seen(monkeypatch, lambda: w1x @ w1w) == [1]
            assert get() == 2
        monkeypatch.setattr(_config, "BLAS_SPLIT", False)
        assert _blas_threads_seen(monkeypatch, product) == [1, 1]
        assert _blas_threads_seen(monkeypatch, lambda: x @ big) == [2]  # 67M multiply-adds: BLAS's threads
        assert _blas_threads_seen(monkeypatch, lambda: w1x @ w1w) == [2]
    finally:
        put(saved)


def test_large_stacks_split_over_ember_threads(monkeypatch, numpys_blas) -> None:
    """A stack of products (attention's heads in the NumPy composite) of SPLIT_MACS+ multiply-adds in all runs
    in blocks on ember's threads, each on one BLAS thread, with matmul's values bit for bit; broadcast stacks,
    one thread, or the split off leave it to matmul."""
    if cpu_blas._controls() is None:
        pytest.skip("no controllable OpenBLAS")
    get = cpu_blas._controls()[0]
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 2)
    monkeypatch.setattr(_config, "BLAS_SPLIT", None)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 70, 33)).astype(np.float32)
    b = rng.standard_normal((3, 4, 33, 41)).astype(np.float32)
    seen: list[int] = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *args, **kw: seen.append(get()) or real(*args, **kw))
    got = cpu_blas_gemm.split_stack(a, b)
    monkeypatch.setattr(np, "matmul", real)
    assert seen == [1, 1]  # one block per thread, one BLAS thread each
    np.testing.assert_array_equal(got, a @ b)
    np.testing.assert_array_equal((ember.tensor(a) @ ember.tensor(b)).numpy(), a @ b)
    at = np.swapaxes(rng.standard_normal((3, 4, 33, 70)).astype(np.float64), -1, -2)  # strided, float64
    np.testing.assert_array_equal(cpu_blas_gemm.split_stack(at, b.astype(np.float64)), at @ b.astype(np.float64))
    assert cpu_blas_gemm.split_stack(a[:1], b[:1]) is None  # a first batch axis of 1
    assert cpu_blas_gemm.split_stack(a, b[:1]) is None  # broadcast batch dims
    assert cpu_blas_gemm.split_stack(a.astype(np.int32), b.astype(np.int32)) is None
    monkeypatch.setattr(_config, "BLAS_SPLIT", False)
    assert cpu_blas_gemm.split_stack(a, b) is None
    monkeypatch.setattr(_config, "BLAS_SPLIT", None)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 1)
    assert cpu_blas_gemm.split_stack(a, b) is None


def test_a_split_needs_min_macs_split(monkeypatch) -> None:
    """At two threads the kernel takes a product it would split only from MIN_MACS_SPLIT multiply-adds on (W1's
    6.4M forward goes to BLAS's threads); on one thread the shape rule alone decides; EMBER_GEMM=ember ignores it."""
    monkeypatch.setattr(_config, "GEMM", "auto")
    monkeypatch.setattr(choice, "blas_core_name", lambda: "Haswell")
    assert choice.use_ember(64, 1000, 100, True, threads=1)
    assert not choice.use_ember(64, 1000, 100, True, threads=2)
    assert choice.use_ember(256, 784, 512, False, threads=2)  # W2's first layer: 103M
    assert choice.MIN_MACS_SPLIT > 64 * 1000 * 100
    monkeypatch.setattr(_config, "GEMM", "ember")
    assert choice.use_ember(64, 1000, 100, True, threads=2)


def test_w1_forward_goes_to_blas_at_two_threads(monkeypatch) -> None:
    """Through the kernel's entry: at two of ember's threads W1's forward is BLAS's (None); on one, the kernel's."""
    gemm_kernels = pytest.importorskip("ember.backends.cpu_gemm_kernels")
    if not gemm_kernels.host_has_avx512():
        pytest.skip("ember's GEMM needs an AVX-512 CPU")
    monkeypatch.setattr(_config, "GEMM", "auto")
    monkeypatch.setattr(choice, "blas_core_name", lambda: "Haswell")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 1000)).astype(np.float32), rng.standard_normal((1000, 100)).astype(np.float32)
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    assert gemm_kernels.matmul(a, b) is None
    assert gemm_kernels.matmul(a, b, local=True) is not None  # inside a chunk of ember's threads: one thread
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    got = gemm_kernels.matmul(a, b)
    assert got is not None
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
