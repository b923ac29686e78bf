"""The op methods of :class:`ember.tensor.Tensor`: a mixin class, ``TensorMethods``, that Tensor inherits.

Tensor's operators (``+``, ``@``, ``==``, ...) are in tensor.py itself; this file holds the long tail of
methods that forward to the function of the same name in ``ember.ops`` (``x.sum()`` is
``ember.ops.reductions.sum(x)``) and the in-place variants, so the class file stays about state.
It imports no tensor module: ``Tensor`` itself is only named for type checkers.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ember.ops import (complex_ops, dispatch, elementwise as ew, extra_math as _xm, float8_ops, inplace, linalg, overlap,
    value_check,
    movement, nn_ops, reductions as red, sorting as _sorting, unsigned_ops, views)
from ember.ops import fma
from ember.ops.set_storage import set_ as _set_
from ember.autograd import grad_mode as _grad_mode
from ember.ops.registry import OPS
from ember import _numpy_names, dtypes, random as ember_random, random_order

if TYPE_CHECKING:
    from ember.tensor import Tensor

ADD, SUB, MUL, DIV, POW = OPS["add"], OPS["sub"], OPS["mul"], OPS["div"], OPS["pow"]


def _alpha_scaled(self: Tensor, other: Any, alpha: Any) -> Any:
    """``alpha * other`` for add_/sub_: the common case (a tensor of self's non-bool dtype) directly, else
    with PyTorch's rules (:func:`ember.ops.elementwise.scaled`)."""
    if isinstance(other, dispatch.Tensor) and other is not self:  # the overlap check sees the operand, not the product
        overlap.check_partial("add_/sub_", self, (other,))
    if (isinstance(other, dispatch.Tensor) and other._data.dtype == self._data.dtype
            and other._data.dtype in (np.float32, np.float64) and type(alpha) in (int, float)):
        return other * alpha  # nothing to check: an int or float alpha fits float32/float64
    return ew.scaled(self, other, alpha)


def _fused_alpha_(self: Tensor, other: Any, alpha: Any, op: str) -> Tensor | None:
    """``self += alpha * other`` (or ``-=``) rounded once, as PyTorch's fused CPU kernel; None where it does
    not apply (see :func:`ember.ops.elementwise._fused_alpha`)."""
    if type(alpha) not in (int, float) or alpha == 1 or not isinstance(other, dispatch.Tensor):
        return None
    if not fma.fusable_floats(self, other):
        return None
    factor = ew.scalar_factor(alpha, self.dtype, "alpha", op[:-1])
    factor = float(factor if op == "add_" else -factor)
    return inplace.inplace_call(self, op, lambda t: fma.fma(factor, other, t), needs_copy=False, others=(other,),
                                reads=(other,))


def add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    fused = _fused_alpha_(self, other, alpha, "add_")
    if fused is not None:
        return fused
    return inplace.inplace_binary(ADD, self, other if alpha == 1 and type(alpha) is not bool else
                                  _alpha_scaled(self, other, alpha), "add_")


def sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1 and (self._data.dtype.kind == "b" or type(other) is bool or (
            isinstance(other, dispatch.Tensor) and other._data.dtype.kind == "b")):
        raise dispatch._bool_sub_error()
    fused = _fused_alpha_(self, other, alpha, "sub_")
    if fused is not None:
        return fused
    return inplace.inplace_binary(SUB, self, other if alpha == 1 and type(alpha) is not bool else
                                  _alpha_scaled(self, other, alpha), "sub_")


def mul_(self: Tensor, other: Any) -> Tensor:
    return inplace.inplace_binary(MUL, self, other, "mul_")


def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return inplace.inplace_binary(DIV, self, other, "div_")
    tensors = (other,) if isinstance(other, dispatch.Tensor) else ()
    return inplace.inplace_call(self, "div_", lambda t: ew.div(t, other, rounding_mode=rounding_mode), others=tensors,
                                reads=tensors)


def pow_(self: Tensor, other: Any) -> Tensor:
    return inplace.inplace_binary(POW, self, other, "pow_")


def zero_(self: Tensor) -> Tensor:
    return inplace.fill(self, 0, "zero_")


def fill_(self: Tensor, value: Any) -> Tensor:
    value_check.require_number(value, "fill_")
    if isinstance(value, dispatch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               f"dimensions (shape {list(value.shape)}); pass value.squeeze() or value[0]")
        if dispatch.grad_mode.STATE.enabled and value._requires_grad:  # the value's gradient is the sum of self's
            source = value.to(self.device).to(self.dtype)
            return inplace.inplace_call(self, "fill_", lambda t: inplace.replaced(t, views.expand_as(source, t)),
                                        needs_copy=False, others=(source,))
        value = value.item()
        if isinstance(value, complex) and not self.is_complex():  # torch warns and keeps the real part
            value = value.real
    elif self.dtype in dtypes.FLOAT8_DTYPES:
        float8_ops.check_fill_value(value, self.dtype, "fill_")
    else:  # torch's checked conversion: fill_(1e10) of int8 raises, fill_(-1) of uint8 is 255
        value = value_check.checked_fill_value(value, self.dtype, "fill_", self.numel())
    return inplace.fill(self, value, "fill_")


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    return inplace.inplace_call(self, "clamp_", lambda t: ew.clamp(t, min, max), reads=(min, max))


def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    if not isinstance(src, dispatch.Tensor):
        from ember.creation import tensor

        # A Python number goes straight to self's dtype (through float32 it would lose digits in float64).
        src = tensor(src, dtype=self.dtype) if isinstance(src, (int, float, bool, complex)) else tensor(src)
    if tuple(np.broadcast_shapes(tuple(self.shape), tuple(src.shape))) != tuple(self.shape):
        raise RuntimeError(f"copy_: output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(np.broadcast_shapes(tuple(self.shape), tuple(src.shape)))} (the source of shape "
                           f"{list(src.shape)} must broadcast to the destination's shape)")
    if src is not self:  # x[1:].copy_(x[:-1]) raises, as PyTorch (ember/ops/overlap.py)
        overlap.check_partial("copy_", self, (src,))
    source = src.to(self.device) if src.device != self.device else src
    source = source.to(self.dtype)
    recording = dispatch.grad_mode.STATE.enabled and (self._requires_grad or source._requires_grad)
    inplace.check_inplace(self, "copy_", recording)
    if not recording and (dispatch.is_symbolic(self) or dispatch.is_symbolic(source)):  # building a graph
        return inplace.inplace_call(self, "copy_", lambda t: views.expand_as(source, t).clone(), needs_copy=False)
    if not recording:
        if not inplace._writeable(self):
            raise RuntimeError(f"copy_: {inplace._OVERLAP_MESSAGE}")
        self._data[...] = source._data
        self._bump()
        return self
    return inplace.inplace_call(self, "copy_", lambda t: inplace.replaced(t, views.expand_as(source, t)),
                                needs_copy=False,
                                others=(source,))


def _unary_inplace(name: str, fn: Any) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return inplace.inplace_call(self, name, lambda t: fn(t, *args, **kwargs), reads=(*args, *kwargs.values()))

    method.__name__ = name
    return method


def _real_abs(t: Tensor) -> Tensor:
    """``abs`` for ``abs_``: torch refuses a complex tensor (the real result cannot be written back into it;
    ember wrote |z| as a complex number)."""
    if t.dtype.is_complex:
        raise RuntimeError("abs_: In-place abs is not supported for complex tensors (use x = x.abs()).")
    return ew.abs(t)


def masked_fill_(self: Tensor, mask: Any, value: Any) -> Tensor:
    return inplace.inplace_call(self, "masked_fill_", lambda t: views.masked_fill(t, mask, value, _inplace=True),
                                needs_copy=False)


def index_put_(self: Tensor, indices: tuple, values: Any, accumulate: bool = False) -> Tensor:
    if isinstance(values, dispatch.Tensor) and values.dtype is not self.dtype:  # unlike setitem, no cast
        raise RuntimeError(f"index_put_: Index put requires the source and destination dtypes match, got "
                           f"{self.dtype} for the destination and {values.dtype} for the source; convert with "
                           f".to({self.dtype})")
    index, tensors = movement.split_index(tuple(indices), self.device)
    try:
        return inplace.inplace_call(self, "index_put_",
                                    lambda t: movement.index_put(t, index, tensors, values, accumulate), needs_copy=False,
                                    others=(values,), gathers=(values,))  # values that require grad make the write recorded
    except IndexError as error:  # name the call the user made, not the internal indexing op
        raise IndexError(f"index_put_: {error}") from None


def scatter_add_(self: Tensor, dim: int, index: Any, src: Any) -> Tensor:
    return inplace.inplace_call(self, "scatter_add_", lambda t: views.scatter_add(t, dim, index, src), needs_copy=False,
                                gathers=(src,))


def scatter_(self: Tensor, dim: int, index: Any, src: Any = None, value: Any = None, *, reduce: str | None = None) -> Tensor:
    return inplace.inplace_call(self, "scatter_", lambda t: views.scatter(t, dim, index, src, value, reduce=reduce),
                                gathers=(src,), needs_copy=False)


# Positional parameters of the in-place samplers, by the graph sampler's names (uniform_(a, b), ...).
_GRAPH_PARAMS = {"uniform": ("low", "high"), "normal": ("mean", "std"), "bernoulli": ("p",)}
_PARAMS = {"exponential": ("lambd",), "random": ("low", "high"), "cauchy": ("median", "sigma"),
           "log_normal": ("mean", "std"), "geometric": ("p",)}
_CHECKED_BY_SAMPLER = ("cauchy", "log_normal", "geometric")


def _random_inplace(name: str) -> Any:
    def method(self: Tensor, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        names = _PARAMS.get(name) or _GRAPH_PARAMS.get(name, ())
        given = dict(zip(names, args), **kwargs)
        if name == "random":  # random_(to) or random_(from, to): from < to, both integers
            if len(args) == 1:
                given = {"low": 0, "high": args[0]}
            if "high" in given and given["high"] is not None and not given.get("low", 0) < given["high"]:
                raise RuntimeError(f"random_: expects 'from' to be less than 'to', but got from={given.get('low', 0)} "
                                   f">= to={given['high']}")
        elif name in _CHECKED_BY_SAMPLER:
            pass  # the sampler checks its own parameters (PyTorch's wording differs from check_args')
        else:
            ember_random.check_args(name + "_", **given)
        if name in _GRAPH_PARAMS:  # while a graph is built, sample with a graph node and copy it in
            params = dict(zip(_GRAPH_PARAMS[name], args), **kwargs)
            traced = ember_random.graph_sample(name, tuple(self.shape), self.dtype, self.device, generator,
                                               like=self, **params)
            if traced is not None:
                return self.copy_(traced)
        sample = _draw_like_torch(self, name, generator, args, kwargs)
        if dispatch.grad_mode.STATE.enabled and self._requires_grad:  # recorded: the old values get zero grad
            from ember.creation import _wrap_array

            drawn = _wrap_array(self._device.xp.asarray(sample), self._device)
            return inplace.inplace_call(self, name + "_", lambda t: inplace.replaced(t, drawn), needs_copy=False)
        with dispatch.grad_mode.no_grad():
            inplace.check_inplace(self, name + "_", False)
            if not inplace._writeable(self):
                raise RuntimeError(f"{name}_: {inplace._OVERLAP_MESSAGE}")
            self._data[...] = sample
        self._bump()
        return self

    method.__name__ = name + "_"
    return method


def _draw_like_torch(self: Tensor, name: str, generator: Any, args: tuple, kwargs: dict) -> Any:
    """``self``'s new values from the sampler ``name``, drawn in the order torch's TensorIterator writes ``self``
    (memory order: ember/random_order.py); ``normal_`` of a non-contiguous tensor takes torch's one-at-a-time
    draws (its 16-value Box-Muller blocks run on contiguous tensors only)."""
    sampler = getattr(ember_random, "sample_" + name)
    order = random_order.tensor_fill_order(self) if self._data.ndim > 1 else None
    if name == "normal":
        kwargs = dict(kwargs, contiguous=bool(self.is_contiguous()))
    if order is not None and name == "bernoulli":  # tensor probabilities go through the same permutation
        p = kwargs.get("p", args[0] if args else None)
        if getattr(p, "ndim", 0):
            p = p.expand(tuple(self.shape)).permute(order)
            args, kwargs = (), dict(kwargs, p=p)
    return random_order.draw_in_order(lambda shape: sampler(shape, self.dtype, self.device, generator, *args,
                                                            **kwargs), tuple(self.shape), order)


def _nonzero(self: Tensor, *, as_tuple: bool = False) -> Any:
    from ember.creation import _wrap_array

    if self._data.dtype in dtypes.WIDE_UNSIGNED_NP:
        unsigned_ops.refuse("nonzero", self)
    xp = self._device.xp
    if self._data.ndim == 0:  # torch: a 0-d tensor has 0 or 1 nonzero "rows" of no coordinates
        count = int(bool(self._data))
        if as_tuple:
            return (_wrap_array(xp.zeros((count,), dtype="int64"), self._device),)
        return _wrap_array(xp.zeros((count, 0), dtype="int64"), self._device)
    found = xp.nonzero(self._data)
    if as_tuple:
        return tuple(_wrap_array(a.astype("int64"), self._device) for a in found)
    # torch's CPU kernel fills a (ndim, N) buffer and returns its transpose: strides (1, N), not contiguous
    return _wrap_array(self._device.xp.stack(found, axis=0).astype("int64", copy=False).T, self._device)


def _size_method(self: Tensor, dim: Any = None) -> Any:
    return self.size(dim)


# ---- sorting, extra math, softmax, new_* constructors ---------------------------------------------
def _new_filled(fill: str) -> Any:
    def method(self: Tensor, *size: Any, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, pin_memory: bool = False, **keywords: Any) -> Tensor:
        from ember import creation

        creation._opts.check_unexpected("new_" + fill, keywords)  # only size= (PyTorch's new_* take no others)
        return getattr(creation, fill)(*size, dtype=dtype or self.dtype, layout=layout, device=device or self.device,
                                       requires_grad=requires_grad, **keywords)

    method.__name__ = "new_" + fill
    return method


def new_full(self: Tensor, size: Any, fill_value: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    from ember.creation import full

    return full(size, fill_value, dtype=dtype or self.dtype, layout=layout, device=device or self.device,
                requires_grad=requires_grad)


def new_tensor(self: Tensor, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    from ember.creation import tensor

    if isinstance(data, dispatch.Tensor):
        data = data.detach().clone()
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def _softmax_method(name: str) -> Any:
    def method(self: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:
        if axis is not None:  # NumPy's name, as torch's argument parser
            dim = _numpy_names.dim_only(name, dim, axis)
        return getattr(nn_ops, name)(self, dim, dtype=dtype)

    method.__name__ = name
    return method


def addcmul_(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    return inplace.inplace_call(self, "addcmul_", lambda t: _xm.addcmul(t, tensor1, tensor2, value=value),
                                needs_copy=False, others=(tensor1, tensor2), reads=(tensor1, tensor2))


def addcdiv_(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    return inplace.inplace_call(self, "addcdiv_", lambda t: _xm.addcdiv(t, tensor1, tensor2, value=value),
                                needs_copy=False, others=(tensor1, tensor2), reads=(tensor1, tensor2))


def lerp_(self: Tensor, end: Any, weight: Any) -> Tensor:
    return inplace.inplace_call(self, "lerp_", lambda t: _xm.lerp(t, end, weight), needs_copy=False,
                                others=(end, weight), reads=(end, weight))



_SCALAR_WARNED = [False]


def warn_scalar_of_grad_tensor() -> None:
    """PyTorch's once-per-process UserWarning for ``float()``/``complex()`` of a tensor that requires grad (with
    grad mode on): the number has no gradient path back to the tensor."""
    if not _SCALAR_WARNED[0]:
        _SCALAR_WARNED[0] = True
        warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                      "Consider using tensor.detach() first.", UserWarning, stacklevel=3)


class TensorMethods:
    """The methods of :class:`ember.tensor.Tensor` that forward to ``ember.ops`` (Tensor inherits them)."""

    __slots__ = ()

    # elementwise math
    exp = ew.exp
    log = ew.log
    log1p = ew.log1p
    sqrt = ew.sqrt
    rsqrt = ew.rsqrt
    sin = ew.sin
    cos = ew.cos
    tanh = ew.tanh
    sigmoid = ew.sigmoid
    relu = ew.relu
    abs = ew.abs
    neg = ew.neg
    negative = ew.neg
    sign = ew.sign
    floor = ew.floor
    ceil = ew.ceil
    round = ew.round
    reciprocal = ew.reciprocal
    erf = ew.erf
    isnan = ew.isnan
    isinf = ew.isinf
    isfinite = ew.isfinite
    logical_not = ew.logical_not
    logical_and = ew.logical_and
    logical_or = ew.logical_or
    logical_xor = ew.logical_xor
    add = ew.add
    sub = ew.sub
    subtract = ew.sub
    mul = ew.mul
    multiply = ew.mul
    div = ew.div
    divide = ew.div
    true_divide = ew.div
    pow = ew.pow
    maximum = ew.maximum
    minimum = ew.minimum
    clamp = ew.clamp
    clip = ew.clamp
    eq = ew.eq
    ne = ew.ne
    lt = ew.lt
    le = ew.le
    gt = ew.gt
    ge = ew.ge
    floor_divide = ew.floor_divide
    remainder = ew.remainder
    fmod = ew.fmod

    def where(self, condition: Any, other: Any) -> Any:
        return ew.where(condition, self, other)

    # reductions
    sum = red.sum
    mean = red.mean
    prod = red.prod
    amax = red.amax
    amin = red.amin
    max = red.max
    min = red.min
    argmax = red.argmax
    argmin = red.argmin
    var = red.var
    std = red.std
    logsumexp = red.logsumexp
    norm = red.norm
    all = red.all
    any = red.any
    cumsum = red.cumsum
    # linear algebra
    matmul = linalg.matmul
    mm = linalg.mm
    bmm = linalg.bmm
    dot = linalg.dot
    mv = linalg.mv
    # views and movement
    reshape = views.reshape
    view = views.view
    view_as = views.view_as
    reshape_as = views.reshape_as
    permute = views.permute
    transpose = views.transpose
    swapaxes = views.transpose
    swapdims = views.transpose
    t = views.t
    squeeze = views.squeeze
    unsqueeze = views.unsqueeze
    flatten = views.flatten
    unflatten = views.unflatten
    expand = views.expand_public
    expand_as = views.expand_as_public
    broadcast_to = views.broadcast_to_public
    sum_to_size = views.sum_to_size
    contiguous = views.contiguous
    narrow = views.narrow
    select = views.select
    split = views.split
    chunk = views.chunk
    unbind = views.unbind
    flip = views.flip
    repeat = views.repeat
    movedim = views.movedim
    tril = views.tril
    triu = views.triu
    index_select = views.index_select
    gather = views.gather
    scatter_add = views.scatter_add
    scatter = views.scatter
    masked_fill = views.masked_fill
    roll = views.roll

    def clone(self, *, memory_format: Any = None) -> Any:
        """A copy; ``memory_format=torch.channels_last`` lays it out NHWC (default ``preserve_format``: a dense
        input's strides, else its dimension order, as PyTorch; ember/ops/layout.py)."""
        out = dispatch.apply(OPS["clone"], (self,))
        if memory_format is None or views.format_name(memory_format) == "preserve_format":
            return out
        return views.to_format(out, memory_format, owned=True)  # the format's own strides, as torch's empty_like

    nonzero = _nonzero
    # in place
    add_ = add_
    sub_ = sub_
    mul_ = mul_
    div_ = div_
    pow_ = pow_
    zero_ = zero_
    fill_ = fill_
    clamp_ = clamp_
    clip_ = clamp_
    copy_ = copy_
    masked_fill_ = masked_fill_
    index_put_ = index_put_
    scatter_add_ = scatter_add_
    scatter_ = scatter_
    exp_ = _unary_inplace("exp_", ew.exp)
    relu_ = _unary_inplace("relu_", ew.relu)
    sigmoid_ = _unary_inplace("sigmoid_", ew.sigmoid)
    tanh_ = _unary_inplace("tanh_", ew.tanh)
    sqrt_ = _unary_inplace("sqrt_", ew.sqrt)
    neg_ = _unary_inplace("neg_", ew.neg)
    abs_ = _unary_inplace("abs_", lambda t: _real_abs(t))
    log_ = _unary_inplace("log_", ew.log)
    normal_ = _random_inplace("normal")
    uniform_ = _random_inplace("uniform")
    bernoulli_ = _random_inplace("bernoulli")
    random_ = _random_inplace("random")
    exponential_ = _random_inplace("exponential")
    cauchy_ = _random_inplace("cauchy")
    log_normal_ = _random_inplace("log_normal")
    geometric_ = _random_inplace("geometric")
    sort = _sorting.sort
    argsort = _sorting.argsort
    topk = _sorting.topk
    kthvalue = _sorting.kthvalue
    unique = _sorting.unique
    tan = _xm.tan
    asin = _xm.asin
    arcsin = _xm.asin
    acos = _xm.acos
    arccos = _xm.acos
    atan = _xm.atan
    arctan = _xm.atan
    atan2 = _xm.atan2
    arctan2 = _xm.atan2
    sinh = _xm.sinh
    cosh = _xm.cosh
    asinh = _xm.asinh
    arcsinh = _xm.asinh
    acosh = _xm.acosh
    arccosh = _xm.acosh
    atanh = _xm.atanh
    arctanh = _xm.atanh
    expm1 = _xm.expm1
    log2 = _xm.log2
    log10 = _xm.log10
    exp2 = _xm.exp2
    square = _xm.square
    trunc = _xm.trunc
    fix = _xm.trunc
    frac = _xm.frac
    hypot = _xm.hypot
    logaddexp = _xm.logaddexp
    logaddexp2 = _xm.logaddexp2
    erfinv = _xm.erfinv
    nan_to_num = _xm.nan_to_num
    lerp = _xm.lerp
    addcmul = _xm.addcmul
    addcdiv = _xm.addcdiv
    addmm = _xm.addmm
    addmv = _xm.addmv
    addr = _xm.addr
    baddbmm = _xm.baddbmm
    addbmm = _xm.addbmm
    outer = _xm.outer
    ger = _xm.outer
    diag = _xm.diag
    diagonal = _xm.diagonal
    diag_embed = _xm.diag_embed
    trace = _xm.trace
    cumprod = _xm.cumprod
    cummax = _xm.cummax
    cummin = _xm.cummin
    isclose = _xm.isclose
    count_nonzero = _xm.count_nonzero
    masked_select = _xm.masked_select
    clamp_min = _xm.clamp_min
    clamp_max = _xm.clamp_max
    xlogy = _xm.xlogy
    logit = _xm.logit
    deg2rad = _xm.deg2rad
    rad2deg = _xm.rad2deg
    softmax = _softmax_method("softmax")
    log_softmax = _softmax_method("log_softmax")
    new_zeros = _new_filled("zeros")
    new_ones = _new_filled("ones")
    new_empty = _new_filled("empty")
    new_full = new_full
    new_tensor = new_tensor
    # in place
    addcmul_ = addcmul_
    addcdiv_ = addcdiv_
    lerp_ = lerp_
    square_ = _unary_inplace("square_", _xm.square)
    trunc_ = _unary_inplace("trunc_", _xm.trunc)
    frac_ = _unary_inplace("frac_", _xm.frac)
    clamp_min_ = _unary_inplace("clamp_min_", _xm.clamp_min)
    clamp_max_ = _unary_inplace("clamp_max_", _xm.clamp_max)
    nan_to_num_ = _unary_inplace("nan_to_num_", _xm.nan_to_num)

    T = property(lambda self: views.permute(self, tuple(reversed(range(self.ndim)))))
    mT = property(lambda self: views.transpose(self, -2, -1))
    H = property(lambda self: complex_ops.conj(views.permute(self, tuple(reversed(range(self.ndim))))))
    mH = property(lambda self: complex_ops.adjoint(self))

    # complex numbers (ember/ops/complex_ops.py): .real/.imag are properties, as in PyTorch (copies, not views)
    real = property(lambda self: ew.real_part(self), lambda self, v: complex_ops.set_part(self, v, 0))
    imag = property(lambda self: ew.imag_part(self), lambda self, v: complex_ops.set_part(self, v, 1))
    set_ = _set_  # point at other memory (ember/ops/set_storage.py)
    conj = complex_ops.conj
    conj_physical = complex_ops.conj_physical
    resolve_conj = complex_ops.resolve_conj
    resolve_neg = complex_ops.resolve_neg
    is_conj = complex_ops.is_conj
    is_neg = complex_ops.is_neg
    angle = complex_ops.angle
    sgn = complex_ops.sgn
    adjoint = complex_ops.adjoint

    def cfloat(self, memory_format: Any = None) -> Any:
        return self.to(complex_ops.dtypes.complex64, memory_format=memory_format)

    def cdouble(self, memory_format: Any = None) -> Any:
        return self.to(complex_ops.dtypes.complex128, memory_format=memory_format)

    def __complex__(self) -> complex:
        if self.numel() != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars (complex() of a tensor "
                             f"of shape {tuple(self.shape)})")
        if self.requires_grad and _grad_mode.STATE.enabled:
            warn_scalar_of_grad_tensor()
        return complex(self.item())
