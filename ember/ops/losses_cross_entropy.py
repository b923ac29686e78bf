"""Softmax cross entropy with class-index targets as one fused op and one fused backward.

Composed from ops (log_softmax, a target check, where, gather, neg, mul, two sums, a divide), the
loss of a classifier cost ~12 dispatches forward and ~8 autograd nodes backward: 0.19 ms for a
64 x 10 batch against torch's 0.024 ms (one thread), about 1% of an MNIST CNN step. Here it is one
op each way, on the common case ``cross_entropy(input (N, C) float32/float64, target (N,) int)``
with any ``ignore_index`` and reduction, no class weights and no label smoothing (the rest keeps
the composite in ``ember/ops/losses.py``).

* ``cross_entropy(x, t) -> (loss, logp)``: ``logp`` (the log-softmax, a non-differentiable second
  output) is kept for the backward, as log_softmax kept its output in the composite;
* ``cross_entropy_backward(g, logp, t) -> dx = (softmax - onehot(t)) * valid * scale``.

Both also take leading dims, ``(..., N, C)`` logits and ``(..., N)`` targets, each leading index
reduced on its own: that is how vmap runs them (its batch is one more leading dim, one call each
way, no reshapes around it: ``vmap(grad(loss))`` of a classifier). The public ``cross_entropy``
calls them with 2-D logits only.

The forward takes the composite's exact steps (the same log-softmax code, picks, products and
sums), so the loss is the composite's bit for bit. With ``create_graph=True`` the vjp
differentiates the composite, so second derivatives match torch.

Example:
    >>> import ember
    >>> loss, _ = cross_entropy_fused(ember.zeros(2, 4), ember.tensor([1, 3]), -100, "mean")
    >>> round(loss.item(), 4)  # log(4)
    1.3863
"""
from __future__ import annotations

from typing import Any

import numpy as np  # np.errstate: a mean over only ignored targets is 0/0 (NaN, as PyTorch)

from ember.autograd import grad_mode
from ember.backends import capture_state
from ember.ops import batching, dispatch, elementwise as ew
from ember.ops.movement import int_range
from ember.ops.nn_ops import _log_softmax_impl, log_softmax
from ember.ops.registry import OpDef, Spec, register
from ember.onnx import emitters as to_onnx


def _targets(xp: Any, t: Any, ignore_index: int, shape: tuple, check: bool) -> tuple:
    """(valid mask, targets with ignored entries at class 0); raises on an out-of-range class."""
    classes = shape[-1]
    valid = t != ignore_index
    safe = xp.where(valid, t, 0)
    if check and safe.size and bool(((safe < 0) | (safe >= classes)).any()):
        low, high = int(safe.min()), int(safe.max())
        bad = high if high >= classes else low
        raise IndexError(f"cross_entropy: nll_loss: target {bad} is out of bounds for {classes} classes "
                         f"(input shape {tuple(shape)})")
    return valid, safe


def _rows_of(xp: Any, a: Any, safe: Any) -> tuple:
    """``a`` (..., N, C) as (M, C) rows and the row numbers for ``safe`` (..., N) picks."""
    if a.ndim == 2:  # the public op's case: no reshapes
        return a, xp.arange(a.shape[0]), safe
    rows = a.reshape(-1, a.shape[-1])
    return rows, xp.arange(rows.shape[0]), safe.reshape(-1)


def _all_valid_2d(xp: Any, x: Any, t: Any, ignore_index: int) -> bool:
    """The common call: 2-D logits, every target a class index in range (none ignored). Then the where-selects
    and the count of valid rows are identities (the same bits without them: ``where(True, v, 0)`` is ``v`` and
    a sum of N float ones is exactly N), which the fast paths below skip: ~10 NumPy calls of a 256 x 10 loss."""
    if x.ndim != 2 or t.ndim != 1 or not t.size:
        return False
    if t.__class__ is np.ndarray:  # (the methods' Python wrappers cost ~1 us each)
        low, high = int_range(t)
    elif capture_state.ACTIVE:  # a CUDA graph capture: no host reads (the general path, unchecked)
        return False
    else:
        low, high = int(t.min()), int(t.max())
    return 0 <= low and high < x.shape[1] and not (low <= ignore_index <= high)


def _forward_impl(xp: Any, x: Any, t: Any, ignore_index: int, reduction: str) -> tuple:
    """Logits (..., N, C), targets (..., N): each leading index is its own loss (vmap folds its batch there)."""
    logp = _log_softmax_impl(xp, x, -1)
    if reduction != "none" and _all_valid_2d(xp, logp, t, ignore_index):
        losses = -logp[xp.arange(t.shape[0]), t]
        total = losses.sum(axis=-1)
        if reduction == "mean":
            total = total / x.dtype.type(t.shape[0])
        return xp.asarray(total, dtype=x.dtype), logp
    # During a CUDA graph capture the range check (a host read) is skipped, as PyTorch's CUDA kernel only asserts.
    valid, safe = _targets(xp, t, ignore_index, x.shape, check=not capture_state.ACTIVE)
    w = valid.astype(x.dtype)
    rows, index, picks = _rows_of(xp, logp, safe)
    picked = rows[index, picks]
    # where, not * w: an ignored row is never read (a NaN or inf logit there must not reach the loss)
    losses = xp.where(valid, -(picked if picked.shape == t.shape else picked.reshape(t.shape)), 0).astype(x.dtype,
                                                                                                        copy=False)
    if reduction == "none":
        return losses, logp
    total = losses.sum(axis=-1)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / w.sum(axis=-1)
    return xp.asarray(total, dtype=x.dtype), logp


def _backward_impl(xp: Any, g: Any, logp: Any, t: Any, ignore_index: int, reduction: str) -> Any:
    """``g`` has the loss's shape or broadcasts to it (an unbatched cotangent under vmap)."""
    if reduction != "none" and _all_valid_2d(xp, logp, t, ignore_index) and getattr(g, "ndim", 0) == 0:
        grad = xp.exp(logp)
        grad[xp.arange(t.shape[0]), t] -= 1
        if reduction == "mean":
            g = g / logp.dtype.type(t.shape[0])
        grad *= xp.asarray(g, dtype=logp.dtype)
        return grad
    valid, safe = _targets(xp, t, ignore_index, logp.shape, check=False)
    grad = xp.exp(logp)
    rows, index, picks = _rows_of(xp, grad, safe)
    rows[index, picks] -= 1  # an ignored row's 1 lands on class 0; the row is zeroed below
    if reduction != "none":
        if reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                g = g / valid.sum(axis=-1, dtype=logp.dtype)
        g = g[..., None]  # each loss's cotangent over its N rows
    # ignored rows get 0 whatever g is (PyTorch's: also when every target is ignored and g = 0/0)
    grad *= xp.where(valid, g, 0).astype(logp.dtype, copy=False)[..., None]
    # an ignored row holding NaN/inf: 0 there too (NaN * 0 above); the cheap (N,) test first
    # (under a CUDA graph capture unconditionally: the test is a host read, the where gives the same values)
    if capture_state.ACTIVE or (not bool(valid.all()) and not bool(xp.isfinite(logp).all())):
        grad = xp.where(valid[..., None], grad, 0).astype(logp.dtype, copy=False)
    return grad


def _composite(x: Any, t: Any, ignore_index: int, reduction: str) -> Any:
    """The loss in ember ops (for create_graph=True backward graphs)."""
    valid = t != ignore_index
    w = valid.to(x.dtype)
    picked = log_softmax(x, -1).gather(-1, ew.where(valid, t, 0).unsqueeze(-1)).squeeze(-1)
    losses = ew.where(valid, -picked, 0.0)
    if reduction == "none":
        return losses
    return losses.sum(-1) / w.sum(-1) if reduction == "mean" else losses.sum(-1)


def _vjp(ctx: Any, grads: Any) -> tuple:
    g = grads[0]
    x, t = ctx.inputs
    attrs = ctx.attrs
    if not grad_mode.STATE.enabled:  # plain backward: one fused op from the saved log-softmax
        return dispatch.apply(CROSS_ENTROPY_BACKWARD, (g, ctx.out[1], t), dict(attrs)), None
    from ember.autograd import grad as autograd_grad  # noqa: PLC0415 - ember.autograd imports the ops

    (gx,) = autograd_grad([_composite(x, t, **attrs)], [x], [g], create_graph=True)
    return gx, None


# ---- vmap: the batch is one more leading dim of the op itself ------------------------------------------
def _batch_forward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """(B, ..., N, C) logits and (B, ..., N) targets: one call, each sample reduced over its own N rows."""
    x, t = (batching.with_batch(a, d, size) for a, d in zip(args, bdims))
    return dispatch.apply(op, (x, t), attrs), (0, 0)


def _batch_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """One call; an unbatched cotangent (the same for every sample) broadcasts over the batch in the impl."""
    (g, logp, t), (dg, dl, dt) = args, bdims
    g = batching.to_front(g, dg) if dg is not None else g
    logp, t = batching.with_batch(logp, dl, size), batching.with_batch(t, dt, size)
    return dispatch.apply(op, (g, logp, t), attrs), 0


def _batch_array_vjp(ctx: Any, g: Any, gdim: int | None) -> list:
    """The batched array rule (OpDef.batch_array_vjp, ember/func/batched_backward.py): the backward impl on
    vmap's batch as one more leading dim, as ``_batch_backward`` calls the op (an unbatched ``g`` broadcasts)."""
    logp, t = ctx.out[1], ctx.inputs[1]
    if logp.ndim == len(ctx.input_meta[0]):  # unbatched logits: each sample's targets differ
        logp = np.broadcast_to(logp, (ctx.size,) + logp.shape)
    if t.ndim == len(ctx.input_meta[1]):
        t = np.broadcast_to(t, (ctx.size,) + t.shape)
    return [(_backward_impl(np, g, logp, t, **ctx.attrs), 0), None]


def _rule(x: Spec, t: Spec, ignore_index: int, reduction: str) -> tuple:
    loss = Spec(tuple(x.shape[:-1]) if reduction == "none" else tuple(x.shape[:-2]), x.dtype, x.device)
    return loss, Spec(x.shape, x.dtype, x.device)


CROSS_ENTROPY = register(OpDef(
    name="cross_entropy", batch=_batch_forward, category="nn", impl=_forward_impl, vjp=_vjp, save="both", num_outputs=2,
    saved_outputs=(1,),  # the log-softmax only: `loss += reg` before backward is fine, as in torch
    nondiff_inputs=(1,), nondiff_outputs=(1,), shape_rule=_rule, onnx=to_onnx.cross_entropy,
    flops=lambda inputs, outputs, attrs: 6 * int(np.prod(inputs[0].shape)),
))
CROSS_ENTROPY.batch_array_vjp = _batch_array_vjp
# The array gradient rule (OpDef.array_vjp; the loss's gradient only, the log-softmax output takes none): the
# backward op's impl on the saved arrays, as the vjp's dispatch of CROSS_ENTROPY_BACKWARD runs it (read from the
# record at each call, as dispatch does, so a patched impl is seen).
CROSS_ENTROPY.array_vjp = (lambda ctx, g: CROSS_ENTROPY_BACKWARD.impl(np, g, ctx.out[1], ctx.inputs[1], **ctx.attrs),
                           None)
CROSS_ENTROPY_BACKWARD = register(OpDef(
    name="cross_entropy_backward", batch=_batch_backward, category="nn", impl=_backward_impl,
    shape_rule=lambda g, logp, t, ignore_index, reduction: Spec(logp.shape, logp.dtype, logp.device),
    flops=lambda inputs, outputs, attrs: 3 * int(np.prod(inputs[1].shape)),
))


def fusable(input: Any, target: Any, weight: Any, label_smoothing: float) -> bool:
    """Whether ``cross_entropy`` can take the fused op: (N, C) float32/float64 logits, (N,) int64
    class indices, no class weights, no label smoothing."""
    if weight is not None or label_smoothing > 0:
        return False
    x, t = input._data, target._data  # (arrays, or a graph's symbolic values: NumPy dtypes either way)
    return (x.ndim == 2 and t.ndim == 1 and (x.dtype == _FLOAT32 or x.dtype == _FLOAT64) and t.dtype == _INT64
            and t.shape[0] == x.shape[0] and x.shape[1] > 0)


_FLOAT32, _FLOAT64, _INT64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def cross_entropy_fused(input: Any, target: Any, ignore_index: int, reduction: str) -> tuple:
    """``(loss, log_softmax(input))`` of the fused op (see the module docstring)."""
    return dispatch.apply(CROSS_ENTROPY, (input, target), {"ignore_index": int(ignore_index), "reduction": reduction})
