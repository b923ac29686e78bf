"""cuDNN for the CUDA backend, through the cuDNN frontend Python package (``import cudnn``,
``pip install nvidia-cudnn-frontend``; the lent GPU machine has cuDNN's libraries but not the frontend:
tools/gpu_session.sh carries its wheel).

Each op builds a cuDNN *graph* once per signature (shapes, strides, dtypes, geometry, TF32 flag,
device) and keeps it: the frontend's ``pygraph`` with ``tensor(name, dim, stride, data_type)``
inputs, one operation node, outputs given their dims, C-contiguous strides and dtype, then
``build([heur_mode.A, heur_mode.FALLBACK])``; a call is ``graph.execute(variant_pack, workspace,
handle=handle)`` on the current stream (so CUDA-graph capture records it). A signature cuDNN does not
support (``build`` raises), a dtype it has no type for, non-positive strides or grouped convolutions
give ``None``, cached too, and the caller runs its CuPy path: a correct fallback, never an error.

Ops (the kernel names the CUDA backend's ``native_kernel`` answers):

* ``cudnn_conv2d``: ``conv_fprop(image, weight, pre_padding, post_padding, stride, dilation)``;
* ``cudnn_conv2d_input_grad``: ``conv_dgrad(loss, filter, ...)``, the output given the input's dims;
* ``cudnn_conv2d_weight_grad``: ``conv_wgrad(image, loss, ...)``, the output given the weight's dims;
* ``cudnn_sdpa``: ``sdpa(q, k, v, attn_scale, use_causal_mask)`` without stats (inference; training
  keeps ember's attention, whose backward reads the saved weights);
* ``cudnn_layer_norm``: ``layernorm(INFERENCE, input, scale, bias, epsilon)`` over the last dimension.

``ember.backends.cudnn.enabled = False`` turns all of it off (the benchmark's cuDNN on/off);
``allow_tf32 = False`` keeps float32 convolutions off tensor-core engines (deselected by numerical note).

The plumbing (the graph each op builds, the cache, the fallback) is tested on the CPU against a fake
``cudnn`` module (tests/cuda/test_cudnn_plumbing.py); whether cuDNN computes the right numbers is for
tests/backends/test_cuda_on_gpu.py on a GPU.

Example (with a GPU and the frontend):
    >>> from ember.backends.cuda_cudnn import CudnnOps             # doctest: +SKIP
    >>> ops = CudnnOps(cudnn, cupy); y = ops.conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)  # doctest: +SKIP
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from ember.backends import cudnn as cudnn_flags

_FRONTEND: Any = None
_IMPORT_ERROR = ""


def frontend() -> Any:
    """The ``cudnn`` frontend module, or None (the reason in :func:`unavailable_reason`). Imported on first
    use: the package loads cuDNN's libraries, seconds that ``import ember`` must not pay."""
    global _FRONTEND, _IMPORT_ERROR
    if _FRONTEND is None and not _IMPORT_ERROR:
        try:
            _FRONTEND = importlib.import_module("cudnn")
            if not hasattr(_FRONTEND, "pygraph"):
                raise ImportError(f"the module 'cudnn' at {getattr(_FRONTEND, '__file__', '?')} is not the cuDNN "
                                  "frontend (no pygraph)")
        except Exception as error:  # noqa: BLE001 - ImportError, or the libraries failing to load (OSError)
            _FRONTEND, _IMPORT_ERROR = None, f"{type(error).__name__}: {error}"
    return _FRONTEND


def unavailable_reason() -> str:
    frontend()
    return _IMPORT_ERROR or ""


def reset() -> None:
    """Forget the import result (tests swap the module)."""
    global _FRONTEND, _IMPORT_ERROR
    _FRONTEND, _IMPORT_ERROR = None, ""


def _elements(array: Any) -> list:
    """Strides in elements (CuPy's are in bytes)."""
    return [s // array.itemsize for s in array.strides]


def _contiguous(shape: tuple) -> list:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return strides[::-1]


def _first(result: Any) -> Any:
    """The main output of a node (sdpa/layernorm return (output, statistics...), None where not generated)."""
    return result[0] if isinstance(result, (tuple, list)) else result


# op -> (first operand's tensor name, second's, the frontend graph method, its keywords for the two operands)
_CONV_OPS = {
    "fprop": ("x", "w", "conv_fprop", "image", "weight"),
    "dgrad": ("dy", "w", "conv_dgrad", "loss", "filter"),
    "wgrad": ("x", "dy", "conv_wgrad", "image", "loss"),
}


class _Built:
    """A built cuDNN graph, its tensors in call order, its output tensors and workspace size."""

    __slots__ = ("graph", "inputs", "outputs", "workspace")

    def __init__(self, graph: Any, inputs: list, outputs: list) -> None:
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        self.workspace = int(graph.get_workspace_size())


class CudnnOps:
    """cuDNN graphs per op and signature, run on CuPy arrays (``fe`` is the frontend module)."""

    def __init__(self, fe: Any, cupy: Any) -> None:
        self.fe, self.cupy = fe, cupy
        self.cache: dict[tuple, _Built | None] = {}
        self.handles: dict[int, Any] = {}
        self.failures: dict[tuple, str] = {}  # signature -> why cuDNN refused it (for explain/debugging)
        self._types = {np.dtype(np.float32): "FLOAT", np.dtype(np.float16): "HALF", np.dtype(np.float64): "DOUBLE"}

    # ---- plumbing ---------------------------------------------------------------------------------
    def data_type(self, dtype: Any) -> Any:
        """The frontend's data type for a NumPy/CuPy dtype (bfloat16 by name: ml_dtypes' type), or None."""
        name = self._types.get(np.dtype(dtype))
        if name is None and np.dtype(dtype).name == "bfloat16":
            name = "BFLOAT16"
        return None if name is None else getattr(self.fe.data_type, name)

    def _tensor(self, graph: Any, name: str, array: Any) -> Any:
        return graph.tensor(name=name, dim=list(array.shape), stride=_elements(array),
                            data_type=self.data_type(array.dtype))

    def _usable(self, *arrays: Any) -> bool:
        """Every array has a cuDNN type, one dtype, and positive strides (cuDNN takes no broadcast views)."""
        dtype = arrays[0].dtype
        return all(a.dtype == dtype and self.data_type(a.dtype) is not None and a.size > 0
                   and all(s > 0 or n == 1 for s, n in zip(a.strides, a.shape)) for a in arrays)

    def _new_graph(self, dtype: Any) -> Any:
        fe = self.fe
        return fe.pygraph(io_data_type=self.data_type(dtype), intermediate_data_type=fe.data_type.FLOAT,
                          compute_data_type=fe.data_type.FLOAT, handle=self._handle())

    def _handle(self) -> Any:
        device = int(self.cupy.cuda.runtime.getDevice())
        handle = self.handles.get(device)
        if handle is None:
            handle = self.handles[device] = self.fe.create_handle()
        return handle

    def _build(self, key: tuple, make: Callable[[], _Built]) -> _Built | None:
        if key in self.cache:
            return self.cache[key]
        try:
            built = make()
        except Exception as error:  # noqa: BLE001 - cudnnGraphNotSupportedError, RuntimeError...: the fallback runs
            self.failures[key] = f"{type(error).__name__}: {error}"
            built = None
        self.cache[key] = built
        return built

    def _finish(self, graph: Any, tf32_matters: bool) -> None:
        fe = self.fe
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([fe.heur_mode.A, fe.heur_mode.FALLBACK])
        if tf32_matters and not cudnn_flags.allow_tf32:  # float32 stays IEEE: no tensor-core (TF32) engines
            graph.deselect_numeric_notes([fe.numerical_note.TENSOR_CORE])
        graph.check_support()
        graph.build_plans()

    def _output(self, tensor: Any, shape: tuple, dtype: Any) -> None:
        tensor.set_output(True).set_dim(list(shape)).set_stride(_contiguous(shape)).set_data_type(
            self.data_type(dtype))

    def _run(self, built: _Built, arrays: list, shapes: list, dtype: Any) -> list:
        """Execute ``built`` on ``arrays`` (its inputs in order), returning new outputs of ``shapes``; ``dtype``
        is one dtype for all outputs or a list, one per output."""
        cupy = self.cupy
        kinds = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(shapes)
        outs = [cupy.empty(shape, dtype=kind) for shape, kind in zip(shapes, kinds)]
        pack = dict(zip(built.inputs, arrays))
        pack.update(zip(built.outputs, outs))
        workspace = cupy.empty(max(built.workspace, 1), dtype=cupy.uint8)
        handle = self._handle()
        set_stream = getattr(self.fe, "set_stream", None)
        if set_stream is not None:  # the current stream: CUDA-graph capture and ember.cuda.stream(s) blocks see it
            set_stream(handle=handle, stream=cupy.cuda.get_current_stream().ptr)
        built.graph.execute(pack, workspace, handle=handle)
        return outs

    # ---- convolutions ------------------------------------------------------------------------------------
    @staticmethod
    def _geometry(stride: tuple, padding: tuple, dilation: tuple) -> dict:
        return {"pre_padding": [padding[0], padding[2]], "post_padding": [padding[1], padding[3]],
                "stride": list(stride), "dilation": list(dilation)}

    def _conv_key(self, op: str, a: Any, b: Any, shape: tuple, stride: tuple, padding: tuple,
                  dilation: tuple) -> tuple:
        return (op, a.shape, a.strides, b.shape, b.strides, str(a.dtype), shape, stride, padding, dilation,
                bool(cudnn_flags.allow_tf32), int(self.cupy.cuda.runtime.getDevice()))

    def _conv(self, op: str, a: Any, b: Any, shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
        """One cuDNN convolution graph (``op`` of ``_CONV_OPS``) on operands ``a``, ``b`` giving ``shape``, built
        once per signature; None when cuDNN refuses it."""
        name_a, name_b, method, key_a, key_b = _CONV_OPS[op]

        def make() -> _Built:
            graph = self._new_graph(a.dtype)
            ta, tb = self._tensor(graph, name_a, a), self._tensor(graph, name_b, b)
            out = getattr(graph, method)(**{key_a: ta, key_b: tb}, compute_data_type=self.fe.data_type.FLOAT,
                                         name=op, **self._geometry(stride, padding, dilation))
            self._output(out, shape, a.dtype)
            self._finish(graph, a.dtype == np.float32)
            return _Built(graph, [ta, tb], [out])

        built = self._build(self._conv_key(op, a, b, shape, stride, padding, dilation), make)
        return None if built is None else self._run(built, [a, b], [shape], a.dtype)[0]

    def conv2d(self, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
        """The convolution forward (N, O, OH, OW), or None (the CuPy path runs)."""
        if groups != 1 or x.ndim != 4 or not self._usable(x, w):
            return None
        oh = (x.shape[2] + padding[0] + padding[1] - dilation[0] * (w.shape[2] - 1) - 1) // stride[0] + 1
        ow = (x.shape[3] + padding[2] + padding[3] - dilation[1] * (w.shape[3] - 1) - 1) // stride[1] + 1
        if oh <= 0 or ow <= 0:
            return None
        return self._conv("fprop", x, w, (x.shape[0], w.shape[0], oh, ow), stride, padding, dilation)

    def conv2d_input_grad(self, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple,
                          dilation: tuple, groups: int) -> Any:
        """The data gradient (the input's shape), or None."""
        if groups != 1 or g.ndim != 4 or not self._usable(g, w):
            return None
        return self._conv("dgrad", g, w, tuple(input_shape), stride, padding, dilation)

    def conv2d_weight_grad(self, x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple,
                           dilation: tuple, groups: int) -> Any:
        """The weight gradient (the weight's shape), or None."""
        if groups != 1 or x.ndim != 4 or not self._usable(x, g):
            return None
        return self._conv("wgrad", x, g, tuple(weight_shape), stride, padding, dilation)

    # ---- attention and normalization ----------------------------------------------------------------------
    def sdpa(self, q: Any, k: Any, v: Any, is_causal: bool, scale: float) -> Any:
        """softmax(q k^T * scale [causal]) v for (B, H, S, D) half/bfloat16 inputs (cuDNN's fused attention
        takes 16-bit types only), or None."""
        if q.ndim != 4 or np.dtype(q.dtype) == np.float32 or not self._usable(q, k, v):
            return None
        shape = q.shape[:-1] + (v.shape[-1],)
        key = ("sdpa", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, str(q.dtype), bool(is_causal),
               float(scale), int(self.cupy.cuda.runtime.getDevice()))

        def make() -> _Built:
            graph = self._new_graph(q.dtype)
            tq, tk, tv = (self._tensor(graph, n, a) for n, a in (("q", q), ("k", k), ("v", v)))
            try:
                to = _first(graph.sdpa(q=tq, k=tk, v=tv, generate_stats=False, attn_scale=float(scale),
                                       use_causal_mask=bool(is_causal), name="sdpa"))
            except TypeError:  # frontends before 1.10 name the flag is_inference
                to = _first(graph.sdpa(q=tq, k=tk, v=tv, is_inference=True, attn_scale=float(scale),
                                       use_causal_mask=bool(is_causal), name="sdpa"))
            self._output(to, shape, q.dtype)
            self._finish(graph, False)
            return _Built(graph, [tq, tk, tv], [to])

        built = self._build(key, make)
        return None if built is None else self._run(built, [q, k, v], [shape], q.dtype)[0]

    def layer_norm(self, x: Any, weight: Any, bias: Any, eps: float) -> Any:
        """Layer norm over the last dimension (inference: no saved statistics), or None."""
        if weight is None or bias is None or x.ndim < 2 or not self._usable(x, weight, bias):
            return None
        rows, features = int(np.prod(x.shape[:-1])), x.shape[-1]
        key = ("layernorm", x.shape, x.strides, str(x.dtype), float(eps), int(self.cupy.cuda.runtime.getDevice()))
        if not x.flags.c_contiguous:
            return None
        x4 = x.reshape(rows, features, 1, 1)
        w4, b4 = weight.reshape(1, features, 1, 1), bias.reshape(1, features, 1, 1)

        def make() -> _Built:
            fe = self.fe
            graph = self._new_graph(x.dtype)
            tx, tw, tb = (self._tensor(graph, n, a) for n, a in (("x", x4), ("scale", w4), ("bias", b4)))
            teps = graph.tensor(name="epsilon", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=fe.data_type.FLOAT,
                                is_pass_by_value=True)
            ty = _first(graph.layernorm(norm_forward_phase=fe.norm_forward_phase.INFERENCE, input=tx, scale=tw,
                                        bias=tb, epsilon=teps, name="layernorm"))
            self._output(ty, x4.shape, x.dtype)
            self._finish(graph, False)
            return _Built(graph, [tx, tw, tb, teps], [ty])

        built = self._build(key, make)
        if built is None:
            return None
        epsilon = np.full((1, 1, 1, 1), eps, dtype=np.float32)  # passed by value: host memory, as cuDNN wants
        return self._run(built, [x4, w4, b4, epsilon], [x4.shape], x.dtype)[0].reshape(x.shape)

    def kernels(self) -> dict:
        """``native_kernel`` names -> callables (the training norms and attention: ``cuda_cudnn_train.kernels``)."""
        return {"cudnn_conv2d": self.conv2d, "cudnn_conv2d_input_grad": self.conv2d_input_grad,
                "cudnn_conv2d_weight_grad": self.conv2d_weight_grad, "cudnn_sdpa": self.sdpa,
                "cudnn_layer_norm": self.layer_norm}
