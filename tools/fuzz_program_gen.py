"""Random small programs for the program-level differential fuzzer (tools/fuzz_vs_torch.py).

A program is a few input tensors (random dtype, shape, special values) and 3-8 Python statements that read
``L`` (the library: torch or ember) and ``F`` (``L.nn.functional``): layouts (transposed, stepped slices,
expanded, permuted), ops with Python scalars and 0-d tensors mixed in, in-place ops and ``out=`` on views,
writes through aliases. Statements are drafted one at a time and run on torch as they are drafted: a draft
torch refuses is dropped (now and then one is kept as the program's last line, so errors are compared too),
so almost every program runs to its end and each statement sees the real shapes and dtypes of what came
before.

Example:
    >>> import numpy as np, torch
    >>> prog = generate(np.random.default_rng(0), torch)
    >>> len(prog.lines) >= 3
    True
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import numpy as np

INTS = ("uint8", "int8", "int16", "int32", "int64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
DTYPES = ("bool",) + INTS + FLOATS + ("complex64",)
# dtype draw weights: float32/float64/int64 most often, every dtype reached
_WEIGHTS = np.array([1, 1, 1, 1, 1, 2, 1.5, 1.5, 3, 2, 1], dtype=float)
SHAPES = [(), (0,), (1,), (3,), (4,), (2, 3), (3, 1), (1, 3), (3, 3), (4, 3), (2, 0), (2, 3, 4), (2, 1, 3),
          (3, 2, 2), (2, 2, 1, 3)]
FLOAT_SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30, 1e-40, 65504.0, 1.0, -1.0, 0.5, 2.5,
                  -3.5, 100.0]
PY_SCALARS = ["0", "1", "-1", "2", "3", "-7", "True", "False", "0.5", "-2.5", "1e-3", "-0.0", "1e30", "2**31",
              "float('inf')", "float('-inf')", "float('nan')", "(1+2j)", "300", "-129"]


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def input_values(rng: np.random.Generator, dtype: str, shape: tuple, special: float = 0.3) -> np.ndarray:
    """Values of ``dtype`` with its edge values mixed in (the array is float64/int64/bool/complex128)."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return (rng.random(n) < 0.5).reshape(shape)
    if dtype in INTS:
        info = np.iinfo(dtype)
        pool = [v for v in (0, 1, -1, 2, -2, 3, 7, -8, 100, info.max, info.min, info.max - 1) if info.min <= v <= info.max]
        out = rng.integers(max(info.min, -9), min(info.max, 10) + 1, n)
        mask = rng.random(n) < special
        out[mask] = [_pick(rng, pool) for _ in range(int(mask.sum()))]
        return out.reshape(shape)
    real = rng.standard_normal(n) * 2
    if rng.random() < 0.4:
        real = np.round(real, 1)  # exact halves and ties for rounding ops
    mask = rng.random(n) < special
    real[mask] = [_pick(rng, FLOAT_SPECIALS) for _ in range(int(mask.sum()))]
    if dtype == "complex64":
        imag = np.round(rng.standard_normal(n), 1)
        return (real + 1j * imag).reshape(shape)
    return real.reshape(shape)


@dataclasses.dataclass
class Program:
    """Inputs ``(name, values, dtype, requires_grad)`` and statements ``(code, tag)``."""

    inputs: list
    lines: list
    grad: bool = False
    seed: int | None = None
    resized_at: int | None = None  # the first statement where torch resized a non-empty out= (set when run)

    def source(self, libs: str = "torch, ember") -> str:
        """A self-contained script running the program on each library and printing every tensor."""
        out = ["import numpy as np", "import torch", "import ember", "nan, inf = float('nan'), float('inf')", "",
               f"for L in ({libs},):", "    F = L.nn.functional"]
        for name, vals, dtype, rg in self.inputs:
            lit = repr(np.asarray(vals).tolist())
            via = "float32" if dtype == "bfloat16" else dtype
            t = f"L.tensor(np.array({lit}, dtype='{via}'))" + (".to(L.bfloat16)" if dtype == "bfloat16" else "")
            out.append(f"    {name} = {t}" + (".requires_grad_()" if rg else ""))
        out += ["    " + code for code, _ in self.lines]
        out.append("    print(L.__name__, {k: v for k, v in list(locals().items()) if isinstance(v, L.Tensor)})")
        return "\n".join(out)


class _Draft:
    """What a statement generator sees: the rng and the live variables (torch tensors, as torch ran them)."""

    def __init__(self, rng: np.random.Generator, env: dict, grad: bool) -> None:
        self.rng, self.env, self.grad = rng, env, grad

    def names(self, pred: Callable[[Any], bool] | None = None) -> list:
        import torch

        return [k for k, v in self.env.items() if isinstance(v, torch.Tensor) and (pred is None or pred(v))]

    def var(self, pred: Callable[[Any], bool] | None = None) -> str | None:
        names = self.names(pred)
        if not names:
            return None
        recent = names[-4:]  # favour recent results: programs are chains, not stars
        return _pick(self.rng, recent if self.rng.random() < 0.6 else names)

    def partner(self, a: str) -> str:
        """A second operand for ``a``: a broadcastable variable, a 0-d input, a Python scalar."""
        r = self.rng.random()
        shape = tuple(self.env[a].shape)
        if r < 0.55:
            ok = []
            for k in self.names():
                try:
                    np.broadcast_shapes(shape, tuple(self.env[k].shape))
                    ok.append(k)
                except ValueError:
                    pass
            if ok:
                return _pick(self.rng, ok)
        if r < 0.7:
            zero_d = self.names(lambda t: t.dim() == 0)
            if zero_d:
                return _pick(self.rng, zero_d)
        return _pick(self.rng, PY_SCALARS)

    def dim(self, a: str, allow_none: bool = False) -> Any:
        nd = self.env[a].dim()
        if nd == 0 or (allow_none and self.rng.random() < 0.2):
            return None if allow_none else 0
        d = int(self.rng.integers(nd))
        return d - nd if self.rng.random() < 0.3 else d

    def ndim(self, a: str) -> int:
        return self.env[a].dim()


# ---- statement generators: each returns (code with {out} for the new name, tag) or None ----------------------
UNARY = ["abs", "neg", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
         "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc",
         "erfinv", "lgamma", "digamma", "reciprocal", "floor", "ceil", "round", "trunc", "frac", "square", "relu",
         "isnan", "isinf", "isfinite", "signbit", "logical_not", "bitwise_not", "nan_to_num", "angle", "positive",
         "deg2rad", "sinc", "logit", "i0", "isposinf", "isneginf", "isreal", "conj_physical", "fix", "rad2deg"]
UNARY_EXPR = ["F.gelu({a})", "F.gelu({a}, approximate='tanh')", "F.silu({a})", "F.softplus({a})", "F.mish({a})",
              "F.elu({a})", "F.leaky_relu({a}, 0.1)", "F.hardtanh({a})", "F.relu6({a})", "F.hardswish({a})",
              "F.hardsigmoid({a})", "F.logsigmoid({a})", "F.softsign({a})", "F.tanhshrink({a})", "F.selu({a})",
              "F.celu({a})", "F.softshrink({a})", "F.hardshrink({a})", "L.clamp({a}, -1, 2)", "{a}.clamp(min=0)",
              "{a}.clamp(max={s})", "L.round({a}, decimals=1)", "L.nan_to_num({a}, nan=0.0, posinf=1.0, neginf=-1.0)",
              "{a}.float()", "{a}.double()", "{a}.half()", "{a}.bfloat16()", "{a}.int()", "{a}.long()", "{a}.bool()",
              "{a}.to(L.int8)", "{a}.to(L.uint8)", "{a}.to(L.int16)", "{a}.to(L.complex64)", "{a}.type_as({b})",
              "L.special.ndtr({a})", "L.special.expit({a})", "L.special.entr({a})", "L.special.erfcx({a})",
              "L.special.log_ndtr({a})", "L.special.xlog1py({a}, {b})", "{a} ** 2", "{a} ** 3", "{a} ** 0.5",
              "{a} ** -1", "{a} ** -2", "{a} ** -0.5", "2 ** {a}", "{s} - {a}", "{s} / {a}", "{s} // {a}", "-{a}",
              "~{a}", "abs({a})", "{a}.sum_to_size(1)" ]
BINARY_OP = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^", "<<", ">>"]
BINARY_FN = ["L.add({a}, {b}, alpha=2)", "L.sub({a}, {b}, alpha=-1)", "L.maximum({a}, {b})", "L.minimum({a}, {b})",
             "L.fmax({a}, {b})", "L.fmin({a}, {b})", "L.atan2({a}, {b})", "L.hypot({a}, {b})", "L.copysign({a}, {b})",
             "L.fmod({a}, {b})", "L.remainder({a}, {b})", "L.xlogy({a}, {b})", "L.logaddexp({a}, {b})",
             "L.nextafter({a}, {b})", "L.ldexp({a}, {b})", "L.lerp({a}, {b}, 0.3)", "L.addcmul({a}, {b}, {c}, value=0.5)",
             "L.addcdiv({a}, {b}, {c}, value=-2)", "L.where({a} > 0, {a}, {b})", "L.where({c} != 0, {b}, {a})",
             "L.isclose({a}, {b})", "L.heaviside({a}, {b})", "L.gcd({a}, {b})", "L.div({a}, {b}, rounding_mode='floor')",
             "L.div({a}, {b}, rounding_mode='trunc')", "L.float_power({a}, {b})", "L.pow({a}, {b})",
             "L.true_divide({a}, {b})", "L.logical_xor({a}, {b})", "L.bitwise_and({a}, {b})", "L.eq({a}, {b})",
             "L.clamp({a}, min={b})", "L.clamp({a}, {c}, {b})", "L.masked_fill({a}, {c} > 0, {s})",
             "L.lerp({a}, {b}, {c})", "L.special.zeta({a}, {b})", "L.igamma({a}, {b})", "L.polar({a}.abs(), {b})",
             "L.complex({a}, {b})", "L.dist({a}, {b})", "L.logaddexp2({a}, {b})", "L.bitwise_left_shift({a}, {b})"]
REDUCE = ["sum", "mean", "prod", "amax", "amin", "std", "var", "norm", "logsumexp", "all", "any", "nansum", "nanmean",
          "count_nonzero", "argmax", "argmin"]
REDUCE_EXPR = ["{a}.sum()", "{a}.max()", "{a}.min()", "{a}.median()", "{a}.nanmedian()", "{a}.sum(dtype=L.float64)",
               "{a}.mean(dtype=L.float64)", "{a}.max({d})[0]", "{a}.min({d}).indices", "{a}.median({d})[0]",
               "{a}.mode({d})[0]", "{a}.sort({d})[0]", "{a}.sort({d}, descending=True)[1]", "{a}.argsort({d})",
               "{a}.sort({d}, stable=True)[1]", "L.topk({a}, 1, {d})[0]", "{a}.cumsum({d})", "{a}.cumprod({d})",
               "{a}.cummax({d})[0]", "{a}.cummin({d})[1]", "L.logcumsumexp({a}, {d})", "{a}.cumsum({d}, dtype=L.float64)",
               "L.std({a}, {d}, correction=0)", "L.var_mean({a}, {d})[0]", "L.aminmax({a})[1]", "L.softmax({a}, {d})",
               "L.log_softmax({a}, {d})", "F.normalize({a}, dim={d})", "L.diff({a}, dim={d})", "{a}.kthvalue(1, {d})[0]",
               "L.linalg.vector_norm({a}, 3)", "L.linalg.vector_norm({a}, float('inf'), {d})", "{a}.norm(1)",
               "L.msort({a})", "L.unique({a})", "L.unique({a}, return_counts=True)[1]"]
VIEW = ["{a}.t()", "{a}.T", "{a}.mT", "{a}.transpose(0, -1)", "{a}.permute(*reversed(range({a}.dim())))",
        "{a}.reshape(-1)", "{a}.view(-1)", "{a}.flatten()", "{a}.unsqueeze({d})", "{a}.squeeze()", "{a}.squeeze({d})",
        "{a}[::2]", "{a}[1:]", "{a}[..., ::2]", "{a}[..., 1:]", "{a}[0]", "{a}[-1]", "{a}[None]", "{a}[..., None]",
        "{a}.narrow({d}, 0, 1)", "{a}.select({d}, 0)", "{a}.diagonal()", "{a}.diagonal(0, -2, -1)",
        "{a}.expand(2, *{a}.shape)", "{a}.expand_as({b})", "{a}.unfold(-1, 2, 1)", "{a}.split(1, {d})[0]",
        "{a}.chunk(2, {d})[-1]", "{a}.unbind({d})[0]", "{a}.movedim(0, -1)", "{a}.swapaxes(0, -1)", "{a}.detach()",
        "{a}.contiguous()", "{a}.view({a}.shape)", "{a}.reshape({a}.shape[::-1])", "{a}.view(L.int32)",
        "{a}.view(L.float32)", "{a}.view(L.int16)", "{a}.view(L.uint8)", "L.view_as_real({a})", "{a}.real", "{a}.imag",
        "{a}.as_strided((2,), (1,))", "{a}.unflatten(0, (1, -1))", "{a}[:, ::2]", "{a}.to({a}.dtype)", "{a}.type({a}.dtype)",
        "{a}.float()", "{a}.reshape(1, -1)", "{a}[{a} > 0]", "{a}[[0, -1]]", "{a}.view_as({a})"]
COPY = ["{a}.clone()", "{a}.flip({d})", "{a}.roll(1, {d})", "L.cat([{a}, {a}], {d})", "L.stack([{a}, {b}])",
        "L.cat([{a}, {b}])", "{a}.tril()", "{a}.triu(1)", "{a}.repeat(2, *[1] * {a}.dim())", "{a}.tile((2,))",
        "{a}.repeat_interleave(2, {d})", "L.index_select({a}, {d}, L.tensor([0, 0]))",
        "L.gather({a}, {d}, L.zeros_like({a}, dtype=L.int64))", "L.masked_select({a}, {a} != 0)",
        "{a}.nonzero()", "L.where({a})[0]", "{a} @ {b}", "L.matmul({a}, {b}.mT)", "L.mm({a}, {b})", "L.outer({a}, {b})",
        "L.dot({a}, {b})", "L.einsum('ij,jk->ik', {a}, {b})", "L.einsum('ij->ji', {a})", "L.einsum('ii->i', {a})",
        "L.einsum('ij,ij->i', {a}, {b})", "L.einsum('...i,...i->...', {a}, {b})", "L.einsum('i,j->ij', {a}, {b})",
        "L.einsum('ij->', {a})", "L.einsum('bij,bjk->bik', {a}, {b})", "L.einsum('ij,kj->ik', {a}, {b})",
        "L.einsum('i...->...', {a})", "L.tensordot({a}, {b}, 1)", "L.kron({a}, {b})", "L.cross({a}, {b}, -1)",
        "L.cdist({a}, {b})", "L.trace({a})", "L.bincount({a})", "L.searchsorted({a}.sort()[0], {b})",
        "L.bucketize({b}, {a}.sort()[0])", "L.clone({a}, memory_format=L.contiguous_format)",
        "{a}.new_zeros({a}.shape)", "L.zeros_like({a})", "L.ones_like({a}, dtype=L.float32)", "L.full_like({a}, {s})",
        "L.empty_like({a}).fill_(1)", "F.pad({a}, (1, 0))", "L.atleast_2d({a})", "L.vander({a}, 3)",
        "L.histc({a}, 4)", "L.rot90({a})", "L.take({a}, L.tensor([0]))", "L.addmm({c}, {a}, {b})",
        "L.baddbmm({c}, {a}, {b})", "L.linalg.matrix_norm({a})", "F.linear({a}, {b})", "L.trapezoid({a})",
        "L.cov({a})", "L.corrcoef({a})", "L.block_diag({a}, {b})", "L.cartesian_prod({a}, {b})",
        "L.combinations({a})", "L.meshgrid({a}, {b}, indexing='ij')[0]", "L.broadcast_to({a}, (2,) + tuple({a}.shape))"]
TARGETS = ["{a}", "{a}", "{a}[::2]", "{a}[1:]", "{a}.t()", "{a}[0]", "{a}[..., ::2]", "{a}.diagonal()",
           "{a}.transpose(0, -1)", "{a}.unsqueeze(0)", "{a}.view(-1)", "{a}[:, 1]", "{a}.narrow(-1, 0, 1)", "{a}.mT",
           "{a}.expand(2, *{a}.shape)", "{a}.real", "{a}.view_as({a})", "{a}.reshape(-1)", "{a}.flatten()",
           "{a}.squeeze()", "{a}.permute(*reversed(range({a}.dim())))", "{a}.detach()"]
INPLACE = ["add_({b})", "sub_({b}, alpha=2)", "mul_({b})", "div_({b})", "clamp_(min={s})", "clamp_(-1, 1)",
           "fill_({s})", "zero_()", "neg_()", "abs_()", "exp_()", "sqrt_()", "copy_({b})", "masked_fill_({b} > 0, {s})",
           "addcmul_({b}, {b}, value=2)", "lerp_({b}, 0.5)", "pow_(2)", "floor_()", "round_()", "relu_()",
           "sigmoid_()", "tanh_()", "__iadd__({b})", "__imul__({s})", "__itruediv__({s})", "__ifloordiv__({b})",
           "__iand__({b})", "__ilshift__(1)", "floor_divide_({b})", "remainder_({b})", "bitwise_not_()",
           "logical_not_()", "sign_()", "trunc_()", "fmod_({s})", "index_fill_(0, L.tensor([0]), {s})",
           "index_add_(0, L.tensor([0, 0]), {b}[:2])", "scatter_add_(0, L.zeros_like({b}, dtype=L.int64), {b})",
           "clamp_max_({b})", "nan_to_num_()", "square_()", "reciprocal_()", "log_()", "cumsum_(0)", "t_()",
           "unsqueeze_(0)", "squeeze_()", "transpose_(0, -1)", "requires_grad_(False)", "add_({a})", "mul_({a}.flip(0))",
           "copy_({a}.t())", "add_({a}.t())", "sub_({a}[0])", "copy_({a}.flip(-1))", "masked_scatter_({a} > 0, {b})",
           "put_(L.tensor([0]), L.tensor([1]).to({a}.dtype), accumulate=True)", "index_copy_(0, L.tensor([0]), {b}[:1])"]
OUT_FN = ["L.add({a}, {b}, out={o})", "L.mul({a}, {s}, out={o})", "L.sub({a}, {b}, out={o})", "L.div({a}, {b}, out={o})",
          "L.exp({a}, out={o})", "L.abs({a}, out={o})", "L.neg({a}, out={o})", "L.sum({a}, {d}, out={o})",
          "L.cumsum({a}, {d}, out={o})", "L.matmul({a}, {b}, out={o})", "L.clamp({a}, 0, 1, out={o})",
          "L.where({a} > 0, {a}, {b}, out={o})", "L.cat([{a}, {b}], out={o})", "L.mm({a}, {b}, out={o})",
          "L.sqrt({a}, out={o})", "L.maximum({a}, {b}, out={o})", "L.floor_divide({a}, {b}, out={o})",
          "L.sort({a}, {d}, out=({o}, L.empty(0, dtype=L.int64)))", "L.amax({a}, {d}, out={o})",
          "L.pow({a}, 2, out={o})", "L.mean({a}, {d}, out={o})", "L.round({a}, out={o})", "L.sign({a}, out={o})"]


def _fill(code: str, d: _Draft, a: str) -> str:
    """Fill {a} {b} {c} {s} {d} {o} in a template."""
    out = code
    if "{b}" in out:
        out = out.replace("{b}", d.partner(a))
    if "{c}" in out:
        out = out.replace("{c}", d.partner(a))
    if "{s}" in out:
        out = out.replace("{s}", _pick(d.rng, PY_SCALARS))
    if "{d}" in out:
        out = out.replace("{d}", str(d.dim(a)))
    if "{o}" in out:
        o = d.var()
        out = out.replace("{o}", _pick(d.rng, TARGETS).replace("{a}", o))
    return out.replace("{a}", a)


def _tag_of(template: str) -> str:
    head = template.split("(")[0].replace("{a}", "x").replace("{b}", "y").replace("{s}", "s")
    return head.strip()[:40]


def _assign(d: _Draft, kind: str) -> tuple:
    a = d.var()
    if kind == "unary":
        name = _pick(d.rng, UNARY)
        form = d.rng.random()
        code = f"L.{name}({a})" if form < 0.5 else f"{a}.{name}()"
        return code, f"unary.{name}"
    table = {"unary_expr": UNARY_EXPR, "binary_fn": BINARY_FN, "reduce_expr": REDUCE_EXPR, "view": VIEW,
             "copy": COPY}.get(kind)
    if table is not None:
        template = _pick(d.rng, table)
        return _fill(template, d, a), f"{kind}.{template}"
    if kind == "binary_op":
        op = _pick(d.rng, BINARY_OP)
        b = d.partner(a)
        return (f"{a} {op} {b}" if d.rng.random() < 0.7 else f"{b} {op} {a}"), f"binary_op.{op}"
    if kind == "reduce":
        name = _pick(d.rng, REDUCE)
        dim = d.dim(a, allow_none=True)
        keep = d.rng.random() < 0.4
        args = "" if dim is None else f"{dim}" + (", keepdim=True" if keep else "")
        return f"L.{name}({a}{', ' if args else ''}{args})", f"reduce.{name}"
    raise ValueError(kind)


def _statement(d: _Draft, out: str) -> tuple:
    """One drafted statement ``(code, tag)``: an assignment to ``out``, an in-place write or an ``out=`` call."""
    r = d.rng.random()
    if r < 0.2:
        a = d.var()
        tmpl = _pick(d.rng, TARGETS)
        target = tmpl.replace("{a}", a)
        op = _pick(d.rng, INPLACE)
        code = _fill(f"{target}.{op}", d, a)
        return code, f"inplace.{op.split('(')[0]}@{tmpl}"
    if r < 0.27:
        a = d.var()
        target = _pick(d.rng, TARGETS).replace("{a}", a)
        rhs = _pick(d.rng, ["{b}", "{s}", "{a}.t()", "{a}.flip(0)", "{b} * 2"])
        index = _pick(d.rng, ["...", "0", "::2", "1:", "{t} > 0", ":, 0", "[0, 0]"])
        index = index.replace("{t}", target)
        return _fill(f"{target}[{index}] = {rhs}", d, a), "setitem"
    if r < 0.34:
        a = d.var()
        template = _pick(d.rng, OUT_FN)
        return _fill(template, d, a), f"out.{template.split('(')[0]}"
    kinds = ["unary", "unary_expr", "binary_op", "binary_fn", "reduce", "reduce_expr", "view", "copy"]
    kind = _pick(d.rng, kinds)
    code, tag = _assign(d, kind)
    return f"{out} = {code}", tag


LAYOUTS = ["", "", ".t()", "[::2]", "[..., ::2]", ".transpose(0, -1)", ".expand(2, *{n}.shape)",
           ".permute(*reversed(range({n}.dim())))", "[1:]", ".unsqueeze(1).expand(-1, 2, *{n}.shape[1:])",
           ".mT", "[:, ::2]", ".diagonal()", "[..., :1]"]


def generate(rng: np.random.Generator, torch: Any, n_lines: tuple = (3, 8)) -> Program:
    """A random program: inputs, a layout per input, then statements drafted against torch (see the module)."""
    grad = rng.random() < 0.4
    inputs, lines = [], []
    n_in = int(rng.integers(1, 4))
    for i in range(n_in):
        dtype = str(rng.choice(DTYPES, p=_WEIGHTS / _WEIGHTS.sum()))
        shape = _pick(rng, SHAPES)
        if grad and i == 0:
            dtype = _pick(rng, ("float32", "float64", "float64", "float32", "float16", "bfloat16"))
        rg = grad and dtype in FLOATS
        inputs.append((f"a{i}", input_values(rng, dtype, shape), dtype, rg))
    if rng.random() < 0.5:  # a 0-d operand of its own dtype (type promotion against dimensioned tensors)
        dtype = str(rng.choice(DTYPES, p=_WEIGHTS / _WEIGHTS.sum()))
        inputs.append((f"a{n_in}", input_values(rng, dtype, ()), dtype, grad and dtype in FLOATS))
    env = _fresh_env(torch, inputs)
    for name, _, _, rg in inputs:
        layout = _pick(rng, LAYOUTS).replace("{n}", name)
        src = f"{name}.clone()" if rg else name
        code = f"x{name[1:]} = {src}{layout}"
        if _try(env, code):
            lines.append((code, f"layout{layout.split('(')[0] or '.none'}"))
        else:
            code = f"x{name[1:]} = {src}"
            _try(env, code)
            lines.append((code, "layout.none"))
    target = int(rng.integers(n_lines[0], n_lines[1] + 1))
    d = _Draft(rng, env, grad)
    made, attempts = 0, 0
    while made < target and attempts < target * 12:
        attempts += 1
        code, tag = _statement(d, f"v{made}")
        if _try(env, code):
            lines.append((code, tag))
            made += 1
        elif made == target - 1 and rng.random() < 0.08:
            lines.append((code, tag))  # a refused last statement: ember must refuse too
            break
        else:
            env.clear()
            env.update(_fresh_env(torch, inputs))
            for c, _ in lines:
                _try(env, c)
    return Program(inputs, lines, grad)


def make_input(lib: Any, vals: np.ndarray, dtype: str, requires_grad: bool) -> Any:
    """``vals`` as a tensor of ``dtype`` on ``lib`` (bfloat16 through float32, as the reproducer spells it)."""
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.asarray(vals).astype("float32" if dtype == "bfloat16" else dtype)
    t = lib.tensor(arr)
    if dtype == "bfloat16":
        t = t.to(lib.bfloat16)
    return t.requires_grad_() if requires_grad else t


def _fresh_env(lib: Any, inputs: list) -> dict:
    env = {"L": lib, "F": lib.nn.functional, "nan": float("nan"), "inf": float("inf")}
    for name, vals, dtype, rg in inputs:
        env[name] = make_input(lib, vals, dtype, rg)
    return env


def _try(env: dict, code: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, env)  # noqa: S102 - the fuzzer's own generated statements
        return True
    except Exception:  # noqa: BLE001 - any refusal: the draft is dropped
        return False
