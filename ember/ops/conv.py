"""Convolution primitives (2-D; 1-D convolutions run as 2-D with a height of 1).

Three op records close under differentiation, so gradients of any order stay convolutions:

* ``conv2d(x, w)``                   the forward, im2col + one batched matmul;
* ``conv2d_input_grad(g, w)``        its adjoint in ``x`` (a transposed convolution), matmul + col2im;
* ``conv2d_weight_grad(x, g)``       its adjoint in ``w``, im2col + matmul summed over the batch.

Each is bilinear in its two inputs, and each one's vjp is written with the other two.
All share the attrs ``stride=(sh, sw)``, ``padding=(top, bottom, left, right)``,
``dilation=(dh, dw)``, ``groups``; the adjoints add the shape they produce.

Example:
    >>> import ember
    >>> from ember.nn import functional as F
    >>> F.conv2d(ember.ones(1, 1, 4, 4), ember.ones(2, 1, 3, 3), padding=1).shape
    ember.Size([1, 2, 4, 4])
"""
from __future__ import annotations

import weakref
from typing import Any

from ember.ops import cost, dispatch
from ember.ops.registry import OpDef, Spec, register
from ember.onnx import emitters as to_onnx
from ember.amp.policy import autocast_policy


# ---- geometry and im2col (array-level helpers, written against xp) ---------------------------
def out_size(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int) -> int:
    return (size + pad_lo + pad_hi - dilation * (kernel - 1) - 1) // stride + 1


def _tap_range(size: int, out: int, offset: int, stride: int, pad: int) -> tuple | None:
    """For one kernel tap at ``offset`` (tap index * dilation): the output positions whose window
    reads a real (non-padding) input element, and those input elements, as two slices; None when
    the tap reads only padding."""
    lo = max(0, -((offset - pad) // stride))  # ceil((pad - offset) / stride)
    hi = min(out, (size - 1 + pad - offset) // stride + 1)
    if hi <= lo:
        return None
    start = lo * stride + offset - pad
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * stride + 1, stride)


def _cols(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
    """The im2col matrix as (groups, C/groups*kh*kw, N*OH*OW), contiguous (one copy of the windows).

    Rows are (channel, tap) pairs and columns are (image, pixel) pairs, so the forward is one GEMM
    per group ``(O, K) @ (K, N*L)`` and the weight gradient one GEMM ``(O, N*L) @ (N*L, K)`` on a
    transposed view (BLAS takes the transpose for free). Filled tap by tap from the unpadded input,
    with only the padding borders zeroed: no padded copy of the input (10-20% faster than copying
    the windows of a padded input, more on small feature maps; docs/cpu-performance.md).
    """
    n, c, h, w = x.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(w, kw, stride[1], padding[2], padding[3], dilation[1])
    cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    channels_first = x.transpose(1, 0, 2, 3)
    for i in range(kh):
        rows = _tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        for j in range(kw):
            columns = _tap_range(w, ow, j * dilation[1], stride[1], padding[2])
            dst = cols[:, i, j]
            if rows is None or columns is None:
                dst[...] = 0
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            dst[:, :, :out_r.start] = 0
            dst[:, :, out_r.stop:] = 0
            dst[:, :, out_r, :out_c.start] = 0
            dst[:, :, out_r, out_c.stop:] = 0
            dst[:, :, out_r, out_c] = channels_first[:, :, in_r, in_c]
    return cols.reshape(groups, (c // groups) * kh * kw, n * oh * ow)


# The weight gradient needs the same im2col matrix as the forward (the costliest copy of a conv);
# keep it, keyed by the input array, until that array dies. Autograd's version counters guarantee
# the saved input is unchanged when its weight gradient runs.
_COLS_MEMO: dict[int, tuple] = {}
_COLS_MEMO_LIMIT = 8


def _remember_cols(x: Any, key: tuple, cols: Any) -> None:
    xid = id(x)
    try:
        ref = weakref.ref(x, lambda _ref, xid=xid: _COLS_MEMO.pop(xid, None))
    except TypeError:  # an array type without weak references: no memo
        return
    _COLS_MEMO.pop(xid, None)
    _COLS_MEMO[xid] = (ref, key, cols)
    while len(_COLS_MEMO) > _COLS_MEMO_LIMIT:
        _COLS_MEMO.pop(next(iter(_COLS_MEMO)))


def _recall_cols(x: Any, key: tuple) -> Any:
    entry = _COLS_MEMO.get(id(x))
    if entry is not None and entry[0]() is x and entry[1] == key:
        return entry[2]
    return None


def _cols_cached(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple,
                 groups: int, remember: bool) -> Any:
    key = (kh, kw, stride, padding, dilation, groups, x.shape, x.dtype, x.strides)
    if remember:  # the forward: always fresh (the input may have changed since), then kept
        cols = _cols(xp, x, kh, kw, stride, padding, dilation, groups)
        _remember_cols(x, key, cols)
        return cols
    cols = _recall_cols(x, key)
    return cols if cols is not None else _cols(xp, x, kh, kw, stride, padding, dilation, groups)


def _gemm(xp: Any, a: Any, b: Any) -> Any:
    """Per-group products (G, M, K) @ (G, K, N). One group runs as a 2-D GEMM, where BLAS takes
    transposed views for free; NumPy's stacked matmul would crawl on those strided layouts."""
    if a.shape[0] == 1:
        out = xp.matmul(a[0], b[0])[None]
    else:
        out = xp.matmul(xp.ascontiguousarray(a), xp.ascontiguousarray(b))
    # bfloat16 (ml_dtypes) products come back as float32: round once to the inputs' dtype, as PyTorch.
    return out if out.dtype == a.dtype else out.astype(a.dtype)


def _to_channels_first(a: Any, groups: int, per_group: int) -> Any:
    """(N, C, H, W) -> (G, C/G, N*H*W): channels lead, images and pixels flattened behind them."""
    n = a.shape[0]
    return a.transpose(1, 0, 2, 3).reshape(groups, per_group, n * a.shape[2] * a.shape[3])


def _conv_impl(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    oh = out_size(x.shape[2], kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x.shape[3], kw, stride[1], padding[2], padding[3], dilation[1])
    cols = _cols_cached(xp, x, kh, kw, stride, padding, dilation, groups, remember=True)
    w2 = w.reshape(groups, o // groups, cg * kh * kw)
    out = _gemm(xp, w2, cols)  # (G, O/G, N*L): one GEMM per group
    # One copy to NCHW: every op downstream (bias, relu, pooling) runs faster on contiguous data.
    return xp.ascontiguousarray(out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))


def _input_grad_impl(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple,
                     dilation: tuple, groups: int) -> Any:
    n, c, h, width = input_shape
    o, cg, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    w2 = w.reshape(groups, o // groups, cg * kh * kw)
    gcols = _gemm(xp, w2.transpose(0, 2, 1), _to_channels_first(g, groups, o // groups))  # (G, K, N*L)
    gcols = gcols.reshape(c, kh, kw, n, oh, ow)
    # col2im: each tap adds its part of the columns into the input positions it read, skipping the
    # padding (no padded buffer to crop: 5-35% faster, the most on small feature maps).
    gx = xp.zeros((c, n, h, width), dtype=g.dtype)
    for i in range(kh):  # a loop over kernel taps only: each step is one strided add over everything
        rows = _tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        if rows is None:
            continue
        for j in range(kw):
            columns = _tap_range(width, ow, j * dilation[1], stride[1], padding[2])
            if columns is None:
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            gx[:, :, in_r, in_c] += gcols[:, i, j, :, out_r, out_c]
    return xp.ascontiguousarray(gx.transpose(1, 0, 2, 3))


def _weight_grad_impl(xp: Any, x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple,
                      dilation: tuple, groups: int) -> Any:
    o, cg, kh, kw = weight_shape
    cols = _cols_cached(xp, x, kh, kw, stride, padding, dilation, groups, remember=False)  # (G, K, N*L)
    g2 = _to_channels_first(g, groups, o // groups)  # (G, O/G, N*L)
    return _gemm(xp, g2, cols.transpose(0, 2, 1)).reshape(weight_shape)


# ---- vjps: each adjoint is one of the other two ops -------------------------------------------
def _geometry(attrs: dict) -> dict:
    return {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}


def _conv_vjp(ctx: Any, g: Any) -> tuple:
    x, w = ctx.inputs
    geo = _geometry(ctx.attrs)
    gx = conv2d_input_grad(g, w, tuple(x.shape), **geo) if ctx.needs[0] else None
    gw = conv2d_weight_grad(x, g, tuple(w.shape), **geo) if ctx.needs[1] else None
    return gx, gw


def _input_grad_vjp(ctx: Any, gg: Any) -> tuple:
    g, w = ctx.inputs
    geo = _geometry(ctx.attrs)
    d_g = conv2d_raw(gg, w, **geo) if ctx.needs[0] else None
    d_w = conv2d_weight_grad(gg, g, tuple(w.shape), **geo) if ctx.needs[1] else None
    return d_g, d_w


def _weight_grad_vjp(ctx: Any, gg: Any) -> tuple:
    x, g = ctx.inputs
    geo = _geometry(ctx.attrs)
    d_x = conv2d_input_grad(g, gg, tuple(x.shape), **geo) if ctx.needs[0] else None
    d_g = conv2d_raw(x, gg, **geo) if ctx.needs[1] else None
    return d_x, d_g


def _conv_rule(x: Spec, w: Spec, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Spec:
    oh = out_size(x.shape[2], w.shape[2], stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x.shape[3], w.shape[3], stride[1], padding[2], padding[3], dilation[1])
    return Spec((x.shape[0], w.shape[0], oh, ow), x.dtype, x.device)


CONV2D = register(OpDef(
    name="conv2d", category="nn", impl=_conv_impl, vjp=_conv_vjp, shape_rule=_conv_rule, onnx=to_onnx.conv2d,
    autocast="lower", flops=cost.conv2d_flops,
))
CONV2D_INPUT_GRAD = register(OpDef(
    name="conv2d_input_grad", category="nn", impl=_input_grad_impl, vjp=_input_grad_vjp, onnx=to_onnx.conv2d_input_grad,
    shape_rule=lambda g, w, input_shape, **geo: Spec(tuple(input_shape), g.dtype, g.device),
    flops=cost.conv2d_input_grad_flops,
))
CONV2D_WEIGHT_GRAD = register(OpDef(
    name="conv2d_weight_grad", category="nn", impl=_weight_grad_impl, vjp=_weight_grad_vjp,
    shape_rule=lambda x, g, weight_shape, **geo: Spec(tuple(weight_shape), x.dtype, x.device),
    flops=cost.conv2d_weight_grad_flops,
))


def conv2d_raw(x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
    return dispatch.apply(CONV2D, (x, w), {"stride": stride, "padding": padding, "dilation": dilation,
                                          "groups": groups})


def conv2d_input_grad(g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                      groups: int) -> Any:
    return dispatch.apply(CONV2D_INPUT_GRAD, (g, w), {"input_shape": tuple(input_shape), "stride": stride,
                                                      "padding": padding, "dilation": dilation, "groups": groups})


def conv2d_weight_grad(x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                       groups: int) -> Any:
    return dispatch.apply(CONV2D_WEIGHT_GRAD, (x, g), {"weight_shape": tuple(weight_shape), "stride": stride,
                                                       "padding": padding, "dilation": dilation, "groups": groups})


# ---- public functions ------------------------------------------------------------------------
def pair(value: Any, n: int, name: str, op: str) -> tuple:
    """``3`` -> ``(3, 3)``; a sequence of length ``n`` -> a tuple of ints. A stride, dilation or kernel size
    must be positive (0 divided by zero deep inside the kernel before; PyTorch refuses it up front)."""
    if isinstance(value, int):
        value = (value,)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise ValueError(f"{op}: expected {name} to be an int or a sequence of {n} ints, got {value}")
    if name in ("stride", "dilation", "kernel_size") and any(v <= 0 for v in value):
        raise RuntimeError(f"{op}: non-positive {name} is not supported, got {name}={value}; it must be >= 1")
    return value


def _check_inputs(op: str, x: Any, w: Any, bias: Any, groups: int, spatial: int) -> None:
    dims = spatial + 2
    if w.ndim != dims:
        raise RuntimeError(f"{op}: expected a {dims}-D weight (out_channels, in_channels/groups, "
                           f"{ {1: 'kL', 2: 'kH, kW', 3: 'kD, kH, kW'}[spatial]}), got weight of shape {tuple(w.shape)}")
    if x.ndim != dims:
        raise RuntimeError(f"{op}: expected {dims - 1}-D (unbatched) or {dims}-D (batched) input, got input of "
                           f"shape {tuple(x.shape)}")
    if groups < 1 or w.shape[0] % groups:
        raise RuntimeError(f"{op}: out_channels ({w.shape[0]}) must be divisible by groups ({groups})")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(
            f"{op}: input of shape {tuple(x.shape)} has {x.shape[1]} channels, but weight of shape "
            f"{tuple(w.shape)} with groups={groups} expects {w.shape[1] * groups} input channels. "
            "Check in_channels of the layer against the channel dim (dim 1) of the input.")
    if x.dtype is not w.dtype or (bias is not None and bias.dtype is not x.dtype):
        raise RuntimeError(f"{op}: input ({x.dtype}), weight ({w.dtype})"
                           f"{'' if bias is None else f' and bias ({bias.dtype})'} should have the same dtype; "
                           "convert with .to(dtype) first")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype}")
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        raise RuntimeError(f"{op}: bias must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


def _resolve_padding(op: str, padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """Padding as (top, bottom, left, right); 'same' pads the extra pixel at the end, as PyTorch does."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride})")
            out = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return tuple(out)
        raise ValueError(f"{op}: invalid padding string {padding!r}; expected 'valid' or 'same'")
    ph, pw = pair(padding, 2, "padding", op)
    if ph < 0 or pw < 0:
        raise RuntimeError(f"{op}: negative padding is not supported, got {(ph, pw)}")
    return (ph, ph, pw, pw)


@autocast_policy("lower")
def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """2-D convolution (cross-correlation) over an (N, C, H, W) or (C, H, W) input, as ``torch.nn.functional``."""
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    _check_inputs("conv2d", x, weight, bias, groups, 2)
    stride = pair(stride, 2, "stride", "conv2d")
    dilation = pair(dilation, 2, "dilation", "conv2d")
    pads = _resolve_padding("conv2d", padding, tuple(weight.shape[2:]), stride, dilation)
    for axis, (size, k, d, lo, hi) in enumerate(zip(x.shape[2:], weight.shape[2:], dilation, pads[0::2], pads[1::2])):
        if size + lo + hi < d * (k - 1) + 1:
            raise RuntimeError(
                f"conv2d: input of shape {tuple(input.shape)} padded by {pads} is smaller than the (dilated) kernel "
                f"of weight {tuple(weight.shape)} in spatial dim {axis}. Use a larger input or more padding.")
    out = conv2d_raw(x, weight, stride, pads, dilation, groups)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out


@autocast_policy("lower")
def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """1-D convolution over (N, C, L) or (C, L), run as a 2-D convolution of height 1."""
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    _check_inputs("conv1d", x, weight, bias, groups, 1)
    (stride,) = pair(stride, 1, "stride", "conv1d")
    (dilation,) = pair(dilation, 1, "dilation", "conv1d")
    if isinstance(padding, str):
        pads = _resolve_padding("conv1d", padding, (1, weight.shape[2]), (1, stride), (1, dilation))
    else:
        (p,) = pair(padding, 1, "padding", "conv1d")
        pads = (0, 0, p, p)
    if x.shape[2] + pads[2] + pads[3] < dilation * (weight.shape[2] - 1) + 1:
        raise RuntimeError(f"conv1d: input of shape {tuple(input.shape)} is smaller than the kernel of weight "
                           f"{tuple(weight.shape)}; use a longer input or more padding")
    out = conv2d_raw(x.unsqueeze(2), weight.unsqueeze(2), (1, stride), pads, (1, dilation), groups).squeeze(2)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1)
    return out.squeeze(0) if unbatched else out


@autocast_policy("lower")
def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """Transposed 2-D convolution: the adjoint of ``conv2d`` in its input. Weight is (C_in, C_out/groups, kH, kW)."""
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    if weight.ndim != 4 or x.ndim != 4 or x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"conv_transpose2d: input of shape {tuple(input.shape)} needs a 4-D weight with "
                           f"{x.shape[1] if x.ndim == 4 else '?'} input channels in dim 0, got weight "
                           f"{tuple(weight.shape)}")
    stride = pair(stride, 2, "stride", "conv_transpose2d")
    dilation = pair(dilation, 2, "dilation", "conv_transpose2d")
    ph, pw = pair(padding, 2, "padding", "conv_transpose2d")
    oph, opw = pair(output_padding, 2, "output_padding", "conv_transpose2d")
    kh, kw = weight.shape[2:]
    h = (x.shape[2] - 1) * stride[0] - 2 * ph + dilation[0] * (kh - 1) + oph + 1
    w = (x.shape[3] - 1) * stride[1] - 2 * pw + dilation[1] * (kw - 1) + opw + 1
    shape = (x.shape[0], weight.shape[1] * groups, h, w)
    out = conv2d_input_grad(x, weight, shape, stride, (ph, ph, pw, pw), dilation, groups)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out
