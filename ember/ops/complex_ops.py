"""Complex numbers: view_as_real / view_as_complex, complex(real, imag), angle, and the compositions
PyTorch names (polar, sgn, conj_physical, resolve_conj, adjoint).

``conj``, ``real`` and ``imag`` are records in :mod:`ember.ops.elementwise` (gradient rules there use
``conj``). Gradients follow PyTorch's convention: for a real loss L of z = x + iy, the gradient is
dL/dx + i dL/dy (twice the conjugate Wirtinger derivative), so a holomorphic f passes ``g * conj(f'(z))``.

Example:
    >>> import ember
    >>> z = ember.complex(ember.tensor([3.0]), ember.tensor([4.0]))
    >>> z.abs().item(), ember.view_as_real(z).tolist()
    (5.0, [[3.0, 4.0]])
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from ember import dtypes
from ember.onnx import complex_emitters as to_onnx
from ember.ops import dispatch, elementwise as ew, views
from ember.ops.elementwise import conj, imag_part, real_part
from ember.ops.registry import OpDef, Spec, register


def make_complex(xp: Any, re: Any, im: Any) -> Any:
    """``re + i im`` without multiplying (``1j * inf`` is ``nan + inf j``): the pairs stacked and reinterpreted."""
    shape = xp.broadcast_shapes(re.shape, im.shape)
    re, im = xp.broadcast_to(re, shape), xp.broadcast_to(im, shape)
    target = xp.complex128 if re.dtype == xp.float64 else xp.complex64
    pairs = xp.stack((re, im), axis=-1)
    if pairs.dtype not in (xp.float32, xp.float64):
        pairs = pairs.astype(xp.float32)
    return pairs.view(target)[..., 0]


# ---- view_as_real / view_as_complex: views of the same memory, as torch's (a write through one reaches the other) --
def _view_as_real_rule(x: Spec) -> Spec:
    return Spec(tuple(x.shape) + (2,), x.dtype.to_real(), x.device)


def _view_as_complex_rule(x: Spec) -> Spec:
    return Spec(tuple(x.shape[:-1]), x.dtype.to_complex(), x.device)


def _as_real(xp: Any, x: Any) -> Any:
    """The (real, imag) pairs of ``x``'s memory: a trailing axis of size 1 reinterpreted as two reals (any strides)."""
    return xp.asarray(x)[..., None].view(xp.real(xp.zeros((), dtype=x.dtype)).dtype)


def _as_complex(xp: Any, x: Any) -> Any:
    """Adjacent (real, imag) pairs as complex numbers. The public function refuses a last axis without stride 1
    (as torch); vmap's rules reach here with the batch moved to the front, so such an array is copied first."""
    if x.ndim and x.strides[-1] != x.itemsize:
        x = xp.ascontiguousarray(x)
    return x.view(xp.complex128 if x.dtype == xp.float64 else xp.complex64)[..., 0]


def _pairs_grad(g: Any) -> Any:
    """view_as_real's gradient: the pairs of ``g`` as complex numbers (a new tensor: ``g`` may have any strides)."""
    return complex(views.select(g, -1, 0), views.select(g, -1, 1))


VIEW_AS_REAL = register(OpDef(
    name="view_as_real", batch="leading", category="movement", save="none", shape_rule=_view_as_real_rule,
    impl=_as_real, onnx=to_onnx.same_pairs, view=True,
    vjp=(lambda ctx, g: _pairs_grad(g),),
))
VIEW_AS_COMPLEX = register(OpDef(
    name="view_as_complex", batch="leading", category="movement", save="none", shape_rule=_view_as_complex_rule,
    impl=_as_complex, onnx=to_onnx.same_pairs, view=True,
    vjp=(lambda ctx, g: views.stack([real_part(g), imag_part(g)], -1),),
))
# In-place writes through these views of a tensor that requires grad are refused (ember/ops/inplace.py): the
# CopySlices record replays views on element positions, which a dtype-changing view has no counterpart for.
DTYPE_VIEWS = frozenset(("view_as_real", "view_as_complex"))


def view_as_real(input: Any) -> Any:
    """A complex tensor of shape (...) as a real one of shape (..., 2): real and imaginary parts."""
    if not input.dtype.is_complex:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, got {input.dtype}; "
                           "make one with ember.complex(real, imag) first")
    return dispatch.apply(VIEW_AS_REAL, (input,))


def view_as_complex(input: Any) -> Any:
    """A real tensor of shape (..., 2) (float32/float64) as a complex one of shape (...)."""
    if input.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, but got a tensor of "
                           f"scalar type: {input.dtype}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension of size 2, got shape "
                           f"{tuple(input.shape)}")
    if input.stride(-1) != 1:  # torch's view needs (real, imag) pairs adjacent in memory
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension with stride 1, got strides "
                           f"{tuple(input.stride())}; call .contiguous() first")
    if any(st % 2 for st in input.stride()[:-1]):
        raise RuntimeError(f"view_as_complex: Tensor must have a stride divisible by 2 for all but last dimension, "
                           f"got strides {tuple(input.stride())}; call .contiguous() first")
    if input.storage_offset() % 2:
        raise RuntimeError(f"view_as_complex: Tensor must have a storage_offset divisible by 2, got "
                           f"{input.storage_offset()}; call .contiguous() first")
    return dispatch.apply(VIEW_AS_COMPLEX, (input,))


# ---- complex(real, imag) ------------------------------------------------------------------------------------
def _complex_rule(re: Spec, im: Spec) -> Spec:
    return Spec(ew._broadcast_shapes(re.shape, im.shape), re.dtype.to_complex(), re.device)


COMPLEX = register(OpDef(
    name="complex", category="binary", impl=make_complex, save="none", shape_rule=_complex_rule,
    onnx=to_onnx.complex_from_parts,
    vjp=(lambda ctx, g: real_part(g), lambda ctx, g: imag_part(g)),
))


def complex(real: Any, imag: Any) -> Any:  # noqa: A001 - PyTorch's name
    """``torch.complex``: real + i imag from two float tensors of one dtype (float32 or float64)."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, dispatch.Tensor):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.dtype not in (dtypes.float32, dtypes.float64):
            raise RuntimeError(f"complex: expected both inputs to be Half, Float or Double tensors but got "
                               f"{real.dtype} and {imag.dtype}")
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"complex: expected object of scalar type {real.dtype} but got scalar type {imag.dtype} "
                           "for second argument; convert one with .to()")
    return dispatch.apply(COMPLEX, (real, imag))


def _polar_impl(xp: Any, r: Any, theta: Any) -> Any:
    return make_complex(xp, r * xp.cos(theta), r * xp.sin(theta))


# PyTorch's polar_backward: abs gets real(conj(g) sgn(out)) (so 0 where abs is 0, and the sign of |abs| for
# negative abs), angle gets real(conj(g) i out).
POLAR = register(OpDef(
    name="polar", category="binary", impl=_polar_impl, save="output", shape_rule=_complex_rule, onnx=to_onnx.polar,
    vjp=(lambda ctx, g: ew.real_part(conj(g) * sgn(ctx.out)), lambda ctx, g: ew.real_part(conj(g) * ctx.out * 1j)),
))


def polar(abs: Any, angle: Any) -> Any:  # noqa: A002 - PyTorch's argument names
    """``abs * (cos(angle) + i sin(angle))`` from two float tensors of one dtype."""
    if abs.dtype is not angle.dtype:
        raise RuntimeError(f"polar: expected object of scalar type {abs.dtype} but got scalar type {angle.dtype} "
                           "for second argument")
    if abs.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError(f"polar: expected both inputs to be Float or Double tensors but got {abs.dtype}")
    return dispatch.apply(POLAR, (abs, angle))


# ---- angle ----------------------------------------------------------------------------------------------------
def _angle_impl(xp: Any, x: Any) -> Any:
    if x.dtype.kind == "c":
        return xp.angle(x)
    # Real numbers: pi below 0, 0 elsewhere (also at -0.0, where NumPy's angle gives pi), NaN stays NaN.
    return xp.where(x < 0, math.pi, xp.where(x != x, x, 0)).astype(x.dtype)


def _angle_vjp(ctx: Any, g: Any) -> Any:
    """d angle: ``g * i z / |z|^2`` (0 at z = 0), PyTorch's angle_backward; real inputs get zeros."""
    z = ctx.inputs[0]
    if not z.dtype.is_complex:  # torch's zeros_like: +0 also for a NaN or infinite upstream (g * 0 was NaN)
        return g.new_zeros(tuple(g.shape))
    magnitude2 = ew.real_part(z * conj(z))
    safe = ew.where(magnitude2 == 0, 1.0, magnitude2)
    return ew.where(magnitude2 == 0, 0.0, g * z * 1j / safe)


ANGLE = register(OpDef(
    name="angle", category="unary", impl=_angle_impl, vjp=(_angle_vjp,), float_only=True, onnx=to_onnx.angle,
    shape_rule=ew._complex_result_rule,
))


def angle(input: Any) -> Any:
    """The argument of each element (radians); for real tensors pi where negative, else 0."""
    return dispatch.unary(ANGLE, input)


# ---- compositions ---------------------------------------------------------------------------------------------
def sgn(input: Any) -> Any:
    """``z / |z|`` for complex tensors (0 at 0), ``sign`` for real ones (0 at NaN), as ``torch.sgn``."""
    if not input.dtype.is_complex:
        out = ew.sign(input)
        return ew.where(ew.isnan(input), 0.0, out) if input.is_floating_point() else out
    magnitude = ew.abs(input)
    zero = magnitude == 0
    return ew.where(zero, 0.0, input / ew.where(zero, 1.0, magnitude))


def conj_physical(input: Any) -> Any:
    """The conjugate (ember's ``conj`` already computes it: there is no lazy conjugate bit)."""
    return conj(input)


def resolve_conj(input: Any) -> Any:
    """Materializes a lazy conjugate in PyTorch; ember has none, so the tensor itself."""
    return input


def resolve_neg(input: Any) -> Any:
    """Materializes a lazy negation in PyTorch; ember has none, so the tensor itself."""
    return input


def is_conj(input: Any) -> bool:
    """False: ember's conj computes the values (no conjugate bit)."""
    return False


def is_neg(input: Any) -> bool:
    return False


def adjoint(input: Any) -> Any:
    """The conjugate transpose of the last two dims (``x.mH``)."""
    return conj(views.transpose(input, -2, -1))


__all__ = ["view_as_real", "view_as_complex", "complex", "polar", "angle", "sgn", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "is_conj", "is_neg", "adjoint", "real_part", "imag_part"]


def set_part(input: Any, value: Any, part: int) -> None:
    """``x.real = v`` (part 0) / ``x.imag = v`` (part 1): ``v`` (a tensor or a number, broadcast to ``x``)
    written into that part of ``x`` in place, as PyTorch's setters (autograd records an in-place write: the
    gradient reaches ``v`` and the other part of ``x``'s old value). A real ``x`` takes ``x.real = v`` as
    ``x.copy_(v)`` and refuses ``x.imag = v``, as torch.

    Example:
        >>> z = ember.zeros(2, dtype=ember.complex64); z.imag = ember.ones(2); z.tolist()
        [1j, 1j]
    """
    if isinstance(value, numbers.Number):  # a number fills the part (new_full: no import of ember.creation here)
        value = input.new_full(input.shape, value, dtype=input.dtype.to_real() if input.dtype.is_complex else None)
    if not input.dtype.is_complex:
        if part:
            raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
        input.copy_(value)
        return
    # The complex value rebuilt from the kept part and the new one, then copied in: one recorded in-place
    # write (writing through view_as_real would need CopySlices through that view, which ember does not record).
    kept = imag_part(input) if part == 0 else real_part(input)
    new = value.to(kept.dtype)
    input.copy_(complex(new, kept) if part == 0 else complex(kept, new))
