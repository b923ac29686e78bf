"""The BLAS split's default (on where ember's AVX-512 convolution kernels run, ``EMBER_BLAS_SPLIT`` unset),
dense convolution products shared out by column panels, and the per-image columns filled on threads."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_blas, cpu_threads, native_kernel
from ember.ops import conv, conv_im2col, conv_per_image

torch = pytest.importorskip("torch")


def test_default_follows_the_native_kernels(monkeypatch) -> None:
    controllable = cpu_blas._controls() is not None
    native = native_kernel(np, "conv_direct_forward") is not None
    monkeypatch.setattr(_config, "BLAS_SPLIT", None)
    assert cpu_blas.native_split() == native
    assert cpu_blas.available() == (native and controllable)
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")  # no native kernels: BLAS keeps its threads
    monkeypatch.setattr(ember.backends.cpu_kernels, "_KERNELS", None)
    assert not cpu_blas.native_split() and not cpu_blas.available()
    monkeypatch.undo()
    ember.backends.cpu_kernels.reset()
    monkeypatch.setattr(_config, "BLAS_SPLIT", False)  # EMBER_BLAS_SPLIT=0 always wins
    assert not cpu_blas.available()
    monkeypatch.setattr(_config, "BLAS_SPLIT", True)
    assert cpu_blas.available() == controllable


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(_config, "BLAS_SPLIT", True)
    if not cpu_blas.available():
        pytest.skip("no controllable OpenBLAS under NumPy: the split paths do not run")
    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    monkeypatch.setattr(conv_im2col, "MIN_CHUNK_FLOPS", 0)
    monkeypatch.setattr(conv_im2col, "MIN_COPY_ELEMENTS", 1)
    chunks: list[int] = []
    real = cpu_threads.parallel_for

    def counting(fn, total, min_chunk=1):
        chunks.append(total)
        return real(fn, total, min_chunk)

    monkeypatch.setattr(cpu_blas, "parallel_for", counting)
    monkeypatch.setattr(conv_im2col, "parallel_for", counting)
    yield chunks
    if cpu_threads._POOL is not None:
        cpu_threads._POOL.shutdown()


@pytest.mark.parametrize("xs, ws, geo", [
    ((6, 40, 1, 1), (70, 40, 3, 3), dict(padding=1)),           # 3x3 on a 1x1 map: trimmed to a dense layer
    ((5, 24, 2, 2), (66, 24, 3, 3), dict(stride=2, padding=1)),  # ResNet's stride-2 3x3 on a 2x2 map
    ((4, 9, 3, 3), (33, 9, 3, 3), dict()),                       # the window is the whole input
])
def test_dense_products_split_by_panels_match_torch(xs, ws, geo, three_threads) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **geo)
    g = rng.standard_normal(tuple(ty.shape), dtype=np.float32)
    ty.backward(torch.tensor(g, dtype=torch.float64))
    stride, pad = geo.get("stride", 1), geo.get("padding", 0)
    assert conv.algorithm(np, xs, ws, (stride, stride), (pad,) * 4, (1, 1), 1, np.float32).endswith("dense")
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, **geo)
    ey.backward(ember.tensor(g))
    for got, want in ((ey, ty), (ex.grad, tx.grad), (ew.grad, tw.grad)):
        want = want.detach().numpy()
        assert got.dtype == ember.float32
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))
    assert three_threads and max(three_threads) >= 2, "the dense products were not split"


def test_per_image_columns_split_equal_one_thread(three_threads, monkeypatch) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 3, 13, 12), dtype=np.float32)
    geometry = (3, 3, (2, 1), (1, 2, 0, 1), (1, 2))
    split = conv_per_image.cols(np, x, *geometry)
    assert three_threads and max(three_threads) == 7
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    assert np.array_equal(split, conv_per_image.cols(np, x, *geometry))
