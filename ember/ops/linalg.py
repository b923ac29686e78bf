"""Linear algebra primitives: matmul (batched, broadcasting) and einsum."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.autograd import grad_into
from ember.autograd.node import torch_named
from ember.autograd.torch_edges import record_inputs
from ember.ops import cost, dispatch
from ember.ops.elementwise import _broadcast_shapes, conj_if_complex, sum_to
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops import batching
from ember.onnx import complex_emitters, emitters as to_onnx
from ember.ops.simplify import transposes_into_matmul
from ember.amp.policy import autocast_policy
from ember.amp.state import STATE as _autocast
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_gemm_choice, cpu_gemm_plan, cpu_hot_worker, cpu_mkl, native_kernel


# One rule per input; the engine sums broadcast batch dimensions back to each input's shape.
# Complex operands: g @ B^H and A^H @ g (PyTorch's convention); conj_if_complex records nothing for real ones.
_MATMUL_VJP = (lambda ctx, g: matmul(g, conj_if_complex(ctx.inputs[1].mT)),
               lambda ctx, g: matmul(conj_if_complex(ctx.inputs[0].mT), g))


def _matmul_rule(a: Spec, b: Spec) -> Spec:
    batch = _broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return Spec(batch + (a.shape[-2], b.shape[-1]), a.dtype, a.device)


def _blas_ready(a: Any) -> bool:
    """Whether each matrix of a stacked array is one BLAS accepts as it is: rows or columns contiguous
    (a transposed or head-split view is; NumPy hands those to BLAS without a copy)."""
    item, (rows, cols), (s_row, s_col) = a.itemsize, a.shape[-2:], a.strides[-2:]
    return (s_col == item and s_row % item == 0 and s_row >= cols * item) or \
        (s_row == item and s_col % item == 0 and s_col >= rows * item)


def _stacked_outer(xp: Any, a: Any, b: Any) -> Any:
    """Stacked outer products ``(..., I, 1) @ (..., 1, J)`` with equal leading dims (per-sample weight
    gradients under vmap): the backend's ``outer_rows`` kernel (numba: one pass, 4-5x einsum at 256 x 64 x 32)
    or one einsum (NumPy's stacked matmul calls one tiny GEMM per matrix, 10x slower than einsum)."""
    lead, rows, cols = a.shape[:-2], a.shape[-2], b.shape[-1]
    count = int(np.prod(lead, dtype=np.int64))  # not -1: rows or cols may be 0
    return outer_rows(xp, a.reshape(count, rows), b.reshape(count, cols)).reshape(lead + (rows, cols))


def outer_rows(xp: Any, a: Any, b: Any) -> Any:
    """``out[k, i, j] = a[k, i] * b[k, j]`` for matrices ``a`` (N, I) and ``b`` (N, J) (the same products, bit
    for bit, whichever path runs: one multiply per element).

    Example:
        >>> outer_rows(np, np.ones((2, 3)), np.ones((2, 4))).shape
        (2, 3, 4)
    """
    kernel = native_kernel(xp, "outer_rows") if a.dtype == b.dtype and a.dtype.kind == "f" else None
    if kernel is None or a.dtype.itemsize < 4:
        return xp.einsum("ki,kj->kij", a, b)
    out = xp.empty(a.shape + b.shape[1:], a.dtype)
    kernel(xp.ascontiguousarray(a), xp.ascontiguousarray(b), out)
    return out


def is_tiny(m: int, k: int, n: int) -> bool:
    """Whether an ``(m, k) @ (k, n)`` product goes to ``xp.matmul`` without asking anything: ember's GEMM takes
    none below ``cpu_gemm_choice.MIN_MACS`` multiply-adds, and OpenBLAS runs one of at most
    ``cpu_blas.OPENBLAS_ONE_THREAD_MACS`` on one thread by itself. Asking (the kernel look-up and its choice, then
    ``small_gemm``'s thread context) cost ~1.6 us of a 4x4 matmul's 2.4 us (docs/cpu-performance.md)."""
    macs = m * k * n
    return macs < cpu_gemm_choice.MIN_MACS and macs <= cpu_blas.OPENBLAS_ONE_THREAD_MACS


def gemm_2d(xp: Any, a: Any, b: Any, bias: Any = None) -> Any:
    """``a @ b`` (``+ bias``) of two matrices by the backend's native GEMM (``matmul_f32``: ember's AVX-512
    float32 GEMM, ember/backends/cpu_gemm_kernels.py), or None when there is none for these operands: then
    call ``xp.matmul`` (and add the bias)."""
    if a.shape[0] * a.shape[1] * b.shape[1] < cpu_gemm_choice.MIN_MACS:  # the kernel takes none this small
        return None
    gemm = native_kernel(xp, "matmul_f32")
    return None if gemm is None else gemm(a, b, bias)


def blas_context(xp: Any, a: Any, b: Any) -> Any:
    """The context ``xp.matmul(a, b)`` runs in when BLAS takes it: one BLAS thread for a small product
    while BLAS's threads would only wake to spin (``cpu_blas.small_gemm``)."""
    return cpu_blas.small_gemm(xp, a, b)


def _matmul_impl(xp: Any, a: Any, b: Any) -> Any:
    if a.ndim == 2 and b.ndim == 2:
        macs = a.shape[0] * a.shape[1] * b.shape[1]
        if macs < cpu_gemm_choice.MIN_MACS and macs <= cpu_blas.OPENBLAS_ONE_THREAD_MACS:  # is_tiny, inlined
            out = xp.matmul(a, b)
            dtype = a.dtype
            return out if out.dtype is dtype or out.dtype == dtype or dtype != b.dtype else out.astype(dtype)
    if a.ndim > 2 and a.shape[-1] == 1 and b.ndim == a.ndim and b.shape[-2] == 1 and a.shape[:-2] == b.shape[:-2]:
        return _stacked_outer(xp, a, b)
    if a.ndim > 2 and b.ndim == 2 and a.dtype == b.dtype and a.flags.c_contiguous:
        # a stack against one matrix: all rows in one GEMM (NumPy's stacked matmul calls one GEMM per matrix,
        # 256 GEMVs for vmap's (256, 1, k) rows of a per-sample matrix-vector product)
        rows = int(np.prod(a.shape[:-1]))  # not -1: an empty inner dim (k = 0) leaves -1 undefined
        return _matmul_impl(xp, a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
    # NumPy's stacked (ndim > 2) matmul drops to a slow non-BLAS loop for matrices whose rows and columns
    # are both strided: 100x slower than one contiguous copy. Any other layout goes to BLAS as it is.
    if a.ndim > 2 and not a.flags.c_contiguous and not _blas_ready(a):
        a = xp.ascontiguousarray(a)
    if b.ndim > 2 and not b.flags.c_contiguous and not _blas_ready(b):
        b = xp.ascontiguousarray(b)
    if a.ndim == 2 and b.ndim == 2:
        if xp is np and macs >= cpu_hot_worker.MIN_MACS:  # the hot worker's split, planned once per signature
            out = cpu_gemm_plan.matmul_2d(a, b, native_kernel)
            if out is not None:
                return out
        out = gemm_2d(xp, a, b)
        if out is None:
            out = cpu_blas_gemm.split_gemm(a, b)  # large: one BLAS call per ember thread
        if out is not None:
            return out
    elif a.ndim > 2 and xp is np:
        out = cpu_blas_gemm.split_stack(a, b)  # a large stack: blocks of it on ember's threads
        if out is not None:
            return out
    out = cpu_mkl.matmul(a, b) if xp is np else None  # Intel MKL where it is ember's BLAS (mkl20)
    if out is not None:
        return out
    with blas_context(xp, a, b):  # small GEMMs on one BLAS thread (cpu_blas.small_gemm)
        out = xp.matmul(a, b)
    # bfloat16 (ml_dtypes) products come back as float32 (accumulated in float32, as PyTorch): round once.
    return out if out.dtype == a.dtype or a.dtype != b.dtype else out.astype(a.dtype)


MATMUL = register(OpDef(
    name="matmul", batch=batching.matmul, category="linalg", impl=_matmul_impl, vjp=_MATMUL_VJP,
    shape_rule=_matmul_rule, onnx=complex_emitters.matmul, save="cross", autocast="lower", flops=cost.matmul_flops,
    simplify=transposes_into_matmul(lambda: OPS["matmul_t"]),
))


# The array gradient rules (OpDef.array_vjp): the same transposed views and the same impl as the rules above.
# (The arrays' own swapaxes: the same view without np.swapaxes's Python wrapper, ~0.5 us a call; ArrayCtx hands
# over NumPy arrays only.)
def _matmul_other_grad(ctx: Any, g: Any) -> Any:
    """``a.T @ g``, or None once the engine's target ``.grad`` took it (``grad_into``: the split GEMM adds it in
    place, beta = 1; w1hot21)."""
    a = ctx.inputs[0].swapaxes(-2, -1)
    if grad_into.LOCAL.target is not None and grad_into.add_product(a, g):
        return None
    return _matmul_impl(np, a, g)


MATMUL.array_vjp = (lambda ctx, g: _matmul_impl(np, g, ctx.inputs[1].swapaxes(-2, -1)), _matmul_other_grad)
grad_into.OPS.add(MATMUL)


def matmul(input: Any, other: Any) -> Any:
    """NumPy/PyTorch matmul semantics, 1-D operands included."""
    try:
        sparse = input._sparse_layout or other._sparse_layout
    except AttributeError:  # a non-tensor operand (torch raises TypeError too)
        bad = other if hasattr(input, "_sparse_layout") else input
        raise TypeError(f"matmul(): expected both operands to be tensors, got {type(input).__name__} and "
                        f"{type(other).__name__}; convert the {type(bad).__name__} with ember.as_tensor(...) "
                        "first") from None
    if sparse:  # a sparse operand brings its own product (ember/sparse/)
        return (input if input._sparse_layout else other)._sparse_matmul(input, other)
    a_shape, b_shape = input._data.shape, other._data.shape
    if len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0] and \
            input._data.dtype == other._data.dtype and input._data.dtype.kind == "f":
        return dispatch.apply(MATMUL, (input, other))  # the common case (two float matrices): nothing to check
    if input.dtype is not other.dtype:
        if not _autocast.active:  # PyTorch refuses mixed dtypes (autocast casts both to one dtype first)
            raise RuntimeError(f"matmul: expected both operands to have the same dtype, but got {input.dtype} "
                               f"(shape {tuple(input.shape)}) and {other.dtype} (shape {tuple(other.shape)}); "
                               f"convert one with .to({other.dtype}) or .to({input.dtype})")
        target = dtypes.promote_types(input.dtype, other.dtype)
        input, other = dispatch.cast(input, target), dispatch.cast(other, target)
    if input.dtype is dtypes.bool_:
        raise RuntimeError("matmul: not implemented for bool operands (PyTorch has no boolean matrix product); "
                           "convert with .float() or .long() first")
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
        if a.ndim > 2 or b.ndim > 2:
            _broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except RuntimeError:
        raise RuntimeError(f"matmul: batch dimensions of {tuple(input.shape)} and {tuple(other.shape)} cannot be "
                           "broadcast together") from None
    out = dispatch.apply(MATMUL, (a, b))
    if squeeze_front:
        out = out.squeeze(-2)
    if squeeze_back:
        out = out.squeeze(-1)
    if out.grad_fn is not None and input.ndim <= 2 and other.ndim <= 2:  # torch's dot / mv / vector @ matrix
        torch_named(out, "DotBackward0" if squeeze_front and squeeze_back else
                    "MvBackward0" if squeeze_back else "SqueezeBackward4")
        if squeeze_back:  # torch's dot / mv node: the two operands' edges
            record_inputs(out, (input, other))
    return out


def mm(input: Any, mat2: Any) -> Any:
    try:  # two dense float matrices of one dtype (an MLP's every product): matmul's common case, its checks once
        dense = not (input._sparse_layout or mat2._sparse_layout)
    except AttributeError:  # a non-tensor operand: the checks below name it
        dense = False
    if dense:
        a, b = input._data, mat2._data
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and a.dtype == b.dtype and a.dtype.kind == "f":
            return dispatch.apply(MATMUL, (input, mat2))
    if input.ndim != 2 or mat2.ndim != 2:  # .ndim: sparse layouts have no _data
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Any, mat2: Any) -> Any:
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with equal batch size, got {tuple(input.shape)} and "
                           f"{tuple(mat2.shape)}")
    out = matmul(input, mat2)
    return out if out.grad_fn is None else torch_named(out, "BmmBackward0")


@autocast_policy("native")
def dot(input: Any, other: Any) -> Any:
    if input.ndim != 1 or other.ndim != 1 or input.shape[0] != other.shape[0]:
        raise RuntimeError(f"dot: expected 1-D tensors of equal size, got {tuple(input.shape)} and "
                           f"{tuple(other.shape)}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot: expected both vectors to have the same dtype, but found {input.dtype} and "
                           f"{other.dtype}; convert one with .to(...)")
    return matmul(input, other)


@autocast_policy("native")
def mv(input: Any, vec: Any) -> Any:
    return matmul(input, vec)


# ---- einsum ------------------------------------------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _split_equation(equation: str, count: int) -> tuple[list[str], str | None]:
    """Operand subscripts and the explicit output (None in implicit mode), spaces removed."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    subs = lhs.split(",")
    if len(subs) != count:
        raise RuntimeError(f"einsum(): equation {equation!r} names {len(subs)} operands but {count} were given")
    for k, sub in enumerate(subs + ([rhs] if arrow else [])):
        if sub.replace("...", "", 1).count(".") or sub.count("...") > 1:
            where = f"operand {k}" if k < count else "the output"
            raise RuntimeError(f"einsum(): found '.' for {where} that is not part of any ellipsis ('...' may appear "
                               f"once per subscript) in {equation!r}")
        bad = set(sub.replace(".", "")) - set(_LETTERS)
        if bad:
            raise RuntimeError(f"einsum(): invalid subscript {sorted(bad)[0]!r} in {equation!r}; subscripts must be "
                               "letters in [a-zA-Z]")
    return subs, (rhs if arrow else None)


def _parse_einsum(equation: str, shapes: list) -> tuple[list[str], str]:
    """Resolve ``equation`` for operands of ``shapes`` into explicit letters: ``'...'`` becomes fresh
    letters (right-aligned, broadcast as in NumPy) and implicit mode gets PyTorch's output (the
    ellipsis dims, then the letters used exactly once, in alphabetical order).

    Example:
        >>> _parse_einsum("...ij,...jk", [(5, 2, 3), (3, 4)])
        (['aij', 'jk'], 'aik')
    """
    subs, rhs = _split_equation(equation, len(shapes))
    used = set("".join(subs) + (rhs or ""))
    spare = [c for c in _LETTERS if c not in used]  # lowercase first: what ONNX's Einsum accepts
    ranks = []
    for k, (sub, shape) in enumerate(zip(subs, shapes)):
        named = len(sub.replace("...", ""))
        if "..." in sub:
            if named > len(shape):
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) is more than the "
                                   f"number of dimensions ({len(shape)}) for operand {k}")
            ranks.append(len(shape) - named)
        elif named != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) does not match the "
                               f"number of dimensions ({len(shape)}) for operand {k} and no ellipsis was given")
    rank = max(ranks, default=0)
    if rank > len(spare):
        raise RuntimeError(f"einsum(): too many dimensions: '...' needs {rank} letters, only {len(spare)} are free")
    ellipsis = "".join(spare[:rank])
    explicit = [sub.replace("...", ellipsis[rank - (len(shape) - len(sub) + 3):] if "..." in sub else "")
                for sub, shape in zip(subs, shapes)]
    if rhs is None:
        letters = "".join(subs).replace(".", "")
        out = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    else:
        out = rhs.replace("...", ellipsis)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if not any(c in sub for sub in explicit):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any "
                                   "input operand")
    return explicit, out


def _letter_sizes(subs: list[str], shapes: list, equation: str) -> dict:
    """Size of every letter after broadcasting (1 stretches to n, anything else must agree)."""
    sizes: dict = {}
    for k, (sub, shape) in enumerate(zip(subs, shapes)):
        for c, n in zip(sub, shape):
            seen = sizes.get(c, 1)
            if n != seen and n != 1 and seen != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which does not broadcast "
                                   f"with previously seen size {seen} (equation {equation!r}, operand shapes "
                                   f"{[tuple(s) for s in shapes]})")
            sizes[c] = max(seen, n) if n != 0 and seen != 0 else 0
    return sizes


def _einsum_vjp(ctx: Any, g: Any) -> tuple:
    shapes = [tuple(s) for s in ctx.input_meta]
    subs, rhs = _parse_einsum(ctx.attrs["equation"], shapes)
    sizes = _letter_sizes(subs, shapes, ctx.attrs["equation"])
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
        grad = einsum(eq, g, *[conj_if_complex(o) for j, o in enumerate(operands) if j != i])
        shape = shapes[i]
        unique_shape = [shape[sub.index(c)] for c in unique]
        # Letters this operand had at size 1 while others broadcast them: sum them back to 1.
        grad = sum_to(grad, tuple(unique_shape[unique.index(c)] for c in kept))
        if kept != unique:  # letters only this operand had were summed out: broadcast them back
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


# Two operands whose sizes multiply past this contract through BLAS (einsum's optimize=True: a batched product
# such as 'bhid,bhjd->bhij' runs 4x faster there than in einsum's C loop); below it the planning costs more
# (~6 us) than it saves.
_EINSUM_PLAN_SIZE = 1 << 20


def _einsum_impl(xp: Any, *ops: Any, equation: str) -> Any:
    dtype = ops[0].dtype
    plan = len(ops) > 2 or (len(ops) == 2 and ops[0].size * ops[1].size > _EINSUM_PLAN_SIZE)
    if dtype.kind not in "fiubc":  # bfloat16: NumPy's einsum has no loop for it; compute in float32
        return xp.einsum(equation, *(o.astype(xp.float32) for o in ops), optimize=plan).astype(dtype)
    return xp.einsum(equation, *ops, optimize=plan)


def _einsum_rule(*specs: Spec, equation: str) -> Spec:
    shapes = [tuple(s.shape) for s in specs]
    subs, rhs = _parse_einsum(equation, shapes)
    sizes = _letter_sizes(subs, shapes, equation)
    return Spec(tuple(sizes[c] for c in rhs), specs[0].dtype, specs[0].device)


EINSUM = register(OpDef(
    name="einsum", batch=batching.einsum, category="linalg", vjp=_einsum_vjp, shape_rule=_einsum_rule, onnx=to_onnx.einsum,
    impl=_einsum_impl, autocast="lower", save="cross", flops=cost.einsum_flops,  # multilinear: operand i's grad reads only the others
))


def _sublist_equation(args: tuple) -> tuple[str, tuple]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (PyTorch's sublist form) as an equation string."""
    def letters(sublist: Any) -> str:
        out = ""
        for item in sublist:
            if item is Ellipsis:
                out += "..."
            elif isinstance(item, int) and 0 <= item < len(_LETTERS):
                out += _LETTERS[item]
            else:
                raise RuntimeError(f"einsum(): sublist entries must be Ellipsis or ints in [0, 52), got {item!r}")
        return out

    operands, subs = args[0::2], args[1::2]
    if len(args) % 2:  # an output sublist closes the argument list
        operands, output = args[0:-1:2], args[-1]
        return ",".join(letters(s) for s in subs) + "->" + letters(output), tuple(operands)
    return ",".join(letters(s) for s in subs), tuple(operands)


def _contracts(equation: Any) -> bool:
    """Whether an einsum equation sums over some label (a contraction), as far as the string tells."""
    if not isinstance(equation, str):
        return True
    lhs, _, rhs = equation.replace(" ", "").partition("->")
    labels = set(lhs.replace(",", "").replace(".", ""))
    if not _:  # implicit output: the labels that appear once
        counts = {c: lhs.count(c) for c in labels}
        return any(n > 1 for n in counts.values())
    return bool(labels - set(rhs))


def _einsum_view(x: Any, sub: str, rhs: str) -> Any:
    """One operand, no letter summed (``'ij->ji'``, ``'ii->i'``, ``'b...->...b'``): a view of ``x``, as torch's
    einsum takes a diagonal for each repeated letter and permutes, so writing the result writes ``x``."""
    letters = list(sub)
    while len(set(letters)) < len(letters):
        i = next(k for k, c in enumerate(letters) if c in letters[k + 1:])
        j = letters.index(letters[i], i + 1)
        x = x.diagonal(0, i, j)  # (the diagonal becomes the last dim)
        letters = [c for k, c in enumerate(letters) if k not in (i, j)] + [letters[i]]
    return x.permute(*[letters.index(c) for c in rhs])


def einsum(*args: Any) -> Any:
    """PyTorch's einsum: ``einsum("...ij,...jk", a, b)``, ``einsum(eq, [a, b])`` or the sublist form
    ``einsum(a, [0, 1], b, [1, 2])``. ``'...'`` broadcasts like NumPy; implicit mode (no ``->``)
    outputs the ellipsis dims, then the letters used once, alphabetically.

    Example:
        >>> ember.einsum("...ii->...i", ember.eye(3).expand(2, 3, 3)).shape
        ember.Size([2, 3])
    """
    if not args:
        raise TypeError("einsum(): expected an equation and operands")
    if isinstance(args[0], str):
        equation, operands = args[0], args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
    else:
        equation, operands = _sublist_equation(args)
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for k, o in enumerate(operands):
        if not isinstance(o, dispatch.Tensor):
            raise TypeError(f"einsum(): operand {k} is a {type(o).__name__}, expected a Tensor")
    target = operands[0].dtype

    mixed = any(o.dtype is not operands[0].dtype for o in operands[1:])
    if mixed and not _autocast.active and len(operands) > 1 and _contracts(equation):
        # PyTorch refuses mixed dtypes where einsum contracts (its bmm path); a pure product promotes.
        k = next(i for i, o in enumerate(operands) if o.dtype is not operands[0].dtype)
        raise RuntimeError(f"einsum(): operands must have the same dtype, but operand 0 is {operands[0].dtype} "
                           f"and operand {k} is {operands[k].dtype}; convert with .to(...)")
    for o in operands[1:]:
        target = dtypes.promote_types(target, o.dtype)
    shapes = [tuple(o.shape) for o in operands]
    subs, rhs = _parse_einsum(equation, shapes)
    if len(operands) == 1 and set(subs[0]) <= set(rhs):  # nothing summed: torch returns a view (diagonal, permute)
        return _einsum_view(operands[0], subs[0], rhs)
    if not (target.is_floating_point or target.is_complex):
        # torch sums a letter found in one operand only (and not in the output) with ``sum`` first, which widens
        # bool and integers to int64: einsum('i->', uint8) is 300, not 300 wrapped to 44
        for k, sub in enumerate(subs):
            others = "".join(s for j, s in enumerate(subs) if j != k) + rhs
            if any(c not in others for c in sub):
                target = dtypes.int64
    operands = tuple(dispatch.cast(o, target) for o in operands)
    sizes = _letter_sizes(subs, shapes, equation)
    # One explicit equation per call: the record (and a saved graph or ONNX file) never sees '...',
    # and size-1 dims are expanded first so the backward of that expand sums them back.
    broadcast = []
    for sub, o in zip(subs, operands):
        full = tuple(sizes[c] for c in sub)
        broadcast.append(o.expand(full) if full != tuple(o.shape) else o)
    return dispatch.apply(EINSUM, tuple(broadcast), {"equation": ",".join(subs) + "->" + rhs})
