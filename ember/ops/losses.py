"""Loss functions (PyTorch's ``torch.nn.functional`` losses), composites of ember ops.

All take ``reduction='mean'|'sum'|'none'``. Class-index losses accept (N, C) or (N, C, d1, ...)
inputs with (N,) or (N, d1, ...) integer targets, and (C,) inputs with a scalar target.

Example:
    >>> import ember
    >>> from ember.nn import functional as F
    >>> round(F.cross_entropy(ember.zeros(2, 4), ember.tensor([1, 3])).item(), 4)  # log(4)
    1.3863
"""
from __future__ import annotations

import warnings

from typing import Any

from ember import dtypes
from ember.ops import dispatch, elementwise as ew, losses_cross_entropy as fused_cross_entropy, reductions as red
from ember.ops.elementwise import elementwise_rule
from ember.ops.nn_ops import cosine_similarity, log_softmax, logsigmoid, pairwise_distance
from ember.ops.registry import OpDef, register
from ember.onnx import emitters as to_onnx
from ember.amp.policy import autocast_policy
from ember.autograd.node import named_backward
from ember.creation import tensor
from ember.ops.extra_math import xlogy

_REDUCTIONS = ("mean", "sum", "none")


def legacy_reduction(size_average: Any, reduce: Any, stacklevel: int = 3) -> str:
    """The reduction PyTorch reads from the deprecated ``size_average``/``reduce`` flags, warning as torch does.

    >>> legacy_reduction(None, False)  # 'none', with "... please use reduction='none' instead."
    """
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = ("mean" if size_average else "sum") if reduce else "none"
    # the warning names a line inside the library, as torch's (so it prints once per process, not per call site)
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                  UserWarning, stacklevel=stacklevel)
    return reduction


def _reduction(op: str, reduction: str, size_average: Any = None, reduce: Any = None) -> str:
    if size_average is not None or reduce is not None:  # PyTorch's deprecated pair of flags
        return legacy_reduction(size_average, reduce)
    if reduction == "elementwise_mean":  # PyTorch 0.4's name, still accepted by torch 2.x with this warning
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                      UserWarning, stacklevel=3)
        return "mean"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction; use 'mean', 'sum' or 'none'")
    return reduction


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction in ("mean", "elementwise_mean"):
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_same_shape(op: str, input: Any, target: Any) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{op}: target size {tuple(target.shape)} must be the same as input size "
                         f"{tuple(input.shape)}")


def _promoting_target(target: Any, input: Any) -> Any:
    """The target of l1/mse/smooth_l1 losses: a floating tensor promotes with input (torch's ``input - target``:
    float32 with float64 gives float64), anything else is cast to input's dtype."""
    if isinstance(target, dispatch.Tensor) and (target.dtype.is_floating_point or target.dtype.is_complex):
        return target
    return _as_float_target(target, input)


def _as_float_target(target: Any, input: Any) -> Any:
    if not isinstance(target, dispatch.Tensor):
        return tensor(target, dtype=input.dtype, device=input.device)
    return target if target.dtype is input.dtype else target.to(input.dtype)


# ---- regression -----------------------------------------------------------------------------------
@named_backward("MseLossBackward0", inputs=((0, "input"), (1, "target")))
@autocast_policy("fp32")
def mse_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
             weight: Any = None) -> Any:
    """Mean squared error: (input - target)^2 (broadcast), reduced."""
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    diff = input - _promoting_target(target, input)
    loss = diff * diff
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
            weight: Any = None) -> Any:
    """Mean absolute error |input - target|, reduced; with ``weight`` (input's shape) the errors are weighted
    and 'mean' divides by the weights' sum (PyTorch 2.13's rule)."""
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    errors = ew.abs(input - _promoting_target(target, input))
    if weight is None:
        return _reduce(errors, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"l1_loss: weights and input must have the same size (weight {tuple(weight.shape)}, "
                         f"input {tuple(input.shape)})")
    weighted = errors * weight
    return weighted.sum() / weight.sum() if reduction == "mean" else _reduce(weighted, reduction)


@named_backward("SmoothL1LossBackward0", inputs=((0, "input"), (1, "target")))
@autocast_policy("fp32")
def smooth_l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                   beta: float = 1.0) -> Any:
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    signed = input - _promoting_target(target, input)
    diff = ew.abs(signed)
    if beta == 0:
        return _reduce(diff, reduction)
    # The quadratic side sees d clamped to [-beta, beta], so an infinite difference (whose branch where() drops)
    # cannot send inf * 0 = NaN into the gradient; PyTorch's gradient there is sign(d). It squares d itself,
    # not |d|: abs's zero slope at d == 0 made the second derivative 0 there (torch: 1 / beta).
    small = ew.clamp(signed, min=-float(beta), max=float(beta))
    return _reduce(ew.where(diff < beta, small * small * (0.5 / beta), diff - 0.5 * beta), reduction)


@named_backward("HuberLossBackward0", inputs=((0, "input"), (1, "target")))
@autocast_policy("fp32")
def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None) -> Any:
    reduction = _reduction("huber_loss", reduction)
    signed = input - _as_float_target(target, input)
    diff = ew.abs(signed)
    # as smooth_l1_loss: no inf * 0 from the dropped branch, and d itself squared (second derivative 1 at d == 0)
    small = ew.clamp(signed, min=-float(delta), max=float(delta))
    loss = ew.where(diff < delta, small * small * 0.5, (diff - 0.5 * delta) * delta)
    return _reduce(loss * weight if weight is not None else loss, reduction)


# ---- classification by class index ------------------------------------------------------------------
def _class_layout(op: str, input: Any, target: Any) -> tuple:
    """Normalize to input (N, C, ...) and target (N, ...); returns (input, target, squeeze_scalar)."""
    if target.dtype.category != 1:
        raise RuntimeError(f"{op}: expected target of class indices with an integer dtype (Long), got {target.dtype}"
                           f"; for class probabilities pass a float target with the input's shape to cross_entropy")
    if target.dtype not in (dtypes.int64, dtypes.uint8):
        raise RuntimeError(f"{op}: expected target dtype to be Long or Byte, but got {target.dtype} (as PyTorch); "
                           "convert the class indices with .long()")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ValueError(f"{op}: for a 1-D input of shape {tuple(input.shape)} the target must be a scalar, got "
                             f"shape {tuple(target.shape)}")
        return input.unsqueeze(0), target.reshape(1), True
    if input.ndim < 1 or target.ndim != input.ndim - 1 or tuple(target.shape) != (input.shape[0],) + tuple(
            input.shape[2:]):
        # PyTorch's classes: a batch size mismatch is a ValueError, any other target shape a RuntimeError
        # (a 0-d target counts as batch size 0 there: `cross_entropy(out[None], y_scalar)` is a ValueError)
        batch = target.ndim == 0 or target.shape[0] != input.shape[0]
        raise (ValueError if batch else RuntimeError)(f"{op}: expected target of shape {(input.shape[0],) + tuple(input.shape[2:])} for input of "
                         f"shape {tuple(input.shape)} (N, C, d1, ...), got target of shape {tuple(target.shape)}")
    return input, target, False


def _pick(input: Any, target: Any) -> Any:
    """input[n, target[n, ...], ...] as a tensor shaped like target."""
    return input.gather(1, target.unsqueeze(1)).squeeze(1)


@named_backward("NllLossBackward0", inputs=((0, "input"),))
@autocast_policy("fp32")
def nll_loss(input: Any, target: Any, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
             reduce: Any = None, reduction: str = "mean") -> Any:
    """Negative log likelihood of log-probabilities ``input`` at class ``target``.

    ``weight`` rescales each class; ``mean`` divides by the summed weights of the non-ignored targets.
    """
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    x, t, scalar = _class_layout("nll_loss", input, target)
    classes = x.shape[1]
    valid = t != ignore_index
    safe_t = ew.where(valid, t, 0)
    if t.numel() and not dispatch.is_symbolic(t):  # traced targets have no values to check
        lo, hi = int(safe_t.min()), int(safe_t.max())
        if lo < 0 or hi >= classes:
            raise IndexError(f"nll_loss: target {hi if hi >= classes else lo} is out of bounds for {classes} classes "
                             f"(input shape {tuple(input.shape)})")
    w = valid.to(x.dtype)
    if weight is not None:
        if weight.numel() != classes:
            raise RuntimeError(f"nll_loss: weight tensor should be defined either for all {classes} classes or no "
                               f"classes but got weight tensor of shape {tuple(weight.shape)}")
        w = w * weight.to(x.dtype)[safe_t]
    # where, not a product with the 0 weight: an ignored position's input is never read (NaN there stays out)
    loss = ew.where(valid, -_pick(x, safe_t) * w, 0.0)
    if reduction == "none":
        return loss.squeeze(0) if scalar else loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def _class_index_target(input: Any, target: Any, *args: Any, label_smoothing: float = 0.0, **kwargs: Any) -> bool:
    """torch's cross_entropy ends in nll_loss for class indices without smoothing (then it prints NllLossBackward0)."""
    smoothing = args[5] if len(args) > 5 else label_smoothing
    return not getattr(target, "is_floating_point", lambda: True)() and not smoothing


@named_backward("NllLossBackward0", when=_class_index_target, inputs=((0, "input", "LogSoftmaxBackward0"),))
@autocast_policy("fp32")
def cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                  reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    """Softmax cross entropy over dim 1 with class-index or class-probability targets."""
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if fused_cross_entropy.fusable(input, target, weight, label_smoothing):  # the common case: one op each way
        return fused_cross_entropy.cross_entropy_fused(input, target, ignore_index, reduction)[0]
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    classes = input.shape[class_dim]
    w_view = None
    if weight is not None:
        w_view = weight.to(input.dtype).reshape((classes,) + (1,) * (input.ndim - 1 - class_dim))
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):  # PyTorch: RuntimeError here (ValueError for BCE)
            raise RuntimeError(f"cross_entropy: class-probability target shape {tuple(target.shape)} must match the "
                               f"input shape {tuple(input.shape)}; for class indices pass an integer target")
        probs = target.to(input.dtype)
        if label_smoothing > 0:
            probs = probs * (1.0 - label_smoothing) + label_smoothing / classes
        terms = logp * probs if w_view is None else logp * probs * w_view
        loss = -red.sum(terms, class_dim)
        if reduction == "mean":
            return loss.sum() / max(input.numel() // classes, 1) if input.numel() else loss.sum() * float("nan")
        return _reduce(loss, reduction)
    _class_layout("cross_entropy", input, target)  # so a bad target names cross_entropy, not nll_loss
    try:
        nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    except IndexError as error:  # name the function the user called
        raise IndexError(f"cross_entropy: {error}") from None
    if label_smoothing <= 0:
        return nll
    x, t, scalar = _class_layout("cross_entropy", logp, target)
    keep = t != ignore_index
    valid = keep.to(input.dtype)
    terms = x if w_view is None else x * (w_view if not scalar else w_view.reshape(1, classes))
    smooth = ew.where(keep, -red.sum(terms, 1), 0.0)  # ignored rows unread, as in nll_loss
    if reduction == "none":
        smooth = smooth.squeeze(0) if scalar else smooth
    elif reduction == "sum":
        smooth = smooth.sum()
    elif weight is not None:
        safe_t = ew.where(t != ignore_index, t, 0)
        smooth = smooth.sum() / (weight.to(input.dtype)[safe_t] * valid).sum()
    else:
        smooth = smooth.sum() / valid.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


# ---- binary ----------------------------------------------------------------------------------------------
def _bce_impl(xp: Any, p: Any, t: Any) -> Any:
    # Refused here, where the values are at hand (also when a compiled graph runs): NaN fails the test too.
    if p.size and not bool(((p >= 0) & (p <= 1)).all()):
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1 (probabilities), "
                           "got values outside [0, 1] or NaN; for logits use binary_cross_entropy_with_logits")
    # PyTorch clamps each log at -100, so p = 0 or 1 gives a finite loss (and log1p(-p) keeps tiny p exact).
    log_p = xp.maximum(xp.log(p), -100.0)
    log_q = xp.maximum(xp.log1p(-p), -100.0)
    return (t - 1) * log_q - t * log_p


# One rule per input (the engine sums broadcast gradients back to each input's shape).
_BCE_VJP = (
    # PyTorch's gradient: (p - t) / max(p (1 - p), 1e-12), finite at p = 0 and p = 1 like the loss.
    lambda ctx, g: g * (ctx.inputs[0] - ctx.inputs[1]) / ew.clamp((1.0 - ctx.inputs[0]) * ctx.inputs[0], min=1e-12),
    # PyTorch does not clamp the logs here: inf at p = 0 or 1.
    lambda ctx, g: g * (ew.log1p(-ctx.inputs[0]) - ew.log(ctx.inputs[0])),
)


def _bce_logits_impl(xp: Any, x: Any, t: Any, *pos_weight: Any) -> Any:
    # PyTorch's formula: (1 - t) x + w log(1 + exp(-x)), w = (pos_weight - 1) t + 1, with
    # log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0) (never overflows).
    softplus_neg = xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(-x, 0)
    if pos_weight:
        return (1 - t) * x + ((pos_weight[0] - 1) * t + 1) * softplus_neg
    return (1 - t) * x + softplus_neg


def _bce_logits_vjp(ctx: Any, g: Any) -> tuple:
    """One function: with ``pos_weight`` the gradients share ``pw * t`` and ``softplus(-x)``."""
    x, t = ctx.inputs[0], ctx.inputs[1]
    pw = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    # PyTorch's gradient: sigmoid(x) - t (with pos_weight: (pw t + 1 - t) sigmoid(x) - pw t), formed
    # directly so the tails keep their digits and a logit of 0 gives 0.5 - t.
    if pw is None:
        return (g * (ew.sigmoid(x) - t) if ctx.needs[0] else None), (g * -x if ctx.needs[1] else None)
    pwt = pw * t
    softplus_neg = -logsigmoid(x)
    gx = g * ((pwt + 1.0 - t) * ew.sigmoid(x) - pwt) if ctx.needs[0] else None
    gt = g * ((pw - 1.0) * softplus_neg - x) if ctx.needs[1] else None
    gpw = g * t * softplus_neg if ctx.needs[2] else None
    return gx, gt, gpw


BINARY_CROSS_ENTROPY_WITH_LOGITS = register(OpDef(
    name="binary_cross_entropy_with_logits", category="ternary", impl=_bce_logits_impl, vjp=_bce_logits_vjp,
    shape_rule=elementwise_rule(), float_only=True, onnx=to_onnx.binary_cross_entropy_with_logits,
))


BINARY_CROSS_ENTROPY = register(OpDef(
    name="binary_cross_entropy", category="binary", impl=_bce_impl, vjp=_BCE_VJP, shape_rule=elementwise_rule(),
    float_only=True, onnx=to_onnx.binary_cross_entropy,
))


@named_backward("BinaryCrossEntropyBackward0", inputs=((0, "input"), (1, "target"), (2, "weight")))
@autocast_policy("fp32")
def binary_cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Any:
    """-(t log p + (1 - t) log(1 - p)) with the logs clamped at -100, as PyTorch."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    target = _as_float_target(target, input)
    _check_same_shape("binary_cross_entropy", input, target)
    loss = dispatch.apply(BINARY_CROSS_ENTROPY, (input, target))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@named_backward("BinaryCrossEntropyWithLogitsBackward0", inputs=((0, "input"), (1, "target")))
@autocast_policy("fp32")
def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                                     reduce: Any = None, reduction: str = "mean", pos_weight: Any = None) -> Any:
    """Sigmoid + binary cross entropy in one stable formula; ``pos_weight`` scales the positive term."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    target = _as_float_target(target, input)
    _check_same_shape("binary_cross_entropy_with_logits", input, target)
    # A primitive with PyTorch's gradient sigmoid(x) - t: a composite of abs and relu gave 1 - t at a logit
    # of 0 (a zero-initialized classifier's first step was wrong) and lost the tails to cancellation.
    args = (input, target) if pos_weight is None else (input, target, pos_weight.to(input.dtype))
    loss = dispatch.apply(BINARY_CROSS_ENTROPY_WITH_LOGITS, args)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---- margin and divergence ------------------------------------------------------------------------------
@autocast_policy("fp32")
def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0, weight: Any = None,
                      size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Any:
    """Multiclass hinge (SVM) loss: sum_{i != y} max(0, margin - x[y] + x[i])^p / C, per sample."""
    reduction = _reduction("multi_margin_loss", reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    scalar = input.ndim <= 1  # (C,) or a 0-d input (one class, as torch)
    x = input.reshape(1, -1) if scalar else input
    t = target.reshape(1) if scalar and target.ndim <= 1 else target
    if x.ndim != 2 or t.ndim != 1 or t.shape[0] != x.shape[0]:
        raise ValueError(f"multi_margin_loss: expected input (N, C) and target (N,), got {tuple(input.shape)} and "
                         f"{tuple(target.shape)}")
    classes = x.shape[1]
    correct = _pick(x, t).unsqueeze(1)
    hinge = ew.relu(x - correct + margin)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight.to(x.dtype)[t].unsqueeze(1)
    from ember.nn.functional import one_hot

    # where, not a product with 0: the target's own term (x[y] - x[y], NaN for an infinite x[y]) is never read
    not_target = one_hot(t, classes) == 0
    loss = red.sum(ew.where(not_target, hinge, 0.0), 1) / classes
    if scalar and reduction == "none":
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def soft_margin_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Any:
    reduction = _reduction("soft_margin_loss", reduction, size_average, reduce)
    target = _as_float_target(target, input)  # torch's result has input's dtype (a float64 target included)
    return _reduce(-logsigmoid(target * input), reduction)  # log(1 + exp(-y x)), PyTorch's gradient at 0


@autocast_policy("fp32")
def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Any:
    reduction = _reduction("hinge_embedding_loss", reduction, size_average, reduce)
    # torch's masks: a target that is neither 1 nor -1 takes both terms (not neither)
    loss = ew.where(target != 1, ew.clamp(margin - input, min=0.0), 0.0) + ew.where(target != -1, input, 0.0)
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, size_average: Any = None,
                        reduce: Any = None, reduction: str = "mean") -> Any:
    reduction = _reduction("margin_ranking_loss", reduction, size_average, reduce)
    # clamp(min=0), not relu: PyTorch's hinge passes the gradient at exactly 0.
    return _reduce(ew.clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


@autocast_policy("fp32")
def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> Any:
    """KL(target || exp(input)) pointwise; ``batchmean`` divides the sum by the batch size."""
    if reduction == "batchmean":
        loss = kl_div(input, target, reduction="sum", log_target=log_target)
        return loss / input.shape[0] if input.ndim else loss
    reduction = _reduction("kl_div", reduction, size_average, reduce)
    if log_target:
        loss = ew.exp(target) * (target - input)
    else:
        loss = xlogy(target, target) - target * input  # PyTorch's formula: 0 * inf input is NaN there too
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False, size_average: Any = None,
                     eps: float = 1e-8, reduce: Any = None, reduction: str = "mean") -> Any:
    if reduction == "elementwise_mean" and size_average is None and reduce is None:  # torch's Python check refuses it
        raise ValueError(f"{reduction} is not a valid value for reduction")
    reduction = _reduction("poisson_nll_loss", reduction, size_average, reduce)
    loss = ew.exp(input) - target * input if log_input else input - target * ew.log(input + eps)
    if full:
        import math

        stirling = target * ew.log(ew.where(target > 1, target, 1.0)) - target + ew.log(
            ew.where(target > 1, target, 1.0) * (2 * math.pi)) * 0.5
        loss = loss + ew.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, size_average: Any = None,
                          reduce: Any = None, reduction: str = "mean") -> Any:
    reduction = _reduction("cosine_embedding_loss", reduction, size_average, reduce)
    if not (input1.dtype.is_floating_point and input2.dtype.is_floating_point):  # bool/int: torch's float result
        common = dtypes.result_type(input1, input2)
        common = common if common.is_floating_point else dtypes.get_default_dtype()
        input1, input2 = input1.to(common), input2.to(common)
    cos = cosine_similarity(input1, input2, dim=-1, eps=1e-12)
    loss = ew.where(target == 1, 1.0 - cos, ew.relu(cos - margin))
    return _reduce(loss, reduction)


@autocast_policy("fp32")
def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    reduction = _reduction("triplet_margin_loss", reduction, size_average, reduce)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ew.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(ew.relu(d_pos - d_neg + margin), reduction)

