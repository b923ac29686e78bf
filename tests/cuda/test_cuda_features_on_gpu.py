"""CUDA graphs, cuDNN and the single ReductionKernel on a real GPU (skipped without CuPy and a GPU: CI). The CPU
tests (tests/cuda/test_*_on_standin.py, test_cudnn_plumbing.py, test_cuda_reduction_kernel.py) check the logic;
these check what only the device can: CuPy's capture accepts what the stand-in's model accepts, replays equal
eager runs, cuDNN computes what the CuPy path computes, the ReductionKernel compiles and agrees with eager.
Also cuDNN's training norms and attention graphs, and a compiled step with dropout and capturable AdamW replayed.
tools/gpu_session.sh runs them in the first GPU call."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cuda_cudnn, get_backend

cupy = pytest.importorskip("cupy")
cuda_backend = pytest.importorskip("ember.backends.cuda")

pytestmark = pytest.mark.skipif(
    not (cuda_backend.BACKEND.is_available() and ember.cuda.is_available()
         and get_backend("cuda") is cuda_backend.BACKEND), reason="needs CuPy and a GPU serving device 'cuda'")
needs_cudnn = pytest.mark.skipif(cuda_cudnn.frontend() is None,
                                 reason=f"the cuDNN frontend is not installed ({cuda_cudnn.unavailable_reason()})")


# ---- CUDA graphs ------------------------------------------------------------------------------------------
def test_capture_of_a_scalar_array():
    """The stand-in treats xp.asarray(number) during a capture as a fill kernel: CuPy must accept it and a replay
    must keep the value (if this fails, make standin.py refuse numbers too)."""
    backend = cuda_backend.BACKEND
    x = cupy.arange(4, dtype=cupy.float32)
    backend.capture_begin()
    try:
        y = x * cupy.asarray(0.5, dtype=cupy.float32)
        z = cupy.empty(8, dtype=cupy.float32)  # noise in the pool after the scalar's temporary was freed
        z.fill(7.0)
    except Exception:
        backend.capture_abort()
        raise
    graph = backend.capture_end()
    for _ in range(3):
        graph.replay()
    cupy.cuda.Device().synchronize()
    assert cupy.asnumpy(y).tolist() == [0.0, 0.5, 1.0, 1.5]


def test_capture_refuses_a_host_sync():
    backend = cuda_backend.BACKEND
    x = cupy.arange(4, dtype=cupy.float32)
    backend.capture_begin()
    with pytest.raises(Exception):
        float(x.sum())
    backend.capture_abort()
    assert float(x.sum()) == 6.0 and not backend.is_capturing()


def test_cuda_graph_replays_a_module_forward():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.GELU(), ember.nn.Linear(128, 10)).cuda()
    static = ember.randn(32, 64, device="cuda")
    with ember.no_grad():
        model(static)  # warm-up: kernels compiled, cuBLAS handles made
        g = ember.cuda.CUDAGraph()
        with ember.cuda.graph(g):
            out = model(static)
        for _ in range(3):
            x = ember.randn(32, 64, device="cuda")
            static.copy_(x)
            g.replay()
            np.testing.assert_allclose(out.cpu().numpy(), model(x).cpu().numpy(), rtol=1e-6, atol=1e-6)


def test_compiled_step_replays_as_a_graph_and_equals_eager():
    def make():
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(32, 64), ember.nn.ReLU(), ember.nn.Linear(64, 10)).cuda()
        opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        return m, step

    (m1, s1), (m2, s2) = make(), make()
    compiled = ember.compile(s1, mode="reduce-overhead")
    rng = np.random.default_rng(0)
    for _ in range(8):
        x = ember.tensor(rng.standard_normal((16, 32)).astype(np.float32), device="cuda")
        y = ember.tensor(rng.integers(0, 10, 16), device="cuda")
        np.testing.assert_allclose(compiled(x, y).item(), s2(x, y).item(), rtol=1e-5)
    assert compiled.last.executable.replays >= 5, compiled.last.executable.status
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-4, atol=1e-6)


def test_make_graphed_callables_on_the_gpu():
    ember.manual_seed(0)
    make = lambda: ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.Tanh(), ember.nn.Linear(32, 4)).cuda()
    graphed, eager = make(), make()
    eager.load_state_dict(graphed.state_dict())
    graphed = ember.cuda.make_graphed_callables(graphed, (ember.randn(8, 16, device="cuda", requires_grad=True),))
    for _ in range(3):
        x = ember.randn(8, 16, device="cuda", requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        (graphed(x) ** 2).sum().backward()
        (eager(x2) ** 2).sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), x2.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)


# ---- cuDNN --------------------------------------------------------------------------------------------------
@needs_cudnn
@pytest.mark.parametrize("dtype, tol", [("float32", 1e-4), ("float16", 2e-2), ("bfloat16", 5e-2)])
def test_cudnn_convolutions_match_the_cupy_path(dtype, tol, monkeypatch):
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", False)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((8, 16, 20, 20)).astype(np.float32)

    def run(enabled: bool) -> list:
        monkeypatch.setattr(ember.backends.cudnn, "enabled", enabled)
        ember.manual_seed(0)
        conv = ember.nn.Conv2d(16, 32, 3, stride=2, padding=1).cuda().to(getattr(ember, dtype))
        x = ember.tensor(x0, device="cuda").to(getattr(ember, dtype)).requires_grad_(True)
        y = conv(x)
        (y.float() ** 2).sum().backward()
        return [t.float().cpu().numpy() for t in (y.detach(), x.grad, conv.weight.grad)]

    ops = cuda_backend.BACKEND.native_kernel("cudnn_conv2d").__self__
    with_cudnn, without = run(True), run(False)
    assert {k[0] for k, v in ops.cache.items() if v is not None} >= {"fprop", "dgrad", "wgrad"}, ops.failures
    for a, b in zip(with_cudnn, without):
        scale = np.abs(b).max()
        assert np.abs(a - b).max() <= tol * scale


@needs_cudnn
def test_cudnn_sdpa_and_layer_norm_kernels():
    backend = cuda_backend.BACKEND
    rng = np.random.default_rng(1)
    q, k, v = (cupy.asarray(rng.standard_normal((2, 4, 64, 32)).astype(np.float16)) for _ in range(3))
    out = backend.native_kernel("cudnn_sdpa")(q, k, v, True, 32 ** -0.5)
    assert out is not None, backend.native_kernel("cudnn_sdpa").__self__.failures
    s = (q.astype(cupy.float32) @ k.astype(cupy.float32).swapaxes(-1, -2)) * 32 ** -0.5
    s = cupy.where(cupy.tril(cupy.ones((64, 64), bool)), s, -cupy.inf)
    p = cupy.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(cupy.float32)
    assert float(cupy.abs(out.astype(cupy.float32) - ref).max()) < 2e-2
    x = cupy.asarray(rng.standard_normal((16, 256)).astype(np.float32))
    w, b = cupy.asarray(rng.standard_normal(256).astype(np.float32)), cupy.asarray(rng.standard_normal(256).astype(np.float32))
    y = backend.native_kernel("cudnn_layer_norm")(x, w, b, 1e-5)
    assert y is not None, backend.native_kernel("cudnn_layer_norm").__self__.failures
    ref = (x - x.mean(-1, keepdims=True)) / cupy.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
    assert float(cupy.abs(y - ref).max()) < 1e-4


@needs_cudnn
def test_cudnn_norms_match_the_cupy_path(monkeypatch):
    """BatchNorm2d and LayerNorm forward, running statistics and gradients with cuDNN's training graphs vs CuPy."""
    rng = np.random.default_rng(4)
    x0 = (rng.standard_normal((8, 16, 12, 12)) * 2 + 0.5).astype(np.float32)

    def run(enabled: bool) -> list:
        monkeypatch.setattr(ember.backends.cudnn, "enabled", enabled)
        ember.manual_seed(0)
        bn, ln = ember.nn.BatchNorm2d(16).cuda(), ember.nn.LayerNorm(12).cuda()
        with ember.no_grad():
            for p in list(bn.parameters()) + list(ln.parameters()):
                p.copy_(ember.randn(*p.shape, device="cuda"))
        x = ember.tensor(x0, device="cuda", requires_grad=True)
        y = ln(bn(x))
        (y * y).sum().backward()
        return [t.detach().cpu().numpy() for t in (y, x.grad, bn.running_mean, bn.running_var)] + \
            [p.grad.cpu().numpy() for p in list(bn.parameters()) + list(ln.parameters())]

    with_cudnn, without = run(True), run(False)
    ops = cuda_backend.BACKEND.native_kernel("cudnn_conv2d").__self__
    built = {k[0] for k, v in ops.cache.items() if v is not None}
    assert built >= {"layernorm_train", "layernorm_backward", "batchnorm_train", "batchnorm_backward"}, ops.failures
    for a, b in zip(with_cudnn, without):
        assert np.abs(a - b).max() <= 1e-3 * max(1.0, np.abs(b).max())


@needs_cudnn
def test_cudnn_attention_training_graphs():
    backend = cuda_backend.BACKEND
    rng = np.random.default_rng(5)
    q, k, v, g = (cupy.asarray(rng.standard_normal((2, 4, 64, 32)).astype(np.float16)) for _ in range(4))
    result = backend.native_kernel("cudnn_sdpa_train")(q, k, v, True, 32 ** -0.5)
    ops = backend.native_kernel("cudnn_conv2d").__self__
    assert result is not None, ops.failures
    out, stats = result
    qe, ke, ve = (ember.tensor(cupy.asnumpy(a).astype(np.float32), device="cuda", requires_grad=True)
                  for a in (q, k, v))
    ref = ember.nn.functional.scaled_dot_product_attention(qe, ke, ve, is_causal=True)
    ref.backward(ember.tensor(cupy.asnumpy(g).astype(np.float32), device="cuda"))
    assert float(cupy.abs(out.astype(cupy.float32) - ref.detach()._data).max()) < 2e-2
    s = (q.astype(cupy.float32) @ k.astype(cupy.float32).swapaxes(-1, -2)) * 32 ** -0.5
    s = cupy.where(cupy.tril(cupy.ones((64, 64), bool)), s, -cupy.inf)
    lse = s.max(-1, keepdims=True) + cupy.log(cupy.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True))
    assert float(cupy.abs(stats - lse).max()) < 1e-2  # cuDNN's Stats: the rows' log-sum-exp
    grads = backend.native_kernel("cudnn_sdpa_backward")(q, k, v, out, g, stats, True, 32 ** -0.5)
    assert grads is not None, ops.failures
    for got, want in zip(grads, (qe.grad, ke.grad, ve.grad)):
        assert float(cupy.abs(got.astype(cupy.float32) - want._data).max()) < 5e-2 * max(1.0, float(abs(want).max()))


@needs_cudnn
def test_sdpa_through_cudnn_matches_the_composite(monkeypatch):
    """F.scaled_dot_product_attention on bf16 (B, H, S, D): cuDNN's fused kernels (ember/cuda_attention.py) vs the
    composite with cuDNN off, forward and the three gradients."""
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((2, 4, 128, 64)).astype(np.float32) for _ in range(3)]

    def run(enabled: bool) -> list:
        monkeypatch.setattr(ember.backends.cudnn, "enabled", enabled)
        q, k, v = (ember.tensor(a, device="cuda").to(ember.bfloat16).requires_grad_(True) for a in arrays)
        out = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out.float() ** 2).sum().backward()
        return [t.float().cpu().numpy() for t in (out.detach(), q.grad, k.grad, v.grad)], type(out.grad_fn).__name__

    (fused, fused_fn), (plain, plain_fn) = run(True), run(False)
    assert "CudnnAttention" in fused_fn and "CudnnAttention" not in plain_fn, (fused_fn, plain_fn)
    for a, b in zip(fused, plain):
        assert np.abs(a - b).max() <= 3e-2 * max(1.0, np.abs(b).max())


def test_compiled_step_with_dropout_and_capturable_adamw_replays_equal_to_kernel_by_kernel():
    """Random numbers and Adam in a CUDA-graph replay: seeds read from device memory, the step count on the device."""
    def run(mode):
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(32, 64), ember.nn.Dropout(0.2), ember.nn.Linear(64, 10)).cuda()
        opt = ember.optim.AdamW(m.parameters(), lr=1e-3, capturable=True)

        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        compiled = ember.compile(step, mode=mode) if mode else ember.compile(step, measure=False)
        rng = np.random.default_rng(1)
        ember.manual_seed(7)
        losses = [compiled(ember.tensor(rng.standard_normal((16, 32)).astype(np.float32), device="cuda"),
                           ember.tensor(rng.integers(0, 10, 16), device="cuda")).item() for _ in range(8)]
        return compiled, losses, [p.detach().cpu().numpy() for p in m.parameters()]

    graphed, l1, p1 = run("reduce-overhead")
    _, l2, p2 = run(None)
    assert graphed.last.executable.status.startswith("CUDA graph: replayed"), graphed.last.executable.status
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    for a, b in zip(p1, p2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# ---- one ReductionKernel ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [None, 1])
def test_fused_reduction_is_one_kernel_and_matches_eager(dim):
    x, y = ember.randn(300, 500, device="cuda"), ember.randn(300, 500, device="cuda")
    f = lambda x, y: (ember.tanh(x * y) * 0.5).sum() if dim is None else (ember.tanh(x * y) * 0.5).mean(dim=dim)
    compiled = ember.compile(f, fallback="raise", measure=False)
    for _ in range(3):
        got = compiled(x, y)
    np.testing.assert_allclose(got.cpu().numpy(), f(x, y).cpu().numpy(), rtol=1e-4, atol=1e-4)
    fused = [n.op.impl for n in compiled.last.executable.nodes if n.op.category == "fused"]
    assert fused and all(type(k) is cuda_backend.FusedCudaKernel for k in fused), fused
    kernels = [k for impl in fused for k in impl.by_dtypes.values()]
    assert any(type(k) is cuda_backend.SingleReduction for k in kernels), kernels
