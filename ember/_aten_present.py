"""Each ember op record as the ATen calls torch's ``__torch_dispatch__`` would see (the mapping, one entry per record).

A level (:mod:`ember._dispatch_levels`) runs a record by calling ``present(record, args, attrs)(call)``; ``call(func,
args, kwargs)`` hands one ATen call to the mode or subclass, whose answer stands for that call's result. Most records
are one call (``exp`` is ``aten.exp.default``, ``add`` is ``aten.add.Tensor``); some are torch's decomposition
(``linear`` is ``aten.t`` + ``aten.addmm``, with ``aten.view`` around it for N-D inputs, as torch's autograd shows it;
``cross_entropy`` is ``aten._log_softmax`` + ``aten.nll_loss_forward``); a record without an ATen twin is
``torch.ops.ember.<record>.default`` called with the record's own arguments and attributes (``layer_norm``,
``scaled_dot_product_attention``, ``conv2d``'s two backward ops, ...). docs/pytorch-compat.md lists the mapping.

Example:
    >>> import ember
    >>> from ember.ops.registry import OPS
    >>> calls = []
    >>> show = presentation(OPS["relu_grad"], (ember.ones(2), ember.ones(2)), {})
    >>> _ = show(lambda func, args, kwargs=None: calls.append(str(func)) or args[0])
    >>> calls
    ['aten.threshold_backward.default']
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from ember import _dispatch_levels as levels, dtypes
from ember import _aten_impls as _impls
from ember._aten_overloads import RECORDS, aten, packet
from ember.ops.registry import OPS
from ember.surface.constants import contiguous_format
from ember.tensor import Tensor

PRESENT: dict[str, Callable] = {}  # record name -> fn(call, args, attrs) -> the record's outputs

# Records whose ATen twin has the same name and takes the same positional arguments (and no attributes).
_SAME_UNARY = frozenset("""abs acos acosh asin asinh atan atanh ceil cos cosh digamma erf erfc erfinv exp exp2 expm1
    floor i0 isinf isnan lgamma log log10 log1p log2 neg reciprocal relu round rsqrt sigmoid sign sin sinh sqrt tan tanh
    trunc logical_not bitwise_not silu mish angle logsigmoid""".split())
_SAME_BINARY = frozenset("maximum minimum atan2 hypot logical_and logical_or logical_xor floor_divide xlog1py".split())
_ARITH = frozenset("add sub mul div".split())  # .Tensor even with a number (torch wraps it)
_COMPARE = frozenset("eq ne lt le gt ge remainder fmod bitwise_and bitwise_or bitwise_xor".split())


def presents(*names: str) -> Callable:
    def put(fn: Callable) -> Callable:
        for name in names:
            PRESENT[name] = fn
        return fn
    return put


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "_data")


def presentation(op: Any, args: tuple, attrs: dict) -> Callable:
    """``body(call)`` presenting record ``op`` on ``args`` (see the module docstring)."""
    name = op.name
    fn = PRESENT.get(name)
    if fn is not None:
        return lambda call: fn(call, args, attrs)
    if not attrs:
        if name in _SAME_UNARY and len(args) == 1:
            return lambda call: call(aten(name), args)
        if len(args) == 2:
            if name in _ARITH:
                if name in ("add", "mul") and not _is_tensor(args[0]) and _is_tensor(args[1]):
                    return lambda call: call(aten(name, "Tensor"), (args[1], args[0]))  # 2 * x: torch's mul(x, 2)
                return lambda call: call(aten(name, "Tensor"), args)
            if name in _COMPARE:
                return lambda call: call(aten(name, "Tensor" if _is_tensor(args[1]) else "Scalar"), args)
            if name in _SAME_BINARY:
                return lambda call: call(aten(name), args)
    return lambda call: call(packet("ember", name).default, args, dict(attrs))


# ---- elementwise --------------------------------------------------------------------------------------------------
@presents("pow")
def _pow(call: Callable, args: tuple, attrs: dict) -> Any:
    x, y = args
    overload = "Tensor_Tensor" if _is_tensor(x) and _is_tensor(y) else ("Tensor_Scalar" if _is_tensor(x) else "Scalar")
    return call(aten("pow", overload), args)


@presents("where")
def _where(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("where", "self"), args)


@presents("relu_grad")
def _relu_grad(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("threshold_backward"), (args[0], args[1], 0))


@presents("gelu")
def _gelu(call: Callable, args: tuple, attrs: dict) -> Any:
    approximate = attrs.get("approximate", "none")
    return call(aten("gelu"), args, {} if approximate == "none" else {"approximate": approximate})


@presents("gelu_backward")
def _gelu_backward(call: Callable, args: tuple, attrs: dict) -> Any:
    approximate = attrs.get("approximate", "none")
    return call(aten("gelu_backward"), args, {} if approximate == "none" else {"approximate": approximate})


@presents("to_dtype")
def _to_dtype(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("_to_copy"), args, {"dtype": attrs["dtype"]})


@presents("clone")
def _clone(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("clone"), args)


@presents("contiguous")
def _contiguous(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("clone"), args, {"memory_format": contiguous_format})


# ---- reductions ---------------------------------------------------------------------------------------------------
def _reduction(name: str, dim_overload: str) -> Callable:
    def show(call: Callable, args: tuple, attrs: dict) -> Any:
        dims, keepdim = attrs.get("dims"), attrs.get("keepdim", False)
        if dims is None and not keepdim:
            return call(aten(name), args)
        dims = list(range(args[0].ndim)) if dims is None else list(dims)
        return call(aten(name, dim_overload), (args[0], dims) + ((True,) if keepdim else ()))
    return show


PRESENT["sum"] = _reduction("sum", "dim_IntList")
PRESENT["mean"] = _reduction("mean", "dim")


def _extreme(name: str) -> Callable:
    def show(call: Callable, args: tuple, attrs: dict) -> Any:
        dims = attrs.get("dims")
        return call(aten(name), (args[0], [] if dims is None else list(dims)) + ((True,) if attrs.get("keepdim")
                                                                                else ()))
    return show


PRESENT["amax"] = _extreme("amax")
PRESENT["amin"] = _extreme("amin")


@presents("sum_to")
def _sum_to(call: Callable, args: tuple, attrs: dict) -> Any:
    """Autograd's unbroadcast: torch's ``sum.dim_IntList(g, dims, True)`` then ``view`` when dims were added."""
    x, shape = args[0], tuple(attrs["shape"])
    lead = x.ndim - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1]
    if not dims:
        return call(aten("view"), (x, list(shape)))
    out = call(aten("sum", "dim_IntList"), (x, dims, True))
    return call(aten("view"), (out, list(shape))) if lead else out


@presents("softmax")
def _softmax(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("_softmax"), (args[0], attrs["dim"], False))


@presents("log_softmax")
def _log_softmax(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("_log_softmax"), (args[0], attrs["dim"], False))


# ---- views --------------------------------------------------------------------------------------------------------
@presents("reshape")
def _reshape(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("view"), (args[0], list(attrs["shape"])))


@presents("expand")
def _expand(call: Callable, args: tuple, attrs: dict) -> Any:
    return call(aten("expand"), (args[0], list(attrs["shape"])))


@presents("permute")
def _permute(call: Callable, args: tuple, attrs: dict) -> Any:
    dims = tuple(attrs["dims"])
    if dims == (1, 0):
        return call(aten("t"), args)
    moved = [i for i, d in enumerate(dims) if i != d]
    if len(moved) == 2:
        return call(aten("transpose", "int"), (args[0], moved[0], moved[1]))
    return call(aten("permute"), (args[0], list(dims)))


@presents("getitem")
def _getitem(call: Callable, args: tuple, attrs: dict) -> Any:
    """Basic indexing as torch's chain of ``select.int`` / ``slice.Tensor`` / ``unsqueeze``; anything with index
    tensors is ``index.Tensor`` when it is one tensor per leading dim, else ember's own record."""
    index = attrs["index"]
    index = index if isinstance(index, tuple) else (index,)
    x = args[0]
    if len(args) == 1 and all(isinstance(i, (int, slice)) or i is None or i is Ellipsis for i in index):
        if Ellipsis in index:
            at = index.index(Ellipsis)
            named = sum(1 for i in index if i is not None and i is not Ellipsis)
            index = index[:at] + (slice(None),) * (x.ndim - named) + index[at + 1:]
        out, dim = x, 0
        for i in index:
            if i is None:
                out = call(aten("unsqueeze"), (out, dim))
                dim += 1
            elif isinstance(i, slice):
                if i != slice(None):
                    start, stop, step = i.start, i.stop, i.step
                    size = out.shape[dim]
                    start = 0 if start is None else start
                    stop = size if stop is None or stop > size else stop
                    out = call(aten("slice", "Tensor"), (out, dim, start, stop) + ((step,) if step not in (None, 1)
                                                                                   else ()))
                dim += 1
            else:
                out = call(aten("select", "int"), (out, dim, i))
        if out is x:
            out = call(aten("alias"), (x,))
        return out
    return call(packet("ember", "getitem").default, args, dict(attrs))


# ---- products -----------------------------------------------------------------------------------------------------
def _mm(call: Callable, a: Any, b: Any) -> Any:
    if a.ndim == 2 and b.ndim == 2:
        return call(aten("mm"), (a, b))
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0]:
        return call(aten("bmm"), (a, b))
    if a.ndim > 2 and b.ndim == 2:  # torch folds the leading dims: view, mm, _unsafe_view
        lead = list(a.shape[:-1])
        flat = call(aten("view"), (a, [-1 if not lead else _prod(lead), a.shape[-1]]))
        out = call(aten("mm"), (flat, b))
        return call(aten("_unsafe_view"), (out, lead + [b.shape[-1]]))
    return call(aten("matmul"), (a, b))


def _prod(sizes: list) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _transposed(call: Callable, x: Any) -> Any:
    return call(aten("t"), (x,)) if x.ndim == 2 else call(aten("transpose", "int"), (x, -2, -1))


@presents("matmul")
def _matmul(call: Callable, args: tuple, attrs: dict) -> Any:
    return _mm(call, *args)


@presents("matmul_t")
def _matmul_t(call: Callable, args: tuple, attrs: dict) -> Any:
    a, b = args
    if attrs.get("transpose_a"):
        a = _transposed(call, a)
    if attrs.get("transpose_b"):
        b = _transposed(call, b)
    return _mm(call, a, b)


@presents("linear")
def _linear(call: Callable, args: tuple, attrs: dict) -> Any:
    """torch's autograd view of ``F.linear``: ``t(w)``, then ``addmm(b, x, wt)`` (``mm`` without a bias); an N-D
    input is viewed as 2-D around it."""
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    if x.ndim > 2:
        lead = list(x.shape[:-1])
        flat = call(aten("view"), (x, [_prod(lead), x.shape[-1]]))
        wt = call(aten("t"), (w,))
        out = call(aten("addmm"), (bias, flat, wt)) if bias is not None else call(aten("mm"), (flat, wt))
        return call(aten("view"), (out, lead + [w.shape[0]]))
    if x.ndim == 1:
        return call(aten("matmul"), (x, call(aten("t"), (w,)))) if bias is None else call(
            aten("add", "Tensor"), (call(aten("matmul"), (x, call(aten("t"), (w,)))), bias))
    wt = call(aten("t"), (w,))
    return call(aten("addmm"), (bias, x, wt)) if bias is not None else call(aten("mm"), (x, wt))


# ---- losses -------------------------------------------------------------------------------------------------------
_REDUCTION = {"none": 0, "mean": 1, "sum": 2}


# The forward's total weight (nll_loss_forward's second output) by the log-softmax array it belongs to, so the
# backward hands torch's nll_loss_backward that very tensor (make_fx then links the two calls).
_TOTALS: dict[int, tuple] = {}


def _remember_total(logp: Any, total: Any) -> None:
    data = getattr(logp, "_data", None)
    if data is None:
        return
    key = id(data)
    try:
        _TOTALS[key] = (weakref.ref(data, lambda _ref, key=key: _TOTALS.pop(key, None)), total)
    except TypeError:  # an array type without weak references: the backward recounts
        pass


def _recall_total(logp: Any) -> Any:
    data = getattr(logp, "_data", None)
    entry = _TOTALS.get(id(data))
    return entry[1] if entry is not None and entry[0]() is data else None


@presents("cross_entropy")
def _cross_entropy(call: Callable, args: tuple, attrs: dict) -> Any:
    """``(loss, log_softmax(x))``: torch's ``_log_softmax`` then ``nll_loss_forward``."""
    x, target = args
    logp = call(aten("_log_softmax"), (x, x.ndim - 1, False))
    loss, total = call(aten("nll_loss_forward"), (logp, target, None, _REDUCTION[attrs["reduction"]],
                                                  attrs["ignore_index"]))
    _remember_total(logp, total)
    return loss, logp


@presents("cross_entropy_backward")
def _cross_entropy_backward(call: Callable, args: tuple, attrs: dict) -> Any:
    g, logp, target = args
    reduction, ignore = _REDUCTION[attrs["reduction"]], attrs["ignore_index"]
    total = _recall_total(logp)
    if total is None:  # a forward run without a level: count the weight again, below the levels
        with levels.hidden():
            total = (target != ignore).sum().to(dtypes.to_dtype(logp.dtype))
    grad_logp = call(aten("nll_loss_backward"), (g, logp, target, None, reduction, ignore, total))
    return call(aten("_log_softmax_backward_data"), (grad_logp, logp, logp.ndim - 1, logp.dtype))


def _symmetric_padding(attrs: dict) -> list | None:
    """ember's (top, bottom, left, right) padding as torch's [h, w], or None when it is asymmetric ('same' with an
    even kernel: torch pads the input first, ember's record keeps it; presented as the record itself)."""
    top, bottom, left, right = attrs["padding"]
    return [top, left] if top == bottom and left == right else None


@presents("conv2d")
def _conv2d(call: Callable, args: tuple, attrs: dict) -> Any:
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    padding = _symmetric_padding(attrs)
    if padding is None:
        return call(packet("ember", "conv2d").default, args, dict(attrs))
    return call(aten("convolution"), (x, w, bias, list(attrs["stride"]), padding, list(attrs["dilation"]), False,
                                      [0, 0], attrs["groups"]))


# ---- convolution's backward: torch's one convolution_backward, called once per gradient ember computes -------------
def _stand_in(shape: tuple, like: Any) -> Any:
    """A tensor of ``shape`` with no memory (a broadcast zero) where torch's call takes a tensor only for its shape
    (the input of an input gradient, the weight of a weight gradient)."""
    xp = like._device.xp
    return Tensor._make(xp.broadcast_to(xp.zeros((), dtype=like._data.dtype), tuple(shape)), like._device, False)


def _conv_backward_args(attrs: dict) -> tuple:
    return (list(attrs["stride"]), _symmetric_padding(attrs), list(attrs["dilation"]), False, [0, 0], attrs["groups"])


@presents("conv2d_input_grad")
def _conv2d_input_grad(call: Callable, args: tuple, attrs: dict) -> Any:
    g, w = args
    if _symmetric_padding(attrs) is None:
        return call(packet("ember", "conv2d_input_grad").default, args, dict(attrs))
    grads = call(aten("convolution_backward"), (g, _stand_in(attrs["input_shape"], g), w, None)
                 + _conv_backward_args(attrs) + ([True, False, False],))
    return grads[0]


@presents("conv2d_weight_grad")
def _conv2d_weight_grad(call: Callable, args: tuple, attrs: dict) -> Any:
    x, g = args
    if _symmetric_padding(attrs) is None:
        return call(packet("ember", "conv2d_weight_grad").default, args, dict(attrs))
    grads = call(aten("convolution_backward"), (g, x, _stand_in(attrs["weight_shape"], g), None)
                 + _conv_backward_args(attrs) + ([False, True, False],))
    return grads[1]



# ---- attention: torch's CPU flash kernel and its backward ---------------------------------------------------------
_LSE: dict[int, tuple] = {}  # id(output array) -> (weak ref to it, the forward's logsumexp), as _TOTALS


def _attention_kwargs(q: Any, attrs: dict) -> dict:
    default = 1.0 / float(q.shape[-1]) ** 0.5
    return {} if abs(attrs["scale"] - default) <= 1e-12 * default else {"scale": attrs["scale"]}


@presents("scaled_dot_product_attention")
def _attention(call: Callable, args: tuple, attrs: dict) -> Any:
    """``(out, weights)``: torch's ``_scaled_dot_product_flash_attention_for_cpu`` gives (out, logsumexp); ember's
    record keeps the weights for its backward, rebuilt from the logsumexp below the levels."""
    q, k, v = args
    flags = (0.0, True) if attrs["is_causal"] else ()
    out, lse = call(aten("_scaled_dot_product_flash_attention_for_cpu"), (q, k, v) + flags,
                    _attention_kwargs(q, attrs))
    with levels.hidden():
        scores = _impls.attention_scores(q, k, attrs["is_causal"], attrs["scale"])
        weights = (scores - lse.unsqueeze(-1)).exp()
    data = getattr(out, "_data", None)
    if data is not None:
        key = id(data)
        try:
            _LSE[key] = (weakref.ref(data, lambda _ref, key=key: _LSE.pop(key, None)), lse)
        except TypeError:
            pass
    return out, weights


@presents("scaled_dot_product_attention_backward")
def _attention_backward(call: Callable, args: tuple, attrs: dict) -> Any:
    g, q, k, v, out, weights = args
    entry = _LSE.get(id(getattr(out, "_data", None)))
    lse = entry[1] if entry is not None and entry[0]() is out._data else None
    if lse is None:  # a forward run without a level: rebuild the logsumexp, below the levels
        with levels.hidden():
            lse = _impls.attention_scores(q, k, attrs["is_causal"], attrs["scale"]).logsumexp(-1)
    grads = call(aten("_scaled_dot_product_flash_attention_for_cpu_backward"),
                 (g, q, k, v, out, lse, 0.0, attrs["is_causal"]), dict(_attention_kwargs(q, attrs), attn_mask=None))
    return tuple(grads)


# ---- layer norm ---------------------------------------------------------------------------------------------------
@presents("layer_norm")
def _layer_norm(call: Callable, args: tuple, attrs: dict) -> Any:
    """torch's ``native_layer_norm(x, normalized_shape, weight, bias, eps) -> (out, mean, rstd)``, the record's
    own three outputs (mean and rstd keep the normalized dims as 1s in both)."""
    x, affine = args[0], args[1:]
    weight = affine[0] if attrs["has_weight"] else None
    bias = affine[-1] if len(affine) > (1 if attrs["has_weight"] else 0) else None
    shape = list(x.shape[x.ndim - attrs["count"]:])
    return tuple(call(aten("native_layer_norm"), (x, shape, weight, bias, attrs["eps"])))


@presents("layer_norm_backward")
def _layer_norm_backward(call: Callable, args: tuple, attrs: dict) -> Any:
    """torch's ``native_layer_norm_backward``; the record does not know whether a bias exists, so its gradient is
    always asked for (torch's mask is ``[True, False, False]`` without weight and bias, ember's
    ``[True, False, True]``)."""
    g, x, mean, rstd = args[:4]
    weight = args[4] if len(args) > 4 else None
    shape = list(x.shape[x.ndim - attrs["count"]:])
    grads = call(aten("native_layer_norm_backward"), (g, x, shape, mean, rstd, weight, None,
                                                      [True, weight is not None, True]))
    return tuple(grads)


# ---- ATen overloads that are one record: called directly under a level, autograd records that record --------------
def _unary_record(name: str) -> Callable:
    return lambda x: (OPS[name], (x,), {}) if _is_tensor(x) else None


def _binary_record(name: str) -> Callable:
    def to_record(a: Any, b: Any, alpha: Any = 1) -> Any:
        return (OPS[name], (a, b), {}) if alpha == 1 and (_is_tensor(a) or _is_tensor(b)) else None
    return to_record


for _name in _SAME_UNARY:
    if _name in OPS:
        RECORDS[f"{_name}.default"] = _unary_record(_name)
for _name in _ARITH:
    RECORDS[f"{_name}.Tensor"] = _binary_record(_name)
RECORDS["mm.default"] = lambda a, b: (OPS["matmul"], (a, b), {}) if a.ndim == b.ndim == 2 else None
RECORDS["bmm.default"] = lambda a, b: (OPS["matmul"], (a, b), {}) if a.ndim == b.ndim == 3 else None

levels.TABLE["presentation"] = presentation
levels.TABLE["aten"] = aten
