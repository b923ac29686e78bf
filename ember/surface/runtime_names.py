"""Smaller top-level PyTorch names: samplers (``binomial``, ``poisson``), ``histogramdd``, ``from_file``, ``embedding_renorm_``, ``resize_as_``, the sparse-dense products ``dsmm``/``hsmm``, the
generic CPU ``Stream``/``Event``, ``thread_safe_generator`` and the TorchScript class aliases.

Example:
    >>> import ember
    >>> ember.histogramdd(ember.tensor([[0.0, 0.0], [1.0, 1.0]]), bins=2).hist.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Sequence

import numpy as np

from ember import dtypes, random as ember_random, return_types, sparse as _sparse
from ember.autograd import grad_mode
from ember.creation import linspace as _linspace, tensor as _tensor
from ember.data import worker as _worker
from ember.device import to_device
from ember.jit import ScriptFunction, ScriptModule
from ember.tensor import Tensor
from ember import cpu as _cpu_module, cuda as _cuda_module

__all__ = ["binomial", "poisson", "histogramdd", "from_file", "embedding_renorm_", "resize_as_",
           "dsmm", "hsmm", "Stream", "Event", "thread_safe_generator", "ScriptModule", "ScriptFunction",
           "is_inference_mode_enabled", "get_device_module"]

is_inference_mode_enabled = grad_mode.is_inference_mode_enabled


def _host(x: Tensor) -> np.ndarray:
    return np.asarray(x.detach().numpy())


def binomial(count: Tensor, prob: Tensor, generator: Any = None) -> Tensor:
    """Binomial(count, prob) draws, elementwise (NumPy's sampler on the generator's stream; no gradient)."""
    if not prob.is_floating_point():
        raise RuntimeError(f"binomial only supports floating-point dtypes for count, got: {count.dtype}")
    rng = ember_random._rng(generator)
    n, p = np.broadcast_arrays(_host(count), _host(prob))
    if np.any((p < 0) | (p > 1)):
        raise RuntimeError("binomial: prob must be in [0, 1]")
    draws = rng.binomial(n.astype(np.int64), p)
    return _tensor(draws.astype(prob.dtype.np), device=prob.device)


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """Poisson(rate) draws elementwise, in the rate's dtype (no gradient, as PyTorch)."""
    rates = _host(input)
    if np.any(rates < 0):
        raise RuntimeError("poisson: rates must be non-negative")
    draws = ember_random._rng(generator).poisson(rates)
    return _tensor(draws.astype(input.dtype.np), device=input.device)


_HISTDD = functools.partial(return_types.make, return_types.histogramdd)


def _linear_edges(data: np.ndarray, bins: Any, pairs: Any, d: int, dtype: Any) -> list:
    """Each dim's edges for a bin count, as torch computes them: ``linspace(min, max, n + 1)`` in the input's
    dtype with torch's two-sided formula (NumPy's one-sided linspace puts some edges 1 ulp away, and a value on
    an edge then lands in another bin)."""
    counts = [int(bins)] * d if isinstance(bins, (int, np.integer)) else [int(b) for b in bins]
    edges = []
    for k in builtins_range(d):
        if pairs is not None:
            lo, hi = float(pairs[k][0]), float(pairs[k][1])
        else:
            lo, hi = (float(data[:, k].min()), float(data[:, k].max())) if data.shape[0] else (0.0, 1.0)
        if lo == hi:  # torch (and NumPy) widen an empty range by half a unit each way
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(_linspace(lo, hi, counts[k] + 1, dtype=dtype).numpy())
    return edges


def histogramdd(input: Tensor, bins: Any = 10, range: Sequence[float] | None = None,  # noqa: A002
                weight: Tensor | None = None, density: bool = False) -> tuple:  # (all positional, as torch's)
    """Histogram of the rows of ``input`` (N, D): ``bins`` an int, a list of ints or a list of edge tensors;
    ``range`` flat ``[min0, max0, min1, max1, ...]``."""
    data = _host(input).reshape(-1, input.shape[-1])
    d = data.shape[1]
    if isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor):
        for k, b in enumerate(bins):
            if b.dtype is not input.dtype:
                raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, "
                                   f"but got input with dtype {input.dtype} and bins for dimension {k} with dtype "
                                   f"{b.dtype}")
        bins = [_host(b) for b in bins]
    pairs = None if range is None else [(range[2 * k], range[2 * k + 1]) for k in builtins_range(d)]
    if not (isinstance(bins, (list, tuple)) and bins and not isinstance(bins[0], (int, np.integer))):
        bins = _linear_edges(data, bins, pairs, d, input.dtype)  # bin counts: torch's edges, bit for bit
    hist, edges = np.histogramdd(data, bins=bins, range=pairs, density=density,
                                 weights=None if weight is None else _host(weight).reshape(-1))
    dt = input.dtype.np
    return _HISTDD(_tensor(hist.astype(dt), device=input.device),
                   tuple(_tensor(e.astype(dt), device=input.device) for e in edges))  # a tuple, as torch


builtins_range = __builtins__["range"] if isinstance(__builtins__, dict) else __builtins__.range


def from_file(filename: str, shared: bool | None = None, size: int = 0, *, dtype: Any = None, layout: Any = None,
              device: Any = None, pin_memory: bool = False) -> Tensor:
    """A 1-D tensor of ``size`` elements read from a raw binary file (memory-mapped; ``shared=True`` writes
    changes back to the file)."""
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    nbytes = size * dt.itemsize
    if os.path.getsize(filename) < nbytes:
        raise RuntimeError(f"from_file: file {filename!r} is {os.path.getsize(filename)} bytes, but size={size} "
                           f"elements of {dt} need {nbytes}")
    data = np.memmap(filename, dtype=dt.np, mode="r+" if shared else "c", shape=(size,)) if size else \
        np.zeros((0,), dtype=dt.np)
    return Tensor._make(np.asarray(data) if not shared else data, _tensor(0.0).device, False)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Rescale, in place, the rows of ``input`` named by ``indices`` whose ``norm_type``-norm exceeds
    ``max_norm`` to that norm (``scale = max_norm / (norm + 1e-7)``, as PyTorch)."""
    with grad_mode.no_grad():
        rows = np.unique(_host(indices).reshape(-1))
        if rows.size:
            idx = _tensor(rows, device=input.device)
            picked = input.index_select(0, idx)
            norms = picked.norm(p=norm_type, dim=1, keepdim=True)
            scale = (max_norm / (norms + 1e-7)).clamp(max=1.0)
            scale = scale.where(norms > max_norm, scale * 0 + 1)
            input.index_copy_(0, idx, picked * scale)
    return input


def resize_as_(input: Tensor, the_template: Tensor, *, memory_format: Any = None) -> Tensor:
    return input.resize_as_(the_template)


def dsmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Sparse @ dense -> dense (``torch.dsmm``)."""
    return _sparse.mm(input, mat2)


def hsmm(mat1: Tensor, mat2: Tensor) -> Tensor:
    """Sparse @ dense -> sparse (``torch.hsmm``)."""
    return _sparse.mm(mat1, mat2).to_sparse()


class Stream:
    """``torch.Stream`` for the CPU: work runs in order as it is issued, so a stream is always idle."""

    def __init__(self, device: Any = None, *, priority: int = 0) -> None:
        self.device = to_device(device if device is not None else "cpu")
        self.device_type, self.device_index, self.stream_id, self.priority = self.device.type, -1, 0, priority
        if self.device.type != "cpu":
            raise RuntimeError(f"torch.Stream: ember has no {self.device.type} streams (only cpu)")

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_event(self, event: "Event") -> None:
        return None

    def wait_stream(self, stream: "Stream") -> None:
        return None

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or Event(self.device)
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __repr__(self) -> str:
        return f"torch.Stream device_type={self.device_type}, device_index={self.device_index}, stream_id=0"


class Event:
    """``torch.Event`` for the CPU: recorded work is complete when recorded; ``elapsed_time`` is in ms."""

    def __init__(self, device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.device = to_device(device if device is not None else "cpu")
        self.device_type, self.device_index, self.enable_timing = self.device.type, -1, enable_timing
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._time = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Stream | None = None) -> None:
        return None

    def elapsed_time(self, end_event: "Event") -> float:
        if not self.enable_timing or self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded with enable_timing=True before calling elapsed_time")
        return (end_event._time - self._time) * 1000.0


def thread_safe_generator() -> Any:
    """The calling DataLoader thread worker's own generator (seeded with the worker's seed, made on first use),
    or None in the main thread and in process workers, where the default generator is already private."""
    info = _worker.get_worker_info()
    if info is None or threading.current_thread() is threading.main_thread():
        return None
    gen = getattr(_worker._LOCAL, "generator", None)
    if gen is None:
        gen = _worker._LOCAL.generator = ember_random.Generator().manual_seed(info.seed)
    return gen


def get_device_module(device: Any = None) -> Any:
    """``torch.get_device_module``: ``ember.cuda`` for CUDA devices, ``ember.cpu`` for the CPU; with no argument,
    the current accelerator's module (``ember.cuda`` when a GPU is there, else ``ember.cpu``).

    Example:
        >>> import ember
        >>> ember.get_device_module("cpu").is_available()
        True
    """
    if device is None:
        return _cuda_module if _cuda_module.is_available() else _cpu_module
    kind = to_device(device).type
    modules = {"cuda": _cuda_module, "cpu": _cpu_module}
    if kind not in modules:
        raise RuntimeError(f"get_device_module: ember has no device module for {kind!r} (it has cpu and cuda).")
    return modules[kind]
