"""Convolutions split over ember's threads (cpu_blas.blas_for): every layout (Winograd fused per
tile chunk, per-image im2col, batch-wide im2col) in all three passes, with the work forced into
3 uneven chunks, against torch in float64, and float64 finite differences of a conv layer."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_blas, cpu_threads
from ember.ops import conv, conv_im2col, conv_winograd

torch = pytest.importorskip("torch")


@pytest.fixture
def split(monkeypatch):
    """Three ember threads and no minimum chunk size, so even small convolutions are split (the
    fixture turns the split on whatever EMBER_BLAS_SPLIT says)."""
    monkeypatch.setattr(_config, "BLAS_SPLIT", True)
    if not cpu_blas.available():
        pytest.skip("no controllable OpenBLAS under NumPy: the split paths do not run")
    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    monkeypatch.setattr(conv_im2col, "MIN_CHUNK_FLOPS", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_CHUNK_FLOPS", 0)
    monkeypatch.setattr(conv_winograd, "_MIN_TILES", 1)
    chunks = []
    real = cpu_threads.parallel_for

    def counting(fn, total, min_chunk=1):
        chunks.append(total)
        return real(fn, total, min_chunk)

    monkeypatch.setattr(cpu_blas, "parallel_for", counting)
    yield chunks
    if cpu_threads._POOL is not None:
        cpu_threads._POOL.shutdown()


def _torch_all(x, w, g, **geo):
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **geo)
    ty.backward(torch.tensor(g))
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def _ember_all(x, w, g, **geo):
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, **geo)
    ey.backward(ember.tensor(g))
    return ey.detach().numpy(), ex.grad.numpy(), ew.grad.numpy()


CASES = [  # (input, weight, geometry): each picks one layout
    ((5, 3, 13, 11), (4, 3, 3, 3), dict(padding=1)),                      # per image (>= 128 pixels)
    ((5, 2, 12, 12), (3, 2, 5, 3), dict(stride=(1, 2), padding=(2, 1))),  # per image, rectangular
    ((7, 3, 6, 5), (4, 3, 3, 3), dict(stride=2, padding=1)),              # batch-wide (small maps)
    ((4, 2, 7, 7), (3, 2, 3, 3), dict(dilation=2, padding=1)),            # batch-wide, dilation
    ((5, 4, 3, 3), (6, 4, 1, 1), dict(stride=2)),                         # 1x1, stride 2
    ((3, 3, 1, 5), (4, 3, 3, 3), dict(padding=1)),                        # trimmed to 1x3
]


@pytest.mark.parametrize("xs, ws, geo", CASES)
def test_im2col_split_three_passes_match_torch(xs, ws, geo, split) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **geo).shape))
    for got, want in zip(_ember_all(x, w, g, **geo), _torch_all(x, w, g, **geo)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    assert split and max(split) >= 3, "the passes were not split over threads"


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("xs, pads", [((3, 2, 9, 7), (1, 1, 1, 1)), ((2, 3, 6, 5), (0, 2, 1, 0))])
def test_winograd_fused_split_matches_torch(xs, pads, m, split) -> None:
    if conv_winograd.native_kernel(np, "winograd_input") is None:
        pytest.skip("numba not installed: the fused Winograd pipeline needs the native transforms")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal((4, xs[1], 3, 3))
    tx = torch.nn.functional.pad(torch.tensor(x), (pads[2], pads[3], pads[0], pads[1]))
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(tx, torch.tensor(w)).shape))
    y, gx_pad, gw = _torch_all(tx.numpy(), w, g)
    gx = gx_pad[:, :, pads[0]:pads[0] + xs[2], pads[2]:pads[2] + xs[3]]
    tol = dict(rtol=1e-11, atol=1e-11)
    out, v = conv_winograd.forward(np, x, w, pads, m)
    np.testing.assert_allclose(out, y, **tol)
    np.testing.assert_allclose(conv_winograd.input_grad(np, g, w, pads, m), gx, **tol)
    np.testing.assert_allclose(conv_winograd.weight_grad(np, x, g, pads, m, v=v), gw, **tol)
    assert split and max(split) >= 3


def test_winograd_layer_float32_split_equals_one_thread(split, monkeypatch) -> None:
    """A ResNet-style layer through conv.py (Winograd picked): split and unsplit agree to rounding."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 16, 8, 8), dtype=np.float32)
    w = rng.standard_normal((16, 16, 3, 3), dtype=np.float32) * 0.1
    g = rng.standard_normal((4, 16, 8, 8), dtype=np.float32)
    assert conv.winograd_tile(np, x.shape, w.shape, (1, 1), (1,) * 4, (1, 1), 1, np.float32)
    threaded = _ember_all(x, w, g, padding=1)
    assert split
    monkeypatch.setattr(_config, "BLAS_SPLIT", False)
    for got, want in zip(threaded, _ember_all(x, w, g, padding=1)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def test_conv_layer_gradcheck_float64_split(split) -> None:
    """Finite differences (float64) of a strided, padded, per-image conv layer, all chunks split."""
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((3, 2, 11, 12)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((3, 2, 3, 2)), requires_grad=True)
    fn = lambda a, b: ember.nn.functional.conv2d(a, b, stride=(1, 1), padding=(1, 0))  # noqa: E731
    assert ember.autograd.gradcheck(fn, (x, w), eps=1e-6, atol=1e-6)


def test_blas_thread_count_restored(monkeypatch) -> None:
    monkeypatch.setattr(_config, "BLAS_SPLIT", True)
    if not cpu_blas.available():
        pytest.skip("no controllable OpenBLAS under NumPy")
    get, _ = cpu_blas._controls()
    before = get()
    seen = []
    with cpu_blas.single_threaded_blas() as active:
        seen.append(get())
        with cpu_blas.single_threaded_blas():  # nested: the outer block restores
            seen.append(get())
        seen.append(get())
    assert active and seen == [1, 1, 1]
    assert get() == before


def test_blas_for_covers_range_once_and_reraises(split) -> None:
    hits = np.zeros(10)
    cpu_blas.blas_for(lambda a, b: hits.__setitem__(slice(a, b), hits[a:b] + 1), 10, 1)
    assert (hits == 1).all()
    with pytest.raises(ValueError, match="boom"):
        cpu_blas.blas_for(lambda a, b: (_ for _ in ()).throw(ValueError("boom")), 10, 1)


@pytest.mark.parametrize("where", ["x", "g"])
def test_nonfinite_in_one_chunk_takes_the_direct_path(where, split) -> None:
    """inf/NaN seen by one thread's images only: the whole pass falls back to im2col, as PyTorch's
    direct convolution spreads them (only to the windows that read them)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 16, 8, 8)).astype(np.float32)
    w = np.abs(rng.standard_normal((16, 16, 3, 3))).astype(np.float32)
    g = rng.standard_normal((3, 16, 8, 8)).astype(np.float32)
    target = x if where == "x" else g
    target[2, 3, 2, 2], target[2, 0, 5, 6] = np.inf, np.nan  # the last image: the last thread's chunk
    got = _ember_all(x, w, g, padding=1)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g))
    for a, b in zip(got, (ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        finite = np.isfinite(b)
        np.testing.assert_allclose(a[finite], b[finite], rtol=1e-4, atol=1e-4)
    assert split


def test_small_gemm_runs_on_one_blas_thread(monkeypatch) -> None:
    """Mid-sized GEMMs (above OpenBLAS's own one-thread limit, below SMALL_GEMM_MACS) run with BLAS
    on one thread (with or without the BLAS split); tiny and large ones are left to BLAS."""
    monkeypatch.setattr(_config, "BLAS_SPLIT", False)
    if cpu_blas._controls() is None:
        pytest.skip("no controllable OpenBLAS under NumPy")
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    get, _ = cpu_blas._controls()
    before = get()

    def threads_inside(m, k, n):
        with cpu_blas.small_gemm(np, np.empty((m, k)), np.empty((k, n))):
            return get()

    assert threads_inside(64, 3136, 10) == 1          # the MNIST CNN's linear layer
    assert threads_inside(8, 8, 8) == before            # OpenBLAS runs it on one thread anyway
    assert threads_inside(1024, 1024, 1024) == before   # large: BLAS's threads pay off
    with cpu_blas.small_gemm(np, np.empty((64, 128, 64)), np.empty((64, 64, 128))):
        assert get() == before                          # a stack counts as its total (W4's attention)
    with cpu_blas.small_gemm(np, np.empty((2, 64, 3136)), np.empty((3136, 10))):
        assert get() == before                          # 2 x 2M multiply-adds: over the limit
    with cpu_blas.small_gemm(np, np.empty((1, 64, 3136)), np.empty((3136, 10))):
        assert get() == 1
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    assert threads_inside(64, 3136, 10) == 1            # EMBER_CPU_THREADS=1 too: OpenBLAS's workers would spin
