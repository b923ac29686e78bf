"""CUDA graphs (ember/cuda_graphs.py, ember/graph/cuda_graph_step.py) on the stand-in device, whose capture
model (ember/backends/standin_capture.py) records kernels, refuses what CUDA refuses and leaves memory as an
unexecuted capture does. References: the same code run eagerly (bit for bit: a replay runs the same NumPy
operations), PyTorch's CPU build for the no-device refusals."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

import ember
from ember.backends import capture_state, standin
from ember.backends.standin_capture import CaptureError
from ember.testing import standin_cuda


@pytest.fixture()
def cuda():
    with standin_cuda():
        yield
    assert not capture_state.ACTIVE and not standin.BACKEND.is_capturing()


# ---- the capture model ----------------------------------------------------------------------------------
def test_capture_runs_nothing_and_replay_reads_the_captured_memory():
    xp, backend = standin.xp, standin.BACKEND
    x = xp.asarray(np.arange(4.0))
    state = xp.zeros(4)
    backend.capture_begin()
    y = xp.tanh(x) * 2.0 + 1.0
    state += y  # an in-place write to memory made before the capture
    total = y.sum()
    graph = backend.capture_end()
    assert bool(xp.isnan(y).all()) and bool(xp.isnan(total))  # made during the capture: garbage until replayed
    assert state.tolist() == [0.0] * 4  # the write did not happen
    graph.replay()
    want = np.tanh(np.arange(4.0)) * 2.0 + 1.0
    assert y.get().tolist() == want.tolist() and float(total) == want.sum()
    x[...] = 1.0  # new input values in the same memory
    graph.replay()
    np.testing.assert_array_equal(state.get(), want + np.tanh(np.ones(4)) * 2.0 + 1.0)


@pytest.mark.parametrize("refused, what", [
    (lambda xp, x: x.sum().item(), "item()"),
    (lambda xp, x: bool((x > 0).all()), "bool(array)"),
    (lambda xp, x: x.get(), "device-to-host"),
    (lambda xp, x: xp.nonzero(x), "nonzero"),
    (lambda xp, x: x[x > 0], "boolean mask"),
    (lambda xp, x: xp.asarray(np.ones(4)), "host-to-device"),
    (lambda xp, x: standin.BACKEND.make_rng(0).random((4,)), "random numbers"),
])
def test_capture_refuses_what_cuda_refuses_and_is_invalidated(refused, what):
    xp, backend = standin.xp, standin.BACKEND
    x = xp.asarray(np.linspace(-1, 1, 4))
    backend.capture_begin()
    try:
        with pytest.raises(CaptureError, match=re.escape(what)):
            refused(xp, x)
    finally:
        with pytest.raises(CaptureError, match="cudaErrorStreamCaptureInvalidated"):
            backend.capture_end()
    assert not capture_state.ACTIVE
    assert x.get().tolist() == np.linspace(-1, 1, 4).tolist()


def test_views_record_nothing_and_gathers_are_kernels():
    xp, backend = standin.xp, standin.BACKEND
    x = xp.asarray(np.arange(6.0).reshape(2, 3))
    backend.capture_begin()
    v = x[:, 1]  # a view: aliases x, so a replay needs no kernel for it
    g = x[:, [2, 0]]  # a gather: a new array
    graph = backend.capture_end()
    assert len(graph.kernels) == 1
    x[...] = 10.0
    assert v.tolist() == [10.0, 10.0]
    graph.replay()
    assert g.tolist() == [[10.0, 10.0], [10.0, 10.0]]


# ---- torch.cuda.CUDAGraph / graph / make_graphed_callables -------------------------------------------------
def test_cuda_graph_context_like_torch(cuda):
    x = ember.ones(3, device="cuda")
    g = ember.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="nothing was captured"):
        g.replay()
    with ember.cuda.graph(g):
        assert ember.cuda.is_current_stream_capturing()
        y = (x * 2).exp()
    assert not ember.cuda.is_current_stream_capturing()
    x.copy_(ember.tensor([0.0, 1.0, 2.0], device="cuda"))
    g.replay()
    np.testing.assert_array_equal(y.cpu().numpy(), np.exp(np.array([0.0, 2.0, 4.0], dtype=np.float32)))


def test_an_error_inside_the_capture_ends_it_and_propagates(cuda):
    x = ember.ones(3, device="cuda")
    g = ember.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match="item"):
        with ember.cuda.graph(g):
            (x * 2).sum().item()
    assert not ember.cuda.is_current_stream_capturing()
    assert (x * 2).sum().item() == 6.0  # the device works after the failed capture


def test_make_graphed_callables_matches_eager_forward_and_backward(cuda):
    ember.manual_seed(0)
    make = lambda: ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2)).cuda()
    graphed, eager = make(), make()
    eager.load_state_dict(graphed.state_dict())
    sample = ember.randn(5, 4, device="cuda", requires_grad=True)
    graphed = ember.cuda.make_graphed_callables(graphed, (sample,))
    for step in range(3):
        x = ember.randn(5, 4, device="cuda", requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        out, out2 = graphed(x), eager(x2)
        (out ** 2).sum().backward()
        (out2 ** 2).sum().backward()
        np.testing.assert_array_equal(out.detach().cpu().numpy(), out2.detach().cpu().numpy())
        np.testing.assert_array_equal(x.grad.cpu().numpy(), x2.grad.cpu().numpy())
        for p, q in zip(graphed.parameters(), eager.parameters()):  # accumulated over the steps, as eager
            np.testing.assert_array_equal(p.grad.cpu().numpy(), q.grad.cpu().numpy())


def test_without_a_cuda_device_the_names_refuse_like_torch_cpu():
    if ember.cuda.is_available():  # EMBER_CUDA_STANDIN=1 (the GPU session's dry run) or a GPU
        pytest.skip("a CUDA device serves this process")
    for name in ("CUDAGraph", "MemPool", "graph_pool_handle", "make_graphed_callables"):
        with pytest.raises(RuntimeError):
            getattr(torch.cuda, name)(*(() if name != "make_graphed_callables" else (None, ())))
        with pytest.raises(RuntimeError, match=f"torch.cuda.{name}: ember captures CUDA graphs only on a CUDA"):
            getattr(ember.cuda, name)(*(() if name != "make_graphed_callables" else (None, ())))
    assert ember.cuda.is_current_stream_capturing() is False


# ---- ember.compile(mode="reduce-overhead") ------------------------------------------------------------------
def _training(opt: str, **kwargs):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3)).cuda()
    optimizer = getattr(ember.optim, opt)(model.parameters(), **kwargs)

    def step(x, y):
        optimizer.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return model, step


def _batches(n: int):
    rng = np.random.default_rng(0)
    return [(ember.tensor(rng.standard_normal((8, 4)).astype(np.float32), device="cuda"),
             ember.tensor(rng.integers(0, 3, 8), device="cuda")) for _ in range(n)]


def test_compiled_training_step_replays_a_graph_and_equals_eager(cuda):
    m1, s1 = _training("SGD", lr=0.1, momentum=0.9)
    m2, s2 = _training("SGD", lr=0.1, momentum=0.9)
    compiled = ember.compile(s1, mode="reduce-overhead")
    for x, y in _batches(6):
        assert compiled(x, y).item() == s2(x, y).item()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    executable = compiled.last.executable
    assert executable.captures == 1 and executable.replays == 3, executable.status
    assert "replayed 3 time(s)" in executable.status


def test_a_step_that_cannot_be_captured_runs_kernel_by_kernel_and_says_why(cuda):
    m1, s1 = _training("Adam", lr=0.01)  # its step count lives on the CPU and is copied in each step
    m2, s2 = _training("Adam", lr=0.01)
    compiled = ember.compile(s1, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x, y in _batches(4):
            assert compiled(x, y).item() == s2(x, y).item()
    status = compiled.last.executable.status
    assert status.startswith("CUDA graph: off (capture failed") and "host-to-device" in status
    assert any("reduce-overhead" in str(w.message) and "kernel by kernel" in str(w.message) for w in caught)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())


def test_replaced_state_arrays_are_captured_again(cuda):
    m1, s1 = _training("SGD", lr=0.1)
    m2, s2 = _training("SGD", lr=0.1)
    compiled = ember.compile(s1, mode="reduce-overhead")
    batches = _batches(5)
    for x, y in batches[:3]:
        compiled(x, y), s2(x, y)
    with ember.no_grad():  # p.data = ...: the graph captured the old array
        for p, q in zip(m1.parameters(), m2.parameters()):
            p.data = p.data * 0.5
            q.data = q.data * 0.5
    for x, y in batches[3:]:
        assert compiled(x, y).item() == s2(x, y).item()
    assert compiled.last.executable.captures == 2


def test_on_the_cpu_reduce_overhead_compiles_as_usual():
    w = ember.ones(3, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        with ember.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    f = ember.compile(step, mode="reduce-overhead")
    assert [round(f(ember.ones(3)).item(), 3) for _ in range(3)] == [3.0, 2.7, 2.4]
    assert "CUDA graphs replay CUDA work only" in f.last.executable.status


def test_a_cnn_step_replays_a_graph_and_equals_eager(cuda):
    """conv, max pool, relu and cross entropy: each used to read device data on the host in a fast-path test (a
    sync per call on a GPU); under capture they take their general path."""
    def make():
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Conv2d(1, 4, 3, padding=1), ember.nn.ReLU(), ember.nn.MaxPool2d(2),
                                    ember.nn.Flatten(), ember.nn.Linear(4 * 6 * 6, 3)).cuda()
        opt = ember.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return model, step

    (m1, s1), (m2, s2) = make(), make()
    compiled = ember.compile(s1, mode="reduce-overhead")
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = ember.tensor(rng.standard_normal((4, 1, 12, 12)).astype(np.float32), device="cuda")
        y = ember.tensor(rng.integers(0, 3, 4), device="cuda")
        np.testing.assert_allclose(compiled(x, y).item(), s2(x, y).item(), rtol=1e-6)
    assert compiled.last.executable.replays == 1, compiled.last.executable.status  # eager, trace, capture, replay
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-5, atol=1e-7)


def test_whole_network_capture_as_in_torchs_docs(cuda):
    """PyTorch's documented pattern: warm up eagerly, capture forward, backward and optimizer.step() in one graph,
    then copy each batch into the static tensors and replay; equal to eager steps bit for bit."""
    def make():
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3)).cuda()
        return model, ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def eager_step(model, opt, x, y):
        opt.zero_grad(set_to_none=True)
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    (m1, o1), (m2, o2) = make(), make()
    batches = _batches(6)
    for x, y in batches[:2]:  # warm-up: momentum buffers exist before the capture
        eager_step(m1, o1, x, y), eager_step(m2, o2, x, y)
    static_x, static_y = batches[2][0].clone(), batches[2][1].clone()
    g = ember.cuda.CUDAGraph()
    o1.zero_grad(set_to_none=True)
    with ember.cuda.graph(g):
        static_loss = ember.nn.functional.cross_entropy(m1(static_x), static_y)
        static_loss.backward()
        o1.step()
    for x, y in batches[2:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        assert static_loss.item() == eager_step(m2, o2, x, y).item()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())


def test_a_compiled_module_replays_forward_and_backward_graphs_in_an_eager_loop(cuda):
    """torch.compile(model, mode="reduce-overhead") with an eager loss, backward and Adam: the module's forward and
    backward graphs each replay (layer norm included), equal to eager bit for bit."""
    def make():
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(4, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                                    ember.nn.Linear(16, 3)).cuda()
        return model, ember.optim.Adam(model.parameters(), lr=0.01)

    (m1, o1), (m2, o2) = make(), make()
    compiled = ember.compile(m1, mode="reduce-overhead")
    for k, (x, y) in enumerate(_batches(6)):
        for model, opt in ((compiled, o1), (m2, o2)):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        for p, q in zip(m1.parameters(), m2.parameters()):
            np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    forward, backward = compiled.last.executable, compiled.last.backward_executable
    assert forward.replays == 3 and backward.replays == 3, (forward.status, backward.status)


@pytest.mark.parametrize("offset", [0.0, 1e7, 3e38])
def test_layer_norm_under_capture_gives_eager_values(offset):
    """Layer norm's rare cases (a mean far above the spread: the correction pass; squares that overflow: the scaled
    path) are where() selections under capture instead of host tests: forward and backward equal eager bit for bit."""
    from ember.ops import nn_ops

    xp, backend = standin.xp, standin.BACKEND
    rng = np.random.default_rng(2)
    host = (offset + rng.standard_normal((5, 8)) * (1.0 if offset < 1e30 else 1e37)).astype(np.float32)
    host[1] = rng.standard_normal(8).astype(np.float32)  # one ordinary row among them
    x, w, b = xp.asarray(host), xp.asarray(rng.standard_normal(8).astype(np.float32)), xp.zeros(8, np.float32)
    g = xp.asarray(rng.standard_normal((5, 8)).astype(np.float32))
    with np.errstate(all="ignore"):
        eager = nn_ops._layer_norm_impl(xp, x, w, b, count=1, eps=1e-5, has_weight=True)
        eager_grads = nn_ops._layer_norm_backward_impl(xp, g, x, eager[1], eager[2], w, count=1)
        backend.capture_begin()
        try:
            captured = nn_ops._layer_norm_impl(xp, x, w, b, count=1, eps=1e-5, has_weight=True)
            captured_grads = nn_ops._layer_norm_backward_impl(xp, g, x, captured[1], captured[2], w, count=1)
        finally:
            graph = backend.capture_end()
        graph.replay()
    for got, want in zip(captured + captured_grads, eager + eager_grads):
        np.testing.assert_array_equal(got.get(), want.get())


def test_a_step_drawing_random_numbers_replays_unless_the_backend_reads_no_device_seeds(cuda, monkeypatch):
    """Random numbers are captured (tests/cuda/test_cuda_graph_random.py compares them with kernel-by-kernel
    runs); a backend whose generators cannot read seeds from device memory runs such steps kernel by kernel."""
    for device_seeds in (True, False):
        monkeypatch.setattr(type(standin.BACKEND), "device_seeded_rng", device_seeds)
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(4, 16), ember.nn.Dropout(0.5), ember.nn.Linear(16, 3)).cuda()
        optimizer = ember.optim.SGD(model.parameters(), lr=0.1)

        def noisy(x, y):
            optimizer.zero_grad()
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        compiled = ember.compile(noisy, mode="reduce-overhead")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            losses = [compiled(x, y).item() for x, y in _batches(5)]
        assert all(np.isfinite(losses))
        status = compiled.last.executable.status
        if device_seeds:
            assert status.startswith("CUDA graph: replayed"), status
        else:
            assert status.startswith("CUDA graph: off") and "random numbers" in status, status
