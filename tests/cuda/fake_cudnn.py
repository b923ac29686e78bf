"""A fake ``cudnn`` frontend module for CPU tests of ember/backends/cuda_cudnn.py.

It records the graph ember builds (tensors with their dims, strides, data types; operation nodes with
their arguments; outputs; the build steps) and checks what cuDNN checks at validate time (an operation's
operands are tensors of this graph, every output has dims, strides and a type, strides are consistent
with dims). ``execute`` computes the operation with PyTorch on the CPU from the variant pack's arrays,
reading each tensor through the dims and strides the graph declared (so a wrong stride gives wrong
numbers), and writes the outputs through their declared strides. It tests ember's plumbing, not cuDNN.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np
import torch

data_type = types.SimpleNamespace(FLOAT="FLOAT", HALF="HALF", BFLOAT16="BFLOAT16", DOUBLE="DOUBLE")
heur_mode = types.SimpleNamespace(A="A", B="B", FALLBACK="FALLBACK")
numerical_note = types.SimpleNamespace(TENSOR_CORE="TENSOR_CORE")
norm_forward_phase = types.SimpleNamespace(INFERENCE="INFERENCE", TRAINING="TRAINING")
_NUMPY = {"FLOAT": np.float32, "HALF": np.float16, "DOUBLE": np.float64}


class cudnnGraphNotSupportedError(RuntimeError):  # noqa: N801 - the frontend's name
    pass


GRAPHS: list = []  # every graph built (tests read them)
STREAMS: list = []
REFUSE: set = set()  # operation kinds whose build raises cudnnGraphNotSupportedError


def create_handle() -> str:
    return "handle"


def set_stream(handle: Any, stream: int) -> None:
    STREAMS.append(stream)


def backend_version() -> int:
    return 91000


class Tensor:
    def __init__(self, graph: "pygraph", name: str, dim: list | None, stride: list | None, data_type: Any,
                 by_value: bool = False) -> None:
        self.graph, self.name, self.dim, self.stride, self.data_type = graph, name, dim, stride, data_type
        self.by_value, self.is_output = by_value, False

    def set_output(self, flag: bool) -> "Tensor":
        self.is_output = flag
        return self

    def set_dim(self, dim: list) -> "Tensor":
        self.dim = list(dim)
        return self

    def set_stride(self, stride: list) -> "Tensor":
        self.stride = list(stride)
        return self

    def set_data_type(self, value: Any) -> "Tensor":
        self.data_type = value
        return self

    def __repr__(self) -> str:
        return f"Tensor({self.name}, dim={self.dim}, stride={self.stride}, {self.data_type})"


class pygraph:  # noqa: N801 - the frontend's name
    def __init__(self, io_data_type: Any = None, intermediate_data_type: Any = None, compute_data_type: Any = None,
                 handle: Any = None, name: str = "") -> None:
        self.io_data_type, self.compute_data_type, self.handle = io_data_type, compute_data_type, handle
        self.tensors: list[Tensor] = []
        self.ops: list[tuple] = []
        self.steps: list = []
        self.executions = 0
        GRAPHS.append(self)

    def tensor(self, name: str = "", dim: list | None = None, stride: list | None = None, data_type: Any = None,
               is_pass_by_value: bool = False) -> Tensor:
        assert data_type in vars(globals()["data_type"]).values(), data_type
        t = Tensor(self, name, list(dim), list(stride), data_type, is_pass_by_value)
        self.tensors.append(t)
        return t

    def _node(self, kind: str, operands: dict, attrs: dict, n_out: int = 1) -> Any:
        for key, t in operands.items():
            assert isinstance(t, Tensor) and t.graph is self, f"{kind}: operand {key} is not a tensor of this graph"
        outs = [Tensor(self, f"{kind}_out{k}", None, None, self.io_data_type) for k in range(n_out)]
        self.tensors += outs
        self.ops.append((kind, operands, attrs, outs))
        return outs[0] if n_out == 1 else tuple(outs)

    def conv_fprop(self, image: Tensor, weight: Tensor, **attrs: Any) -> Tensor:
        return self._node("conv_fprop", {"image": image, "weight": weight}, attrs)

    def conv_dgrad(self, loss: Tensor, filter: Tensor, **attrs: Any) -> Tensor:  # noqa: A002 - the frontend's name
        return self._node("conv_dgrad", {"loss": loss, "filter": filter}, attrs)

    def conv_wgrad(self, image: Tensor, loss: Tensor, **attrs: Any) -> Tensor:
        return self._node("conv_wgrad", {"image": image, "loss": loss}, attrs)

    def sdpa(self, q: Tensor, k: Tensor, v: Tensor, **attrs: Any) -> tuple:
        return self._node("sdpa", {"q": q, "k": k, "v": v}, attrs, 2)

    def layernorm(self, input: Tensor, scale: Tensor, bias: Tensor, epsilon: Tensor, **attrs: Any) -> tuple:  # noqa: A002
        return self._node("layernorm", {"input": input, "scale": scale, "bias": bias, "epsilon": epsilon}, attrs, 3)

    def layernorm_backward(self, grad: Tensor, input: Tensor, scale: Tensor, mean: Tensor,  # noqa: A002
                           inv_variance: Tensor, **attrs: Any) -> tuple:
        return self._node("layernorm_backward", {"grad": grad, "input": input, "scale": scale, "mean": mean,
                                                 "inv_variance": inv_variance}, attrs, 3)

    def batchnorm(self, input: Tensor, scale: Tensor, bias: Tensor, in_running_mean: Tensor,  # noqa: A002
                  in_running_var: Tensor, epsilon: Tensor, momentum: Tensor, **attrs: Any) -> tuple:
        return self._node("batchnorm", {"input": input, "scale": scale, "bias": bias, "in_running_mean": in_running_mean,
                                        "in_running_var": in_running_var, "epsilon": epsilon, "momentum": momentum},
                          attrs, 5)

    def batchnorm_backward(self, grad: Tensor, input: Tensor, scale: Tensor, mean: Tensor,  # noqa: A002
                           inv_variance: Tensor, **attrs: Any) -> tuple:
        return self._node("batchnorm_backward", {"grad": grad, "input": input, "scale": scale, "mean": mean,
                                                 "inv_variance": inv_variance}, attrs, 3)

    def sdpa_backward(self, q: Tensor, k: Tensor, v: Tensor, o: Tensor, dO: Tensor, stats: Tensor,  # noqa: N803
                      **attrs: Any) -> tuple:
        return self._node("sdpa_backward", {"q": q, "k": k, "v": v, "o": o, "dO": dO, "stats": stats}, attrs, 3)

    # ---- building ---------------------------------------------------------------------------------------
    def validate(self) -> None:
        self.steps.append("validate")
        for kind, _, _, outs in self.ops:
            for t in outs:
                if t.is_output:
                    assert t.dim and t.stride and len(t.dim) == len(t.stride), f"{kind}: output {t} incomplete"
        for t in self.tensors:
            if t.dim is not None and t.stride is not None:
                assert all(s > 0 for s in t.stride), f"non-positive stride: {t}"

    def build_operation_graph(self) -> None:
        self.steps.append("build_operation_graph")
        for kind, *_ in self.ops:
            if kind in REFUSE:
                raise cudnnGraphNotSupportedError(f"{kind}: no engine (the test said so)")

    def create_execution_plans(self, modes: list) -> None:
        self.steps.append(("create_execution_plans", tuple(modes)))

    def deselect_numeric_notes(self, notes: list) -> None:
        self.steps.append(("deselect_numeric_notes", tuple(notes)))

    def check_support(self) -> None:
        self.steps.append("check_support")

    def build_plans(self) -> None:
        self.steps.append("build_plans")

    def get_workspace_size(self) -> int:
        return 64

    # ---- running ----------------------------------------------------------------------------------------------
    def execute(self, pack: dict, workspace: Any, handle: Any = None) -> None:
        assert "build_plans" in self.steps, "execute before build"
        self.executions += 1
        (kind, operands, attrs, outs), = self.ops
        read = {k: _read(t, pack[t]) for k, t in operands.items()}
        training = _TRAINING.get(kind)
        if kind == "layernorm" and attrs["norm_forward_phase"] == "TRAINING":
            training = _layernorm_train
        if kind == "sdpa" and attrs.get("generate_stats") is True:
            training = _sdpa_train
        if training is not None:
            for t, value in zip(outs, training(read, attrs, operands)):
                if t.is_output:
                    _write(t, pack[t], value)
            return
        pre, post = attrs.get("pre_padding"), attrs.get("post_padding")
        if kind.startswith("conv"):
            assert pre == post or kind == "conv_fprop", "asymmetric padding in a backward: test it here"
            padding = tuple(pre)
            geometry = dict(stride=tuple(attrs["stride"]), dilation=tuple(attrs["dilation"]))
        if kind == "conv_fprop":
            x = torch.nn.functional.pad(read["image"], (pre[1], post[1], pre[0], post[0]))
            result = torch.nn.functional.conv2d(x, read["weight"], **geometry)
        elif kind == "conv_dgrad":
            result = torch.nn.grad.conv2d_input(outs[0].dim, read["filter"], read["loss"], padding=padding, **geometry)
        elif kind == "conv_wgrad":
            result = torch.nn.grad.conv2d_weight(read["image"], outs[0].dim, read["loss"], padding=padding, **geometry)
        elif kind == "sdpa":
            assert attrs.get("generate_stats") is False or attrs.get("is_inference") is True, "stats: see _TRAINING"
            result = torch.nn.functional.scaled_dot_product_attention(
                read["q"], read["k"], read["v"], is_causal=attrs["use_causal_mask"], scale=attrs["attn_scale"])
        elif kind == "layernorm":
            assert attrs["norm_forward_phase"] == "INFERENCE" and operands["epsilon"].by_value
            x = read["input"]
            dims = [1, 2, 3]
            mean, var = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, unbiased=False)
            result = (x - mean) / torch.sqrt(var + float(np.asarray(pack[operands["epsilon"]]).reshape(-1)[0]))
            result = result * read["scale"] + read["bias"]
        _write(outs[0], pack[outs[0]], result)


def _host(array: Any) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)


def _strides_of(array: Any) -> list:
    return [s // array.itemsize for s in array.strides]


def _read(t: Tensor, array: Any) -> torch.Tensor:
    """The array, after checking the graph declared its dims and strides (as cuDNN reads memory through them)."""
    host = _host(array)
    if t.by_value:
        return torch.from_numpy(np.array(host, dtype=np.float64))
    assert list(host.shape) == t.dim, f"{t}: the array has shape {host.shape}"
    assert _strides_of(array) == t.stride, f"{t}: the array has strides {_strides_of(array)}"
    assert _NUMPY.get(t.data_type) == host.dtype, f"{t}: the array is {host.dtype}"
    return torch.from_numpy(np.array(host, dtype=np.float64))


def _write(t: Tensor, array: Any, value: torch.Tensor) -> None:
    assert list(value.shape) == list(t.dim), f"{t}: computed {tuple(value.shape)}"
    assert t.stride == _strides_of(array), f"{t}: output strides differ from the array's"
    out = value.numpy().astype(_NUMPY[t.data_type])
    if hasattr(array, "get"):  # a stand-in device array
        from ember.backends import standin

        array[...] = standin.xp.asarray(out)
    else:
        array[...] = out


# ---- training nodes: every output, computed in float64 from the declared inputs ------------------------------
def _layernorm_train(read: dict, attrs: dict, operands: dict) -> tuple:
    assert attrs["norm_forward_phase"] == "TRAINING" and operands["epsilon"].by_value
    x, eps = read["input"], float(read["epsilon"].reshape(-1)[0])
    dims = [1, 2, 3]
    mean, var = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, unbiased=False)
    inv = 1 / torch.sqrt(var + eps)
    return (x - mean) * inv * read["scale"] + read["bias"], mean, inv


def _norm_backward(read: dict, dims: list) -> tuple:
    """DX, DScale, DBias of y = (x - mean) * inv * scale + bias normalized over ``dims``, from the SAVED mean and
    inverse deviation (as cuDNN's backward reads them: a wrong layout gives wrong numbers)."""
    xhat = (read["input"] - read["mean"]) * read["inv_variance"]
    dy = read["grad"]
    dxhat = dy * read["scale"]
    dx = read["inv_variance"] * (dxhat - dxhat.mean(dims, keepdim=True)
                                 - xhat * (dxhat * xhat).mean(dims, keepdim=True))
    per_channel = [0, 2, 3]  # scale and bias are (1, C, 1, 1) in both norms
    return dx, (dy * xhat).sum(per_channel, keepdim=True), dy.sum(per_channel, keepdim=True)


def _batchnorm_train(read: dict, attrs: dict, operands: dict) -> tuple:
    assert operands["epsilon"].by_value and operands["momentum"].by_value
    x, eps = read["input"], float(read["epsilon"].reshape(-1)[0])
    momentum = float(read["momentum"].reshape(-1)[0])
    dims = [0, 2, 3]
    mean, var = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, unbiased=False)
    inv = 1 / torch.sqrt(var + eps)
    n = x.numel() // x.shape[1]
    next_mean = (1 - momentum) * read["in_running_mean"] + momentum * mean
    next_var = (1 - momentum) * read["in_running_var"] + momentum * var * n / (n - 1)
    return (x - mean) * inv * read["scale"] + read["bias"], mean, inv, next_mean, next_var


def _sdpa_train(read: dict, attrs: dict, operands: dict) -> tuple:
    assert attrs.get("generate_stats") is True
    q, k, v = read["q"], read["k"], read["v"]
    scores = q @ k.transpose(-1, -2) * attrs["attn_scale"]
    if attrs["use_causal_mask"]:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    stats = torch.logsumexp(scores, -1, keepdim=True)  # cuDNN's Stats: the softmax's log-sum-exp per row
    return torch.exp(scores - stats) @ v, stats


def _sdpa_backward(read: dict, attrs: dict, operands: dict) -> tuple:
    q, k, v = (read[n].clone().requires_grad_() for n in ("q", "k", "v"))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=attrs["use_causal_mask"],
                                                           scale=attrs["attn_scale"])
    out.backward(read["dO"])
    return q.grad, k.grad, v.grad


_TRAINING = {
    "batchnorm": _batchnorm_train,
    "batchnorm_backward": lambda read, attrs, operands: _norm_backward(read, [0, 2, 3]),
    "layernorm_backward": lambda read, attrs, operands: _norm_backward(read, [1, 2, 3]),
    "sdpa_backward": _sdpa_backward,
}

