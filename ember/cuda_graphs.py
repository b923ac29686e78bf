"""``torch.cuda.graphs``: capture CUDA work once, replay it with one launch (``CUDAGraph``, ``graph``,
``make_graphed_callables``), with PyTorch's semantics.

On a CUDA device the backend captures on a side stream (CuPy: ``Stream.begin_capture()`` /
``end_capture()`` -> ``Graph.launch()``, ember/backends/cuda.py); on the stand-in device the capture is
modelled (ember/backends/standin_capture.py: kernels recorded, host syncs refused, memory left as an
unexecuted capture leaves it), so CI tests everything here. Without a CUDA device every name refuses
as PyTorch's CPU build does (``RuntimeError``), and ``is_current_stream_capturing()`` is False.

As in PyTorch:

* capture does not run the work: the tensors made inside ``with ember.cuda.graph(g):`` hold garbage
  until ``g.replay()``; a replay reads the *same* memory the capture read (copy new inputs into the
  static input tensors) and writes the same output tensors (read them before the next replay);
* host synchronizations (``.item()``, ``.cpu()``, ``print(t)``, ``if t > 0``), data-dependent shapes
  (``nonzero``, boolean masks) and host-to-device copies are refused during capture: the error names the
  operation, and the capture is invalidated (``capture_end`` raises);
* random numbers from the current device's default generator are captured (it is registered with the graph:
  its kernels read seed and offset from device memory, written before each replay), so each replay draws new
  numbers and the generator's offset advances past them; other generators are refused, as PyTorch refuses
  unregistered ones;
* ``pool=`` / ``MemPool`` / ``graph_pool_handle()`` are accepted: each graph keeps the memory it
  captured for its lifetime (ember does not share pools between graphs).

``ember.compile(step, mode="reduce-overhead")`` replays whole compiled steps this way
(ember/graph/cuda_graph_step.py).

Example (stand-in device; the same code runs on a GPU):
    >>> import ember
    >>> from ember.testing import standin_cuda
    >>> with standin_cuda():
    ...     x = ember.ones(3, device="cuda")
    ...     g = ember.cuda.CUDAGraph()
    ...     with ember.cuda.graph(g):
    ...         y = x * 2
    ...     _ = x.fill_(5.0); g.replay(); y.tolist()
    [10.0, 10.0, 10.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import random as ember_random
from ember.autograd import grad as _autograd_grad
from ember.autograd.function import Function
from ember.backends import Backend, get_backend
from ember.tensor import Tensor

__all__ = ["CUDAGraph", "MemPool", "graph", "graph_pool_handle", "is_current_stream_capturing",
           "make_graphed_callables"]


def capture_backend(what: str) -> Backend:
    """The backend serving ``cuda`` when it can capture graphs, else PyTorch's CPU-build refusal."""
    try:
        backend = get_backend("cuda")
    except RuntimeError as error:
        raise RuntimeError(f"torch.cuda.{what}: ember captures CUDA graphs only on a CUDA device, and none is "
                           f"available here ({error})") from None
    if not hasattr(backend, "capture_begin"):
        raise RuntimeError(f"torch.cuda.{what}: the {backend.name} backend serving 'cuda' cannot capture graphs")
    return backend


class MemPool:
    """A memory pool handle for graph capture (accepted; each graph keeps the memory it captured)."""

    def __init__(self, *args: Any, _what: str = "MemPool", **kwargs: Any) -> None:
        capture_backend(_what)


def graph_pool_handle() -> MemPool:
    """A pool handle to pass as ``pool=`` (accepted, see :class:`MemPool`)."""
    return MemPool(_what="graph_pool_handle")


def is_current_stream_capturing() -> bool:
    """Whether a CUDA graph capture is in progress (False without a CUDA device)."""
    try:
        backend = get_backend("cuda")
    except RuntimeError:
        return False
    is_capturing = getattr(backend, "is_capturing", None)
    return bool(is_capturing()) if is_capturing is not None else False


class CUDAGraph:
    """A CUDA graph: ``capture_begin()``, the work, ``capture_end()``, then ``replay()`` as often as needed."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._backend = capture_backend("CUDAGraph")
        self._graph: Any = None
        self._capturing = False
        # The current device's default generator, registered while capturing (PyTorch does the same): its draws
        # read [key, offset] from ``_rng_state`` (device memory), rewritten before each replay.
        self._rng: Any = None
        self._rng_state: Any = None
        self._rng_increment = 0

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        if self._capturing:
            raise RuntimeError("CUDAGraph.capture_begin: this graph is already capturing")
        self._backend.synchronize(None)
        self._register_generator()
        self._backend.capture_begin()
        self._capturing = True
        self._graph = None

    def _register_generator(self) -> None:
        rng = ember_random.cuda_generator()._rng
        self._rng = rng if hasattr(rng, "capture_begin") else None
        if self._rng is not None:
            # allocated before the capture: its memory outlives it and is written from the host between replays
            self._rng_state = self._backend.xp.zeros(2, dtype=np.int64)
            self._rng.capture_begin(self._rng_state)

    def capture_end(self) -> None:
        if not self._capturing:
            raise RuntimeError("CUDAGraph.capture_end: capture_begin was not called")
        self._capturing = False
        self._rng_increment = self._rng.capture_end() if self._rng is not None else 0
        self._graph = self._backend.capture_end()

    def _abort(self) -> None:
        self._capturing = False
        if self._rng is not None:
            self._rng.capture_end()
        self._backend.capture_abort()

    def replay(self) -> None:
        """Run the captured work again (on the current stream), reading and writing the captured tensors. Random
        numbers drawn during the capture are new at each replay: the generator's seed and offset are written to
        the graph's state first, and the offset advances past the replay's draws (PyTorch's semantics)."""
        if self._graph is None:
            raise RuntimeError("CUDAGraph.replay: nothing was captured; capture first "
                               "(`with ember.cuda.graph(g): ...` or capture_begin()/capture_end())")
        if self._rng_increment:
            self._rng_state[...] = self._backend.asarray(self._rng.replay_state(self._rng_increment))
        self._graph.replay()

    def reset(self) -> None:
        """Drop the captured graph and the memory it kept."""
        self._graph = None

    def instantiate(self) -> None:
        """PyTorch's ``keep_graph=True`` step (the graph here is ready once captured)."""

    def pool(self) -> MemPool:
        return MemPool()

    def enable_debug_mode(self) -> None:
        """Accepted (PyTorch keeps the graph for ``debug_dump``)."""

    def debug_dump(self, debug_path: str) -> None:
        """Write what was captured (a kernel count on the stand-in device; CuPy has no dot export)."""
        kernels = len(getattr(self._graph, "kernels", ()))
        with open(debug_path, "w") as f:
            f.write(f"ember CUDAGraph: {'captured' if self._graph is not None else 'empty'}, {kernels} kernels\n")


class graph:  # noqa: N801 - torch.cuda.graph's name
    """``with ember.cuda.graph(g):`` captures the block into ``g`` (on a side stream, as PyTorch).

    An exception inside the block ends the capture without a graph and propagates."""

    def __init__(self, cuda_graph: CUDAGraph, pool: Any = None, stream: Any = None,
                 capture_error_mode: str = "global") -> None:
        if not isinstance(cuda_graph, CUDAGraph):
            capture_backend("graph")  # no CUDA device: the CPU build's refusal first
            raise TypeError(f"torch.cuda.graph: expected a CUDAGraph, got {type(cuda_graph).__name__}")
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> bool:
        if kind is not None:
            self.cuda_graph._abort()
            return False
        self.cuda_graph.capture_end()
        return False


# ---- make_graphed_callables ----------------------------------------------------------------------------
def make_graphed_callables(callables: Any, sample_args: tuple, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """Graphed versions of ``callables`` (functions or modules): forward and backward each replay one
    captured graph. ``sample_args`` (a tuple of tensors per callable) become the static inputs; as in
    PyTorch, a graphed module runs its graphs only in the training mode it was captured in (else its
    own forward), and the outputs are the static output tensors (overwritten by the next call)."""
    capture_backend("make_graphed_callables")
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"make_graphed_callables: {len(callables)} callables but {len(sample_args)} sample_args "
                         "tuples; give one tuple of sample tensors per callable")
    out = tuple(_graphed(fn, tuple(args), num_warmup_iters, allow_unused_input)
                for fn, args in zip(callables, sample_args))
    return out[0] if single else out


def _graphed(fn: Any, args: tuple, warmup: int, allow_unused: bool) -> Any:
    for k, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"make_graphed_callables: sample_args must be tensors; argument {k} is "
                            f"{type(a).__name__}")
    is_module = hasattr(fn, "parameters") and hasattr(fn, "training")
    params = tuple(p for p in fn.parameters() if p.requires_grad) if is_module else ()
    wants = [a for a in args if a.requires_grad] + list(params)

    def grads_of(outputs: tuple, grad_outputs: list) -> tuple:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None]
        if not pairs or not wants:
            return tuple(None for _ in wants)
        return tuple(_autograd_grad([o for o, _ in pairs], wants, [g for _, g in pairs],
                                    allow_unused=allow_unused))

    for _ in range(warmup):  # kernels compiled, handles made, lazy buffers allocated: outside the capture
        outputs = _as_tuple(fn(*args))
        grads_of(outputs, [_like(o) for o in outputs])
    forward_graph, backward_graph = CUDAGraph(), CUDAGraph()
    with graph(forward_graph):
        result = fn(*args)
    returns_tuple = isinstance(result, tuple)
    static_outputs = _as_tuple(result)
    static_grad_outputs = [_like(o) for o in static_outputs]
    with graph(backward_graph):
        static_grads = grads_of(static_outputs, static_grad_outputs)
    n_args = len(args)

    class Graphed(Function):
        @staticmethod
        def forward(ctx: Any, *inputs: Any) -> Any:
            for static, new in zip(args, inputs[:n_args]):
                if new is not static:
                    static.detach().copy_(new.detach())
            forward_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx: Any, *grad_outputs: Any) -> Any:
            for static, new in zip(static_grad_outputs, grad_outputs):
                if static is not None and new is not None:
                    static.copy_(new.detach())
            backward_graph.replay()
            grads = iter(static_grads)
            out = [next(grads) if a.requires_grad else None for a in args] + [next(grads) for _ in params]
            return tuple(None if g is None else g.detach() for g in out)

    def run(*inputs: Any) -> Any:
        outputs = Graphed.apply(*inputs, *params)
        return outputs if returns_tuple else outputs[0]

    if not is_module:
        return run
    original, training = fn.forward, fn.training

    def forward(*inputs: Any) -> Any:
        return run(*inputs) if fn.training == training else original(*inputs)

    fn.forward = forward
    return fn


def _as_tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _like(t: Any) -> Any:
    """A gradient buffer for output ``t`` (None for outputs without gradients), made before the capture."""
    if not isinstance(t, Tensor) or not t.requires_grad:
        return None
    return t.detach().clone()  # not zeros/empty: warm-up backward then runs on real-looking values
