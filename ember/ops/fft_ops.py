"""The discrete Fourier transforms as three op records, PyTorch's primitives: ``fft_c2c`` (complex to
complex), ``fft_r2c`` (real to complex, the one-sided half spectrum or the full one) and ``fft_c2r``
(a one-sided half spectrum to a real signal). Every function of :mod:`ember.fft` is one of them plus
padding, trimming, conjugation and casts, so gradients, tracing and the device path come from here.

Each record transforms over ``dims`` at the input's own sizes (the public functions pad or trim to
``n``/``s`` first, with differentiable ops) and scales by ``norm`` as NumPy: "backward" leaves the
forward transform unscaled and divides the inverse by n, "forward" the opposite, "ortho" 1/sqrt(n) both.

Gradients are PyTorch's (``FunctionsManual.cpp``): the adjoint of a transform with norm m is the
opposite-direction transform with the dual norm (backward <-> forward, ortho <-> ortho); r2c's
half spectrum is padded with zeros to the full one first; c2r's gradient is the r2c of the
gradient with the entries whose mirror images were dropped doubled (``1 .. n - n//2 - 1``).

Example:
    >>> import ember
    >>> from ember.ops.fft_ops import fft_c2c
    >>> x = ember.tensor([1.0, 2.0, 3.0, 4.0]).to(ember.complex64)
    >>> fft_c2c(x, (0,), "backward", True).real.tolist()
    [10.0, -2.0, -2.0, -2.0]
"""
from __future__ import annotations

import math
from typing import Any

from ember.onnx import complex_emitters as to_onnx
from ember.ops import dispatch, elementwise as ew, views
from ember.ops.registry import OpDef, Spec, register

DUAL_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _transform_flops(inputs: tuple, outputs: tuple, attrs: dict) -> int:
    """The usual estimate for a radix-2 complex FFT: 5 n log2 n per transform of n points (half for real data)."""
    spec = inputs[0] if attrs.get("last_dim_size") is None else outputs[0]
    sizes = [spec.shape[d] for d in attrs["dims"]]
    n = math.prod(sizes) or 1
    batch = math.prod(spec.shape) // n if n else 0
    flops = 5 * n * max(math.log2(n), 1.0) * batch
    return int(flops if spec.dtype.is_complex else flops / 2)


# ---- complex to complex -------------------------------------------------------------------------------------
def _c2c_impl(xp: Any, x: Any, dims: tuple, norm: str, forward: bool) -> Any:
    transform = xp.fft.fftn if forward else xp.fft.ifftn
    out = transform(x, axes=dims, norm=norm) if dims else x.copy()
    return out.astype(x.dtype, copy=False)  # CuPy and NumPy keep complex64; make sure of it


FFT_C2C = register(OpDef(
    name="fft_c2c", batch="dims", category="fft", impl=_c2c_impl, save="none", flops=_transform_flops,
    onnx=to_onnx.fft_c2c,
    shape_rule=lambda x, dims, norm, forward: Spec(tuple(x.shape), x.dtype, x.device),
    vjp=(lambda ctx, g: fft_c2c(g, ctx.attrs["dims"], DUAL_NORM[ctx.attrs["norm"]], not ctx.attrs["forward"]),),
    doc="fft_c2c(x, dims, norm, forward): the n-dimensional complex DFT (or its inverse) over dims",
))


def fft_c2c(x: Any, dims: tuple, norm: str, forward: bool) -> Any:
    """The complex transform of complex ``x`` over ``dims`` (no padding: the sizes are x's own)."""
    return dispatch.apply(FFT_C2C, (x,), {"dims": tuple(dims), "norm": norm, "forward": bool(forward)})


# ---- real to complex ---------------------------------------------------------------------------------------------
def _r2c_impl(xp: Any, x: Any, dims: tuple, norm: str, onesided: bool) -> Any:
    target = xp.complex128 if x.dtype == xp.float64 else xp.complex64
    out = xp.fft.rfftn(x, axes=dims, norm=norm) if onesided else xp.fft.fftn(x, axes=dims, norm=norm)
    return out.astype(target, copy=False)


def _r2c_rule(x: Spec, dims: tuple, norm: str, onesided: bool) -> Spec:
    shape = list(x.shape)
    if onesided:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    return Spec(tuple(shape), x.dtype.to_complex(), x.device)


def _r2c_vjp(ctx: Any, g: Any) -> Any:
    """Pad the half spectrum's gradient with zeros to the full length, run the adjoint complex transform,
    keep the real part (the input was real)."""
    dims, norm = ctx.attrs["dims"], ctx.attrs["norm"]
    if ctx.attrs["onesided"]:
        last = dims[-1]
        full = ctx.input_meta[0][last]
        missing = full - g.shape[last]
        if missing > 0:
            shape = list(g.shape)
            shape[last] = missing
            g = views.cat([g, g.new_zeros(shape)], last)
    return ew.real_part(fft_c2c(g, dims, DUAL_NORM[norm], False))


FFT_R2C = register(OpDef(
    name="fft_r2c", batch="dims", category="fft", impl=_r2c_impl, save="none", shape_rule=_r2c_rule, vjp=(_r2c_vjp,),
    flops=_transform_flops, onnx=to_onnx.fft_r2c,
    doc="fft_r2c(x, dims, norm, onesided): the DFT of real x over dims (the last dim halved when onesided)",
))


def fft_r2c(x: Any, dims: tuple, norm: str, onesided: bool) -> Any:
    """The transform of real ``x`` over ``dims``: ``n//2 + 1`` entries along the last when ``onesided``."""
    return dispatch.apply(FFT_R2C, (x,), {"dims": tuple(dims), "norm": norm, "onesided": bool(onesided)})


# ---- complex (half spectrum) to real -------------------------------------------------------------------------------
def _c2r_impl(xp: Any, x: Any, dims: tuple, norm: str, last_dim_size: int) -> Any:
    sizes = [x.shape[d] for d in dims[:-1]] + [last_dim_size]
    target = xp.float64 if x.dtype == xp.complex128 else xp.float32
    return xp.fft.irfftn(x, s=sizes, axes=dims, norm=norm).astype(target, copy=False)


def _c2r_rule(x: Spec, dims: tuple, norm: str, last_dim_size: int) -> Spec:
    shape = list(x.shape)
    shape[dims[-1]] = last_dim_size
    return Spec(tuple(shape), x.dtype.to_real(), x.device)


def _c2r_vjp(ctx: Any, g: Any) -> Any:
    """The r2c of the gradient, with the entries whose mirror images the half spectrum drops counted twice."""
    dims, norm = ctx.attrs["dims"], ctx.attrs["norm"]
    gx = fft_r2c(g, dims, DUAL_NORM[norm], True)
    last = dims[-1]
    doubled = g.shape[last] - gx.shape[last]
    if doubled > 0:
        scale = [1.0] * gx.shape[last]
        scale[1:1 + doubled] = [2.0] * doubled
        shape = [1] * gx.ndim
        shape[last] = gx.shape[last]
        gx = gx * g.new_tensor(scale).reshape(shape)
    return gx


FFT_C2R = register(OpDef(
    name="fft_c2r", batch="dims", category="fft", impl=_c2r_impl, save="none", shape_rule=_c2r_rule, vjp=(_c2r_vjp,),
    flops=_transform_flops, onnx=to_onnx.fft_c2r,
    doc="fft_c2r(x, dims, norm, last_dim_size): the real inverse transform of a one-sided half spectrum",
))


def fft_c2r(x: Any, dims: tuple, norm: str, last_dim_size: int) -> Any:
    """The real signal (``last_dim_size`` long along the last of ``dims``) whose half spectrum is ``x``."""
    return dispatch.apply(FFT_C2R, (x,), {"dims": tuple(dims), "norm": norm, "last_dim_size": int(last_dim_size)})
