"""ember/backends/cuda_cudnn.py against a fake ``cudnn`` frontend (tests/cuda/fake_cudnn.py): the graph each
op builds (tensor dims, strides, data types; the operation and its geometry; outputs; build steps), the cache
by signature, the fallback when cuDNN refuses, the import failure path, and, on the stand-in device, the hooks
in ember/ops/conv.py (forward and both gradients through cuDNN, compared with PyTorch's CPU convolution).
Whether cuDNN itself computes the right numbers is tests/backends/test_cuda_on_gpu.py's job on a GPU."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

import ember
from ember.backends import cuda_cudnn, cudnn as cudnn_flags, standin
from ember.testing import standin_cuda

import fake_cudnn  # noqa: E402  (tests/cuda is on the path: pytest puts a test file's folder there)


def _host_cupy() -> types.SimpleNamespace:
    """The CuPy calls CudnnOps makes, on NumPy (arrays on the host)."""
    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: types.SimpleNamespace(ptr=1234))
    return types.SimpleNamespace(empty=np.empty, uint8=np.uint8, cuda=cuda)


@pytest.fixture()
def ops():
    fake_cudnn.GRAPHS.clear()
    fake_cudnn.REFUSE.clear()
    return cuda_cudnn.CudnnOps(fake_cudnn, _host_cupy())


def _conv_ref(x, w, stride, padding, dilation):
    xt = torch.nn.functional.pad(torch.from_numpy(x).double(), (padding[2], padding[3], padding[0], padding[1]))
    return torch.nn.functional.conv2d(xt, torch.from_numpy(w).double(), stride=stride, dilation=dilation).numpy()


def test_conv_forward_graph_and_numbers(ops):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    y = ops.conv2d(x, w, (2, 1), (1, 2, 0, 1), (1, 2), 1)
    np.testing.assert_allclose(y, _conv_ref(x, w, (2, 1), (1, 2, 0, 1), (1, 2)), rtol=1e-5, atol=1e-5)
    (graph,) = fake_cudnn.GRAPHS
    (kind, operands, attrs, (out,)), = graph.ops
    assert kind == "conv_fprop" and graph.io_data_type == "FLOAT" and graph.compute_data_type == "FLOAT"
    assert (operands["image"].dim, operands["image"].stride) == ([2, 3, 9, 8], [216, 72, 8, 1])
    assert (operands["weight"].dim, operands["weight"].stride) == ([4, 3, 3, 2], [18, 6, 2, 1])
    assert attrs["pre_padding"] == [1, 0] and attrs["post_padding"] == [2, 1]  # ember's (top, bottom, left, right)
    assert attrs["stride"] == [2, 1] and attrs["dilation"] == [1, 2]
    assert out.is_output and out.dim == list(y.shape) and out.stride == [s // 4 for s in y.strides]
    assert graph.steps[:2] == ["validate", "build_operation_graph"]
    assert ("create_execution_plans", ("A", "FALLBACK")) in graph.steps and graph.steps[-1] == "build_plans"
    assert fake_cudnn.STREAMS[-1] == 1234  # executed on the current stream (CUDA-graph capture sees it)


def test_non_contiguous_inputs_are_declared_with_their_strides(ops):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32).transpose(0, 3, 1, 2)  # NHWC memory, NCHW dims
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = ops.conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_allclose(y, _conv_ref(np.ascontiguousarray(x), w, (1, 1), (1, 1, 1, 1), (1, 1)), rtol=1e-5,
                               atol=1e-5)
    image = fake_cudnn.GRAPHS[0].ops[0][1]["image"]
    assert image.stride == [90, 1, 18, 3]


def test_gradients_graphs_and_numbers(ops):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 5, 4, 4)).astype(np.float32)
    geometry = ((2, 2), (1, 1, 1, 1), (1, 1))
    xt, wt = torch.from_numpy(x).double().requires_grad_(), torch.from_numpy(w).double().requires_grad_()
    torch.nn.functional.conv2d(xt, wt, stride=2, padding=1).backward(torch.from_numpy(g).double())
    np.testing.assert_allclose(ops.conv2d_input_grad(g, w, x.shape, *geometry, 1), xt.grad.numpy(), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(ops.conv2d_weight_grad(x, g, w.shape, *geometry, 1), wt.grad.numpy(), rtol=1e-5,
                               atol=1e-4)
    dgrad, wgrad = fake_cudnn.GRAPHS
    assert dgrad.ops[0][0] == "conv_dgrad" and dgrad.ops[0][3][0].dim == [2, 3, 7, 7]
    assert wgrad.ops[0][0] == "conv_wgrad" and wgrad.ops[0][3][0].dim == [5, 3, 3, 3]


def test_graphs_are_cached_by_signature(ops):
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    for _ in range(3):
        ops.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    assert len(fake_cudnn.GRAPHS) == 1 and fake_cudnn.GRAPHS[0].executions == 3
    ops.conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)  # another padding: another graph
    ops.conv2d(x.astype(np.float16), w.astype(np.float16), (1, 1), (0, 0, 0, 0), (1, 1), 1)
    assert len(fake_cudnn.GRAPHS) == 3 and fake_cudnn.GRAPHS[2].io_data_type == "HALF"


def test_tf32_flag_deselects_tensor_core_engines_for_float32(ops, monkeypatch):
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    monkeypatch.setattr(cudnn_flags, "allow_tf32", False)
    ops.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    monkeypatch.setattr(cudnn_flags, "allow_tf32", True)
    ops.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    off, on = fake_cudnn.GRAPHS
    assert ("deselect_numeric_notes", ("TENSOR_CORE",)) in off.steps
    assert not any(isinstance(s, tuple) and s[0] == "deselect_numeric_notes" for s in on.steps)


def test_refused_signatures_fall_back_and_stay_refused(ops):
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    fake_cudnn.REFUSE.add("conv_fprop")
    assert ops.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1) is None
    assert ops.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1) is None
    assert len(fake_cudnn.GRAPHS) == 1  # not rebuilt: the refusal is cached
    assert "no engine" in next(iter(ops.failures.values()))
    assert ops.conv2d(x, np.ones((2, 1, 3, 3), np.float32), (1, 1), (0, 0, 0, 0), (1, 1), 2) is None  # groups
    assert ops.conv2d(x.astype(np.int32), w.astype(np.int32), (1, 1), (0, 0, 0, 0), (1, 1), 1) is None  # no type
    assert ops.conv2d(np.broadcast_to(x[:, :1], x.shape), w, (1, 1), (0, 0, 0, 0), (1, 1), 1) is None  # 0 stride
    assert len(fake_cudnn.GRAPHS) == 1


def test_sdpa_inference_graph_and_numbers(ops):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(np.float16) for _ in range(3))
    assert ops.sdpa(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), True, 0.5) is None
    out = ops.sdpa(q, k, v, True, 0.5)
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a).double() for a in (q, k, v)),
                                                           is_causal=True, scale=0.5)
    np.testing.assert_allclose(out.astype(np.float64), ref.numpy(), rtol=2e-3, atol=2e-3)
    (kind, operands, attrs, outs), = fake_cudnn.GRAPHS[0].ops
    assert kind == "sdpa" and attrs["use_causal_mask"] is True and attrs["attn_scale"] == 0.5
    assert outs[0].dim == [2, 3, 5, 4] and outs[0].data_type == "HALF"


def test_layer_norm_inference_graph_and_numbers(ops):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    w, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    out = ops.layer_norm(x, w, b, 1e-5)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x).double(), (6,), torch.from_numpy(w).double(),
                                         torch.from_numpy(b).double(), 1e-5)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-5)
    operands = fake_cudnn.GRAPHS[0].ops[0][1]
    assert operands["input"].dim == [12, 6, 1, 1] and operands["scale"].dim == [1, 6, 1, 1]


def test_import_failure_and_impostor_modules(monkeypatch):
    cuda_cudnn.reset()
    monkeypatch.setitem(sys.modules, "cudnn", None)  # import cudnn raises ImportError
    try:
        assert cuda_cudnn.frontend() is None and "ModuleNotFoundError" in cuda_cudnn.unavailable_reason()
        cuda_cudnn.reset()
        monkeypatch.setitem(sys.modules, "cudnn", types.ModuleType("cudnn"))  # some other package named cudnn
        assert cuda_cudnn.frontend() is None and "not the cuDNN frontend" in cuda_cudnn.unavailable_reason()
        cuda_cudnn.reset()
        monkeypatch.setitem(sys.modules, "cudnn", fake_cudnn)
        assert cuda_cudnn.frontend() is fake_cudnn
    finally:
        cuda_cudnn.reset()
    assert ember.backends.cudnn.is_available() is False  # no GPU here, whatever the frontend
    assert ember.backends.cudnn.version() is None


def test_conv_layers_use_cudnn_on_the_device_and_match_torch(monkeypatch):
    """The hooks in ember/ops/conv.py: forward, data and weight gradients go through the cuDNN kernels when the
    backend offers them (here: the stand-in device offering the fake), the bias added after."""
    fake_cudnn.GRAPHS.clear()
    device_cupy = types.SimpleNamespace(empty=standin.xp.empty, uint8=np.uint8, cuda=_host_cupy().cuda)
    kernels = cuda_cudnn.CudnnOps(fake_cudnn, device_cupy).kernels()
    monkeypatch.setattr(type(standin.BACKEND), "native_kernel", lambda self, name: kernels.get(name))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    conv_t = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1).double()
    with standin_cuda():
        conv_e = ember.nn.Conv2d(3, 4, 3, stride=2, padding=1).cuda()
        with ember.no_grad():
            conv_e.weight.copy_(ember.tensor(conv_t.weight.detach().numpy().astype(np.float32), device="cuda"))
            conv_e.bias.copy_(ember.tensor(conv_t.bias.detach().numpy().astype(np.float32), device="cuda"))
        xe = ember.tensor(x, device="cuda", requires_grad=True)
        ye = conv_e(xe)
        (ye * ye).sum().backward()
        xt = torch.from_numpy(x).double().requires_grad_()
        yt = conv_t(xt)
        (yt * yt).sum().backward()
        np.testing.assert_allclose(ye.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(xe.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(conv_e.weight.grad.cpu().numpy(), conv_t.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert sorted(g.ops[0][0] for g in fake_cudnn.GRAPHS) == ["conv_dgrad", "conv_fprop", "conv_wgrad"]
