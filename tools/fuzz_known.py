"""Mismatch classes of the program fuzzer (tools/fuzz_vs_torch.py) that are decisions or torch's own behaviour.

Each entry: a name, the reason (why ember differs on purpose, or why torch's answer is not a contract), and a
predicate over the mismatch and its program. :func:`known` returns the first entry's name that matches, so
the fuzzer's tests fail only on classes nobody has triaged. Kinds that are not silent (an error on one side,
another exception class, a result's strides) are reported by the CLI and not listed here.

Example:
    >>> from fuzz_known import SILENT
    >>> "values" in SILENT
    True
"""
from __future__ import annotations

from typing import Any

SILENT = frozenset(("type", "dtype", "shape", "requires_grad", "nan", "inf", "values", "zero sign", "aliasing"))


def np_extreme(vals: Any) -> bool:
    """Whether an input holds int64 limits or +-1e30-scale floats (sums of them are rounding noise)."""
    import numpy as np

    a = np.asarray(vals)
    if a.dtype.kind in "iu":
        return bool(a.size) and bool((np.abs(a.astype(np.float64)) > 1e15).any())
    if a.dtype.kind in "fc":
        fin = np.isfinite(a)
        return bool((np.abs(a[fin]) > 1e20).any())
    return False


def _code(prog: Any, m: Any) -> str:
    return prog.lines[m.line][0] if m.line < len(prog.lines) else ""


def _all(prog: Any) -> str:
    return "\n".join(c for c, _ in prog.lines)


def _overlapping_write(prog: Any, m: Any) -> bool:
    """An in-place write or ``out=`` whose operands share memory with what it writes (a name used twice)."""
    code = _code(prog, m)
    names = [w for w in set(code.replace("(", " ").replace(")", " ").replace(".", " ").replace(",", " ")
                          .replace("[", " ").replace("]", " ").split()) if w[:1] in "avx" and w[1:].isdigit()]
    return any(code.count(n) > 1 for n in names) or len(names) > 1


KNOWN = [
    ("carried rounding",
     "an operand of the statement already differed from torch's in its last bits (an earlier difference within "
     "tolerance: NumPy's float32 transcendental vs SLEEF's, a half-precision ulp) and the statement amplified it "
     "(acos near 1, the variance of near-equal values, a bit view, a tie broken by it); each op is judged on "
     "bit-identical operands, where every such class shows up on its own",
     lambda m, p: m.carried and m.kind in ("values", "nan", "inf", "zero sign")),
    ("out= resized or overlapping",
     "an out= tensor of another shape is resized, which torch deprecates (it warns): torch then restrides a view "
     "to the input's layout and writes its storage; an out= sharing memory with an input is unspecified in torch "
     "(its reductions read while they write). Same-shape, non-overlapping out= agree",
     lambda m, p: m.tag.startswith("out.") or (p.resized_at is not None and m.line >= p.resized_at)),
    ("in-place write through an overlapping operand",
     "x[1:].sub_(x[0]), x.masked_scatter_(m, x), setitem from a view of the target: torch's kernels read operands "
     "while writing the same memory (the result depends on its loop order); ember reads every operand first",
     lambda m, p: (m.tag.startswith("inplace.") or m.tag == "setitem") and m.kind in ("values", "nan", "inf", "zero sign")
     and _overlapping_write(p, m)),
    ("unique stays detached",
     "a documented decision (docs/pytorch-compat.md, trust18): torch's unique result requires grad but its backward "
     "raises; ember's does not require grad",
     lambda m, p: m.kind == "requires_grad" and "unique" in m.tag),
    ("sign(nan)",
     "a documented decision (docs/special-points.md): sign(nan) is NaN in ember, 0 in torch; gradients through it "
     "(norm(1), abs, l1) follow",
     lambda m, p: m.kind in ("nan", "values") and ("sign" in m.tag or (m.tag == "backward" and any(
         k in _all(p) for k in ("norm", "abs", "sign", "sgn", "l1"))))),
    ("floor_divide gradient",
     "a documented decision (trust18): x // y has a zero gradient in ember, torch raises in backward",
     lambda m, p: m.tag == "backward" and m.kind == "ember returns" and any(
         k in _all(p) for k in ("//", "floor_divide", "ifloordiv", "div(", "round", "trunc", "floor", "sign_"))),
    ("non-differentiable in-place op on a float tensor in a graph",
     "torch leaves the history of x untouched by x.logical_not_()/x.bitwise_not_()/integer in-place ops "
     "(the gradient flows as if the values were unchanged, x still requires grad); ember differentiates the new "
     "values (zero) or drops x from the graph",
     lambda m, p: (m.tag == "backward" or m.kind == "requires_grad") and any(
         k in _all(p) for k in ("logical_not_", "bitwise_not_", "__iand__", "__ilshift__", "requires_grad_(False)"))),
    ("setitem of a value requiring grad into an integer tensor",
     "torch marks the integer tensor requires_grad=True (a CopySlices node on an integer tensor); ember keeps "
     "integer tensors out of autograd",
     lambda m, p: m.kind == "requires_grad" and m.tag in ("setitem",) or (m.kind == "requires_grad" and
                                                              m.tag.startswith("inplace.copy_"))),
    ("half-precision special functions",
     "documented leftovers (trust22/23): torch's bfloat16 ndtr rounds its steps, its half softsign/gelu(tanh)/"
     "binary_cross_entropy_with_logits/soft_margin/huber kernels differ by an ulp; softsign of integers is torch's "
     "int8 overflow bug",
     lambda m, p: m.kind in ("values", "zero sign") and any(k in m.tag for k in ("ndtr", "softsign", "gelu", "logit",
                                                                                "erfcx", "log_ndtr"))),
    ("gelu(inf)",
     "torch's gelu kernels give NaN at +inf (float and half); ember's is inf, the limit (x * Phi(x))",
     lambda m, p: m.kind == "nan" and "gelu" in _all(p)),
    ("number / tensor is number * reciprocal(tensor)",
     "a documented decision (trust23): torch computes 3.3 / x as 3.3 * (1 / x) (so -0.0 / subnormal is NaN when "
     "1/x overflows); ember divides",
     lambda m, p: m.tag.startswith("unary_expr.{s} /")),
    ("complex zero signs and infinities",
     "the sign of a zero real or imaginary part of a complex result follows the formula (exp(b * log a) for pow, "
     "Smith's division, 0 - z for neg), and complex arithmetic with an infinite part gives NaN parts in torch "
     "(inf * (2 + 0j) = inf + nanj) where NumPy keeps the finite part: a documented decision (complex infinities)",
     lambda m, p: m.kind in ("zero sign", "nan", "inf") and (any(k in _all(p) for k in ("j)", "complex")) or any(
         dt == "complex64" for _, _, dt, _ in p.inputs))),
    ("half-precision gradients",
     "float16/bfloat16 backward formulas: torch's backward kernels compute in float32 and round once "
     "(tanh_backward: g * (1 - y * y)) or round every step in half (sinc's pi * x overflows at 65504), ember's "
     "gradients are ember ops rounded at each step: an ulp or a few where 1 - y * y cancels (the brief's "
     "'half-precision last ulp' leftover)",
     lambda m, p: m.tag == "backward" and m.kind in ("values", "nan", "inf") and any(
         dt in ("float16", "bfloat16") for _, _, dt, _ in p.inputs)),
    ("summation order",
     "a reduction whose terms cancel (1e30 - 1e30 + ..., a mean of +-1 values near 0): NumPy's pairwise sum and "
     "torch's cascade sum round in another order; the difference is a few ulps of the largest term",
     lambda m, p: m.kind == "values" and m.tag.split(".")[0] in ("reduce", "reduce_expr") and "max rel" in m.detail
     and float(m.detail.rsplit("max rel ", 1)[1].rstrip(")")) < 1e-2),
    ("which zero unique keeps",
     "unique of [0.0, -0.0] keeps one of the two equal zeros: which one follows the sort's tie order",
     lambda m, p: m.kind == "zero sign" and "unique" in m.tag),
    ("lerp and logaddexp of equal operands, zero signs",
     "lerp(x, x, w) and logaddexp2(x, x) at a result of zero: the sign follows the formula's branch (b - (b - a) * (1 - w) "
     "in torch for w >= 0.5); -0.0 == 0.0 in every use",
     lambda m, p: m.kind == "zero sign" and any(k in m.tag for k in ("lerp", "logaddexp"))),
    ("zeta at huge arguments",
     "torch's Cephes zeta(1e30, q) is NaN, ember's 0 (the series underflows): both out of any useful range",
     lambda m, p: m.kind == "nan" and "zeta" in m.tag),
    ("ldexp with a half exponent of the other half dtype, logcumsumexp gradient",
     "found and left: ldexp(float16, bfloat16 0-d) rounds 2 ** e differently (trust21's ldexp leftover); torch's "
     "logcumsumexp backward uses another (log-space) formula: 1e-3 relative where the row spans 1e-40..65504",
     lambda m, p: m.kind == "values" and ("ldexp" in m.tag or (m.tag == "backward" and "logcumsumexp" in _all(p)))),

    ("prod gradient at infinite inputs",
     "torch's prod_backward divides the product by each input when none is zero (inf / inf = NaN); ember "
     "multiplies the other factors (the exact derivative)",
     lambda m, p: m.tag == "backward" and m.kind in ("nan", "values", "inf") and "prod" in _all(p)),
    ("cancellation to zero in cross",
     "torch's cross contracts a * b - c * d into a fused multiply-add, so cross(a, a) is 1e-16 there and exactly 0 "
     "in ember: rounding noise relative to the operands, below any tolerance relative to them",
     lambda m, p: m.kind in ("values", "zero sign") and "cross" in m.tag),
    ("complex32",
     "ember has no complex32 (torch's chalf): a half tensor promoted with a complex number is complex64 in ember",
     lambda m, p: m.kind == "dtype" and "complex32" in m.detail),
    ("special functions' last float64 bits",
     "igamma/igammac/zeta/polygamma in float64: SciPy's Cephes and torch's port round differently (1e-11 relative)",
     lambda m, p: m.kind == "values" and any(k in m.tag for k in ("igamma", "zeta", "polygamma", "i0", "digamma"))
     and "max rel" in m.detail and float(m.detail.rsplit("max rel ", 1)[1].rstrip(")")) < 1e-8),
    ("which zero a max/min tie keeps",
     "a documented decision (trust19): amin/amax/max/min of +0.0 and -0.0 keep either; torch's own answer depends "
     "on its vector width",
     lambda m, p: m.kind == "zero sign" and any(k in m.tag for k in ("amin", "amax", "max", "min", "maximum",
                                                                   "minimum", "sort", "topk", "median", "mode"))),
    ("sums that cancel integer or float extremes",
     "sum/mean(dtype=float64) of int64 values at INT64_MIN/MAX, or float sums of +-1e30: the result is rounding "
     "noise of the extremes, and it depends on the summation order (NumPy's pairwise, torch's cascade)",
     lambda m, p: m.kind == "values" and m.tag.split(".")[0] in ("reduce", "reduce_expr") and any(
         np_extreme(vals) for _, vals, _, _ in p.inputs)),
    ("einsum zero signs",
     "einsum('i,j->ij') and other products that sum one term: ember's contraction adds the product to +0 (so "
     "0 * -1.9 is +0), torch multiplies; -0.0 == 0.0 in every use",
     lambda m, p: m.kind == "zero sign" and "einsum" in m.tag),
    ("found and left (trust24)",
     "pow(-0.0, 0-d tensor 0.5) in float16 keeps -0.0 (torch +0.0); a gradient of a mixed float16/bfloat16 op "
     "(div(rounding_mode='trunc')) comes back float32 where torch's engine casts it to the input's dtype; a "
     "binary op whose first operand is a 0-d tensor and whose other is expanded (stride 0) lays its result out as "
     "NumPy's order='K' does (so a later flatten copies where torch's views); einsum broadcasting a summed size-1 "
     "letter of uint8 operands keeps uint8 (torch int64). Each needs a change on a hot path or in the engine",
     lambda m, p: (m.kind == "zero sign" and m.tag in ("binary_op.**", "binary_fn.L.pow({a}, {b})"))
     or (m.kind == "dtype" and m.tag == "backward")
     or (m.kind == "aliasing" and "expand" in _all(p) and any(k in m.tag for k in ("flatten", "reshape", "view")))
     or (m.kind == "dtype" and "einsum" in m.tag)),
    ("torch's float32 constants and subnormals",
     "torch's hardsigmoid backward multiplies float64 gradients by a float32 1/6 (2e-9 relative); its float32 "
     "igamma(1e-40, 1e-40) is 0 where the function is ~1 (subnormal arguments)",
     lambda m, p: m.kind == "values" and ((m.tag == "backward" and "hardsigmoid" in _all(p)) or "igamma" in m.tag)),
    ("NaN payloads through bit views",
     "x.view(int16) of a NaN shows its payload bits, which IEEE leaves unspecified (sin(inf) is 0xFE00 in NumPy, "
     "0xFFFF in torch)",
     lambda m, p: m.kind == "values" and m.tag.startswith("view.{a}.view(L.int")),
    ("hypot's gradient at the origin",
     "a documented decision (docs/special-points.md, tests/ops/test_special_points_vs_torch.py): hypot's gradient "
     "at (0, 0) is 0 in ember, as norm's; torch's g * a / out is 0 / 0 = NaN",
     lambda m, p: m.tag == "backward" and m.kind in ("nan", "values") and "hypot" in _all(p)),
    ("zero signs of products and of adding a zero",
     "mm/matmul of rows holding zeros (BLAS sums from +0) and sub(x, 0, alpha=-1) of x = -0.0 (ember returns x "
     "for a zero other): -0.0 == 0.0 in every use",
     lambda m, p: m.kind == "zero sign" and any(k in m.tag for k in ("mm", "matmul", "@", "alpha"))),
    ("clamp with a 0-d tensor and a number as bounds",
     "torch's argument parser reads clamp(int_tensor, zero_d_float64, 3) through its Scalar overload (the 0-d "
     "tensor becomes a number: float32); with both bounds tensors it promotes them (float64), as ember always does",
     lambda m, p: m.kind == "dtype" and "clamp" in m.tag),
    ("torch's median over an expanded dim",
     "torch 2.13's median/nanmedian(dim) of a tensor with a stride-0 (expanded) dim reads wrong memory "
     "(median of [2.65, 2.65] gave 1e-30 and 3e-322 in the fuzzer's seed 2293): a torch bug, not copied",
     lambda m, p: "median" in m.tag and "expand" in _all(p)),
    ("softshrink/relu zero signs",
     "documented (trust22): torch's softshrink keeps -0.0 in its scalar tail and not in its vector body",
     lambda m, p: m.kind == "zero sign" and any(k in m.tag for k in ("softshrink", "hardshrink", "relu"))),
]


def known(m: Any, prog: Any) -> str | None:
    """The name of the KNOWN entry explaining mismatch ``m`` of ``prog``, or None (also None for non-silent kinds)."""
    for name, _, pred in KNOWN:
        try:
            if pred(m, prog):
                return name
        except Exception:  # noqa: BLE001 - a predicate reading a field a mismatch lacks: not this entry
            continue
    return None
