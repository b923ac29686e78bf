"""Op records that exist only in graphs: ``assign`` (a state write), ``group`` (run these together)
and ``matmul_t`` (matmul with transposed operands, what the simplifier folds transposes into).

Like every op they are :class:`~ember.ops.registry.OpDef` records, so the printer, validator,
serializer, executor and exporter treat them like any other op.

Example:
    >>> from ember.ops.registry import OPS
    >>> import ember.graph
    >>> OPS["assign"].side_effect
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.interpreters import TracingError
from ember.ops import cost
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops import batching
from ember.onnx import emitters as to_onnx
from ember.ops.simplify import transposes_into_matmul
from ember.ops.elementwise import _broadcast_shapes, conj_if_complex
from ember.ops import linalg as _linalg
from ember.ops.linalg import _matmul_impl, blas_context, gemm_2d, is_tiny
from ember.backends import cpu_blas_gemm, cpu_gemm_plan, cpu_hot_worker, cpu_mkl
from ember.tensor import Tensor


def _assign_rule(target: Spec, value: Spec) -> Spec:
    if tuple(target.shape) != tuple(value.shape):
        raise RuntimeError(f"assign: value of shape {tuple(value.shape)} cannot be assigned to a variable of shape "
                           f"{tuple(target.shape)}; variables keep their shape")
    return Spec(tuple(target.shape), target.dtype, target.device)


def _assign_impl(xp: Any, target: Any, value: Any) -> Any:
    # The executor copies the result into the variable's buffer at the end of the run.
    return value if value.dtype == target.dtype else value.astype(target.dtype)


def traced_assign(target: Any, value: Any) -> Any:
    """What ``assign(target, value)`` applied eagerly gives, for ``ember.compile`` to trace: its impl (the
    value cast to the target's dtype) and no write, which only a define-then-run graph's executor does,
    for a Variable. Recording the node would make a compiled call write where eager writes nothing.

    Example:
        >>> import ember
        >>> traced_assign(ember.zeros(2), ember.ones(2, dtype=ember.int64))
        tensor([1., 1.])
    """
    if not isinstance(target, Tensor) or not isinstance(value, Tensor):
        raise TracingError(f"assign: expected two tensors, got {type(target).__name__} and {type(value).__name__}; "
                           "ember.compile runs it eagerly")
    _assign_rule(target, value)
    out = value.detach()
    return out if value.dtype is target.dtype else out.to(target.dtype)


def _matmul_t_impl(xp: Any, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    # NumPy hands transposed views straight to BLAS (no copy), so this is one GEMM call; ember's GEMM reads
    # them in place too. Stacks take matmul's impl (one GEMM against a shared matrix, one einsum for the stacked
    # outer products of per-sample weight gradients under vmap).
    if a.ndim == 2 and b.ndim == 2:
        a, b = a.T if transpose_a else a, b.T if transpose_b else b
        if is_tiny(a.shape[0], a.shape[1], b.shape[1]):  # nothing to choose (linalg.TINY_MACS)
            return xp.matmul(a, b)
        if xp is np and a.shape[0] * a.shape[1] * b.shape[1] >= cpu_hot_worker.MIN_MACS:
            out = cpu_gemm_plan.matmul_2d(a, b, _linalg.native_kernel)  # the hot split, planned per signature
            if out is not None:
                return out
        out = gemm_2d(xp, a, b)
        if out is None:
            out = cpu_blas_gemm.split_gemm(a, b)  # large: one BLAS call per ember thread
        if out is None:  # Intel MKL where it is ember's BLAS (mkl20; NumPy arrays only)
            out = cpu_mkl.matmul(a, b)
        if out is not None:
            return out
        with blas_context(xp, a, b):  # small GEMMs on one BLAS thread (cpu_blas.small_gemm)
            return xp.matmul(a, b)
    return _matmul_impl(xp, xp.swapaxes(a, -1, -2) if transpose_a else a, xp.swapaxes(b, -1, -2) if transpose_b else b)


def _matmul_t_rule(a: Spec, b: Spec, transpose_a: bool = False, transpose_b: bool = False) -> Spec:
    m = a.shape[-1] if transpose_a else a.shape[-2]
    n = b.shape[-2] if transpose_b else b.shape[-1]
    return Spec(_broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n), a.dtype, a.device)


def _matmul_t_a_grad(ctx: Any, g: Any) -> Any:
    """a's gradient: ``g @ B^T`` (B = b, or b^T when transpose_b), transposed back when a was read transposed.
    The engine sums broadcast batch dimensions back to a's shape."""
    b = ctx.inputs[1]
    ga = g @ conj_if_complex(b if ctx.attrs.get("transpose_b", False) else b.mT)
    return ga.mT if ctx.attrs.get("transpose_a", False) else ga


def _matmul_t_b_grad(ctx: Any, g: Any) -> Any:
    """b's gradient: ``A^T @ g`` (A = a, or a^T when transpose_a), transposed back when b was read transposed."""
    a = ctx.inputs[0]
    gb = conj_if_complex(a if ctx.attrs.get("transpose_a", False) else a.mT) @ g
    return gb.mT if ctx.attrs.get("transpose_b", False) else gb


if "assign" not in OPS:
    ASSIGN = register(OpDef(
        name="assign", batch="loop", category="state", impl=_assign_impl, shape_rule=_assign_rule, save="none",
        side_effect=True, doc="assign(variable, value): write value into the variable after the run",
    ))
    GROUP = register(OpDef(
        name="group", batch="loop", category="control", impl=lambda xp, *values: None, save="none",
        shape_rule=lambda *specs: Spec((), dtypes.bool_, next((s.device for s in specs if isinstance(s, Spec)), None)),
        doc="group(*ops): an op that runs when fetched only to make its inputs run",
    ))
    MATMUL_T = register(OpDef(
        name="matmul_t", batch=batching.matmul_t, category="linalg", impl=_matmul_t_impl, shape_rule=_matmul_t_rule, vjp=(_matmul_t_a_grad, _matmul_t_b_grad),
        onnx=to_onnx.matmul_t, doc="matmul(a^T?, b^T?): transposes folded into the matmul", flops=cost.matmul_flops,
        simplify=transposes_into_matmul(lambda: OPS["matmul_t"]),
    ))
else:  # re-import (e.g. importlib.reload in tests): keep the records already registered
    ASSIGN, GROUP, MATMUL_T = OPS["assign"], OPS["group"], OPS["matmul_t"]
