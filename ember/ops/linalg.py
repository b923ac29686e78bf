"""Linear algebra primitives: matmul (batched, broadcasting) and einsum."""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.ops import dispatch
from ember.ops.elementwise import _broadcast_shapes, sum_to
from ember.ops.registry import OpDef, Spec, register


def _matmul_vjp(ctx: Any, g: Any) -> tuple:
    a, b = ctx.inputs
    sa, sb = ctx.input_meta
    ga = sum_to(matmul(g, b.mT), sa) if ctx.needs[0] else None
    gb = sum_to(matmul(a.mT, g), sb) if ctx.needs[1] else None
    return ga, gb


def _matmul_rule(a: Spec, b: Spec) -> Spec:
    batch = _broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return Spec(batch + (a.shape[-2], b.shape[-1]), a.dtype, a.device)


def _matmul_impl(xp: Any, a: Any, b: Any) -> Any:
    # NumPy's stacked (ndim > 2) matmul drops to a slow non-BLAS loop for many strided layouts (heads
    # split out of a fused qkv projection, transposed keys): 100x slower than one contiguous copy.
    if a.ndim > 2 and not a.flags.c_contiguous:
        a = xp.ascontiguousarray(a)
    if b.ndim > 2 and not b.flags.c_contiguous:
        b = xp.ascontiguousarray(b)
    return xp.matmul(a, b)


MATMUL = register(OpDef(
    name="matmul", category="linalg", impl=_matmul_impl, vjp=_matmul_vjp,
    shape_rule=_matmul_rule, onnx="MatMul",
))


def matmul(input: Any, other: Any) -> Any:
    """NumPy/PyTorch matmul semantics, 1-D operands included."""
    if input.dtype is not other.dtype:
        target = dtypes.promote_types(input.dtype, other.dtype)
        input, other = dispatch.cast(input, target), dispatch.cast(other, target)
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got shapes {tuple(input.shape)} "
                           f"and {tuple(other.shape)}; use * for scalars")
    squeeze_front = input.ndim == 1
    squeeze_back = other.ndim == 1
    a = input.unsqueeze(0) if squeeze_front else input
    b = other.unsqueeze(-1) if squeeze_back else other
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(
            f"matmul: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, input.shape))} and "
            f"{'x'.join(map(str, other.shape))}): inner sizes {a.shape[-1]} and {b.shape[-2]} differ"
        )
    try:
        _broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except RuntimeError:
        raise RuntimeError(f"matmul: batch dimensions of {tuple(input.shape)} and {tuple(other.shape)} cannot be "
                           "broadcast together") from None
    out = dispatch.apply(MATMUL, (a, b))
    if squeeze_front:
        out = out.squeeze(-2)
    if squeeze_back:
        out = out.squeeze(-1)
    return out


def mm(input: Any, mat2: Any) -> Any:
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Any, mat2: Any) -> Any:
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with equal batch size, got {tuple(input.shape)} and "
                           f"{tuple(mat2.shape)}")
    return matmul(input, mat2)


def dot(input: Any, other: Any) -> Any:
    if input.ndim != 1 or other.ndim != 1 or input.shape[0] != other.shape[0]:
        raise RuntimeError(f"dot: expected 1-D tensors of equal size, got {tuple(input.shape)} and "
                           f"{tuple(other.shape)}")
    return matmul(input, other)


def mv(input: Any, vec: Any) -> Any:
    return matmul(input, vec)


# ---- einsum ------------------------------------------------------------------------------------
def _parse_einsum(equation: str, count: int) -> tuple[list[str], str]:
    equation = equation.replace(" ", "")
    if "." in equation:
        raise NotImplementedError("einsum: ellipsis ('...') is not supported yet; write the dimensions out")
    if "->" in equation:
        lhs, rhs = equation.split("->")
    else:
        lhs = equation
        letters = lhs.replace(",", "")
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    subs = lhs.split(",")
    if len(subs) != count:
        raise RuntimeError(f"einsum: equation {equation!r} names {len(subs)} operands but {count} were given")
    return subs, rhs


def _einsum_vjp(ctx: Any, g: Any) -> tuple:
    subs, rhs = _parse_einsum(ctx.attrs["equation"], len(ctx.input_meta))
    operands = ctx.inputs
    grads = []
    for i, sub in enumerate(subs):
        if not ctx.needs[i]:
            grads.append(None)
            continue
        others = [s for j, s in enumerate(subs) if j != i]
        available = set(rhs) | set("".join(others))
        unique = "".join(dict.fromkeys(sub))
        kept = "".join(c for c in unique if c in available)
        eq = ",".join([rhs] + others) + "->" + kept
        grad = einsum(eq, g, *[o for j, o in enumerate(operands) if j != i])
        shape = ctx.input_meta[i]
        if kept != unique:  # letters only this operand had were summed out: broadcast them back
            unique_shape = [shape[sub.index(c)] for c in unique]
            grad = grad.reshape([s if c in kept else 1 for c, s in zip(unique, unique_shape)]).expand(unique_shape)
        if unique != sub:  # a repeated letter (a diagonal, 'ii'): put the gradient back on it
            first = [sub.index(c) == p for p, c in enumerate(sub)]
            grad = grad.reshape([s if f else 1 for s, f in zip(shape, first)]).expand(shape)
            grad = grad * _diagonal_mask(sub, shape, grad)
        grads.append(grad)
    return tuple(grads)


def _diagonal_mask(sub: str, shape: tuple, like: Any) -> Any:
    """1 where every repeated letter of ``sub`` indexes equal positions, else 0."""
    import numpy as np

    from ember.creation import tensor

    grids = np.indices(shape) if shape else np.zeros((0,), dtype=np.int64)
    mask = np.ones(shape, dtype=bool)
    for p, c in enumerate(sub):
        q = sub.index(c)
        if q != p:
            mask &= grids[p] == grids[q]
    return tensor(mask, dtype=like.dtype, device=like.device)


def _einsum_impl(xp: Any, *ops: Any, equation: str) -> Any:
    dtype = ops[0].dtype
    if dtype.kind not in "fiub":  # bfloat16: NumPy's einsum has no loop for it; compute in float32
        return xp.einsum(equation, *(o.astype(xp.float32) for o in ops), optimize=len(ops) > 2).astype(dtype)
    return xp.einsum(equation, *ops, optimize=len(ops) > 2)


def _einsum_rule(*specs: Spec, equation: str) -> Spec:
    subs, rhs = _parse_einsum(equation, len(specs))
    sizes = {}
    for sub, spec in zip(subs, specs):
        sizes.update(zip(sub, spec.shape))
    return Spec(tuple(sizes[c] for c in rhs), specs[0].dtype, specs[0].device)


EINSUM = register(OpDef(
    name="einsum", category="linalg", vjp=_einsum_vjp, shape_rule=_einsum_rule, onnx="Einsum",
    impl=_einsum_impl,
))


def einsum(equation: str, *operands: Any) -> Any:
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    target = operands[0].dtype
    for o in operands[1:]:
        target = dtypes.promote_types(target, o.dtype)
    operands = tuple(dispatch.cast(o, target) for o in operands)
    subs, _ = _parse_einsum(equation, len(operands))
    for sub, o in zip(subs, operands):
        if len(sub) != o.ndim:
            raise RuntimeError(f"einsum: subscript {sub!r} has {len(sub)} letters but its operand has shape "
                               f"{tuple(o.shape)}")
    return dispatch.apply(EINSUM, operands, {"equation": equation})
