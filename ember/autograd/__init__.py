"""Reverse-mode automatic differentiation over dynamic graphs (PyTorch semantics).

Example:
    >>> import ember
    >>> x = ember.tensor(2.0, requires_grad=True)
    >>> (dy,) = ember.autograd.grad(x ** 3, x, create_graph=True)
    >>> ember.autograd.grad(dy, x)[0]
    tensor(12.)
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

import numpy as np

from ember import interpreters

from ember.autograd.anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                                         set_detect_anomaly)
from ember.autograd.engine import _tensor_class, accumulate_captured, run_backward
from ember.autograd.function import Function, FunctionCtx
from ember.autograd.gradcheck import gradcheck, gradgradcheck
from ember.autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ember.autograd.tape import GradientTape
from ember.autograd.variable import Variable  # noqa: F401
from ember.autograd.variable import set_multithreading_enabled  # noqa: F401

__all__ = ["backward", "grad", "Function", "FunctionCtx", "GradientTape", "gradcheck", "gradgradcheck",
           "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "Variable", "functional", "forward_ad", "set_multithreading_enabled",
           "NestedIOFunction", "enforce_grad_layout_policy", "graph"]


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Iterable) and not isinstance(value, str) and not hasattr(value, "requires_grad"):
        return list(value)  # a generator (model.parameters()) or dict view: PyTorch takes tuple(inputs)
    return [value]


def _root_grads(outputs: list, grad_outputs: list, create_graph: bool) -> list:
    if grad_outputs and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grad_outputs)} gradients")
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if i < len(grad_outputs) else None
        if g is None and not interpreters.GRAPHS.count:
            data = out._data
            if data.__class__ is np.ndarray and data.ndim == 0 and data.dtype.kind == "f":
                # a CPU float scalar (loss.backward()): the seed without the checks below (none can fail)
                grads.append(_tensor_class()._make(np.array(1, data.dtype), out._device, False))  # (not np.ones: its Python wrapper)
                continue
        grads.append(_root_grad(out, g, create_graph, i))
    return grads


def _root_grad(out: Any, g: Any, create_graph: bool, index: int = 0) -> Any:
    """The seed of one root: ones for a scalar output (checked), or the given gradient (checked, copied)."""
    from ember import creation  # noqa: PLC0415 - creation imports the Tensor, which imports autograd

    if g is None:
        if out.numel() != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs; got an output of shape "
                f"{tuple(out.shape)}. Pass gradient= (backward) or grad_outputs= (autograd.grad) with a tensor "
                "of that shape, or reduce it first, e.g. loss.sum().backward()."
            )
        if out.dtype.is_complex:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs; this output is "
                               f"{out.dtype}: take a real loss first (z.abs(), z.real) or pass gradient=")
        data = out._data
        if interpreters.GRAPHS.count and interpreters.SUBCLASSES.level.owns(out):
            return interpreters.SUBCLASSES.level.seed(out)  # aten.ones_like, seen by a dispatch mode or subclass
        if data.__class__ is np.ndarray:  # a CPU tensor (the common case): the seed without the factory
            return _tensor_class()._make(np.ones(data.shape, data.dtype), out._device, False)
        return creation.ones_like(out)  # devices, graphs under construction: the factory knows their arrays
    if not hasattr(g, "_data"):
        g = creation.tensor(g, dtype=out.dtype, device=out.device)
    if tuple(g.shape) != tuple(out.shape):
        raise RuntimeError(f"Mismatch in shape: grad_output[{index}] has a shape of {g.shape} and output[{index}] "
                           f"has a shape of {out.shape}.")
    if g.dtype != out.dtype and not out.dtype.is_complex:
        g = g.to(out.dtype)  # as PyTorch's engine: a gradient takes its tensor's dtype (an int or float32 seed too)
    if not create_graph:
        g = g.detach().clone()  # the engine may take ownership of root buffers
    return g


def _check_roots(outputs: list) -> None:
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn. Did you create the "
                "tensors with requires_grad=True, or compute them inside ember.no_grad()?"
            )


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Sequence[Any] | None = None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves that need them."""
    if grad_tensors is None and inputs is None and not create_graph and tensors.__class__ is list \
            and len(tensors) == 1 and not interpreters.GRAPHS.count:
        # ``loss.backward()`` of a CPU float scalar: its seed as _root_grads makes it, none of the checks can fail
        out = tensors[0]
        data = getattr(out, "_data", None)
        if data.__class__ is np.ndarray and data.ndim == 0 and data.dtype.kind == "f" and out._requires_grad:
            run_backward(tensors, [_tensor_class()._make(np.array(1, data.dtype), out._device, False)],
                         bool(retain_graph), False)
            return
    outputs = _as_list(tensors)
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    _check_roots(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(outputs, _as_list(grad_tensors), create_graph)
    if inputs is not None:
        results = run_backward(outputs, grads, retain_graph, create_graph, capture=inputs)
        for t, g in zip(inputs, results):
            if g is not None:
                accumulate_captured(t, g)
        return
    run_backward(outputs, grads, retain_graph, create_graph)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated into .grad).

    PyTorch's signature and argument order: ``only_inputs`` is deprecated and ignored (a warning when False, as
    PyTorch); ``is_grads_batched=True`` reads the first dimension of each grad_output as a batch of cotangents and
    returns the gradients stacked along it (one backward per cotangent; PyTorch vmaps).
    """
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.", FutureWarning,
                      stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    if not ins:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    _check_roots(outs)
    for i, t in enumerate(ins):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad (input {i}: set "
                               "requires_grad=True on it)")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(outs, _as_list(grad_outputs), create_graph)
    results = run_backward(outs, grads, retain_graph, create_graph, capture=ins)
    if materialize_grads:
        from ember import creation

        results = [g if g is not None else creation.zeros_like(t) for g, t in zip(results, ins)]
    elif not allow_unused:
        for i, g in enumerate(results):
            if g is None:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior.")
    return tuple(results)


def _batched_grad(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None, create_graph: bool,
                  allow_unused: bool | None, materialize_grads: bool) -> tuple:
    from ember.ops.views import stack  # ember.ops imports this package (grad mode) first: a real cycle

    batched = _as_list(grad_outputs)
    if not batched or any(g is None for g in batched):
        raise RuntimeError("autograd.grad(is_grads_batched=True): every grad_output must be a tensor whose first "
                           "dimension is the batch of cotangents")
    size = batched[0].shape[0]
    if any(g.shape[0] != size for g in batched):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{[g.shape[0] for g in batched]} for the mapped dimension (autograd.grad(is_grads_batched="
                         "True): the grad_outputs' first dimensions must all be the batch size)")
    keep = create_graph if retain_graph is None else retain_graph
    rows = [grad(outputs, inputs, [g[k] for g in batched], retain_graph=True if k < size - 1 else keep,
                 create_graph=create_graph, allow_unused=allow_unused, materialize_grads=materialize_grads)
            for k in range(size)]
    return tuple(None if column[0] is None else stack(list(column)) for column in zip(*rows))


def __getattr__(name: str) -> Any:
    """``ember.autograd.functional`` (jacobian, hessian, ...) loads on first use: it is built on the
    whole tensor API, which itself imports this package (grad mode) early."""
    if name in ("functional", "forward_ad", "graph", "profiler"):
        import importlib

        return importlib.import_module(f"ember.autograd.{name}")
    if name in ("NestedIOFunction", "enforce_grad_layout_policy"):  # need the Tensor class: loaded on first use
        import importlib

        return getattr(importlib.import_module("ember.autograd.nested_io"), name)
    raise AttributeError(f"module 'ember.autograd' has no attribute {name!r}")
