"""The cost model: FLOPs and bytes moved by one op, from shapes and dtypes only.

Each op record may carry ``flops`` and ``bytes_moved`` rules (``fn(inputs, outputs, attrs) -> int``,
where inputs/outputs are anything with ``.shape`` and ``.dtype``: specs, graph values, arrays, and
Python scalars or ``None`` for non-tensor arguments). An op without a rule gets its category's
default. The profiler, :class:`ember.utils.flop_counter.FlopCounterMode`, the model summary and the
MFU figures all read these numbers through :func:`op_flops` and :func:`op_bytes`.

Conventions (the ones PyTorch's flop counter and the MFU literature use):

* a multiply-add counts 2 FLOPs: ``mm`` of (M, K) @ (K, N) is ``2*M*N*K``;
* elementwise ops count one FLOP per output element (``exp`` as much as ``add``); casts count 0;
* reductions count one per input element; data movement (views, copies, indexing) counts 0;
* softmax / log_softmax count 5 per element (max, subtract, exp, sum, divide or log);
* layer_norm counts 5 per element (mean, subtract, square, sum, scale) plus 2 with an affine weight;
  its backward 8 per element;
* pooling counts one per window element read (``kh*kw`` per output element).

Bytes moved is the ideal traffic: every input read once plus every output written once (views and
other ops that only make metadata move 0). Real kernels move more (im2col, cache misses), so the
achieved bandwidth reported from it is a lower bound.

Example:
    >>> from ember.ops.registry import OPS, Spec
    >>> import ember
    >>> a, b = Spec((64, 128), ember.float32), Spec((128, 32), ember.float32)
    >>> op_flops(OPS["matmul"], (a, b), (Spec((64, 32), ember.float32),), {})
    524288
"""
from __future__ import annotations

from math import prod
from typing import Any, Sequence

# Categories whose ops compute nothing (they move, view, create or communicate data).
_NO_FLOPS = frozenset({"movement", "cast", "creation", "random", "state", "control", "comm"})
_ELEMENTWISE = frozenset({"unary", "binary", "ternary"})


def numel(spec: Any) -> int:
    """Elements of a spec/array/value; 0 for a Python scalar or ``None``."""
    shape = getattr(spec, "shape", None)
    return 0 if shape is None else prod(shape)


def nbytes(spec: Any) -> int:
    """Bytes of a spec/array/value (``numel * itemsize``); 0 for non-tensors."""
    shape = getattr(spec, "shape", None)
    if shape is None:
        return 0
    return prod(shape) * getattr(spec.dtype, "itemsize", 0)


def _tensors(specs: Sequence[Any]) -> list:
    return [s for s in specs if getattr(s, "shape", None) is not None]


def default_flops(category: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    """The category default: elementwise = numel(output), reduction = numel(input), movement = 0."""
    if category in _ELEMENTWISE or category == "fused":
        return numel(outputs[0]) if outputs else 0
    if category == "reduction":
        ins = _tensors(inputs)
        return numel(ins[0]) if ins else 0
    return 0


def default_bytes(inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    """Every tensor input read once and every output written once."""
    return sum(nbytes(s) for s in inputs) + sum(nbytes(s) for s in outputs)


def op_flops(op: Any, inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """FLOPs of one call of ``op`` (its own rule, else its category's default)."""
    rule = op.flops
    if rule is not None:
        return int(rule(inputs, outputs, attrs))
    if op.category == "fused":  # one elementwise pass per member op over the output's elements
        members = [m for m in str(attrs.get("ops") or "").split("+") if m] or (None,)
        return numel(outputs[0]) * len(members) if outputs else 0
    return default_flops(op.category, inputs, outputs)


def op_bytes(op: Any, inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """Ideal bytes moved by one call of ``op``: 0 for views, else inputs read + outputs written."""
    rule = op.bytes_moved
    if rule is not None:
        return int(rule(inputs, outputs, attrs))
    if getattr(op, "view", False):
        return 0
    return default_bytes(inputs, outputs)


# ---- explicit rules, referenced from the op records ---------------------------------------------
def no_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """For ops that only move or compare-free copy data."""
    return 0


def matmul_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """``2 * batch * M * N * K``; K is read from the first operand (transposed when the attrs say so)."""
    a = inputs[0]
    k = a.shape[-2] if attrs.get("transpose_a") else a.shape[-1]
    return 2 * numel(outputs[0]) * k


def linear_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """``2 * rows * out_features * in_features`` plus one add per output element for the bias."""
    x = inputs[0]
    out = numel(outputs[0])
    bias = out if len(_tensors(inputs)) > 2 else 0
    return 2 * out * x.shape[-1] + bias


def einsum_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """Two operands: 2 per point of the full index space (a multiply-add each); one: one add each;
    more: 2 per point per extra operand (ember's einsum contracts pairwise)."""
    from ember.ops.linalg import _letter_sizes, _parse_einsum  # local: linalg imports this module

    shapes = [tuple(s.shape) for s in _tensors(inputs)]
    subs, _ = _parse_einsum(attrs["equation"], shapes)
    sizes = _letter_sizes(subs, shapes, attrs["equation"])
    space = prod(sizes.values())
    return space if len(shapes) == 1 else 2 * space * (len(shapes) - 1)


def _conv_macs(n: int, out_channels: int, out_spatial: int, weight_shape: Sequence[int]) -> int:
    # Each output element is a dot product over (in_channels / groups) * kh * kw weights.
    return n * out_channels * out_spatial * prod(weight_shape[1:])


def conv2d_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """``2 * N * C_out * H_out * W_out * (C_in / groups) * kh * kw`` (as torch's flop counter), plus one
    add per output element when the record adds a bias (as ``linear_flops``)."""
    w, out = inputs[1], outputs[0]
    bias = numel(out) if len(_tensors(inputs)) > 2 else 0
    return 2 * _conv_macs(out.shape[0], out.shape[1], prod(out.shape[2:]), w.shape) + bias


def conv2d_input_grad_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """The transposed convolution costs what the forward did: inputs are (grad_out, weight)."""
    g, w = inputs[0], inputs[1]
    return 2 * _conv_macs(g.shape[0], g.shape[1], prod(g.shape[2:]), w.shape)


def conv2d_weight_grad_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """Also the forward's count: inputs are (x, grad_out), the output is the weight's gradient."""
    g = inputs[1]
    return 2 * _conv_macs(g.shape[0], g.shape[1], prod(g.shape[2:]), outputs[0].shape)


def softmax_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """5 per element: max, subtract, exp, sum, divide (log_softmax: log and subtract instead)."""
    return 5 * numel(outputs[0])


def layer_norm_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """5 per element (mean, subtract, square, sum, scale by rstd), 2 more with an affine transform."""
    n = numel(outputs[0])
    return 5 * n + (2 * n if attrs.get("has_weight") else 0)


def layer_norm_backward_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """8 per element: xhat, g*xhat, two means, two products, subtracts and the rstd scale."""
    return 8 * numel(inputs[1])


def pool2d_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """One comparison (max) or add (avg) per window element: ``numel(out) * kh * kw``."""
    return numel(outputs[0]) * prod(attrs["kernel"])


def avg_pool2d_backward_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """Spreading each window's gradient back: one add per window element of the forward."""
    return numel(inputs[0]) * prod(attrs["kernel"])


def max_pool2d_backward_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """Each gradient element is added once, at its window's argmax."""
    return numel(inputs[0])
