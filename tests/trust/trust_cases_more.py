"""Seeded case generators for the trust fuzzer's second wave: reductions with dtype=/out=/correction on empty,
integer and bool inputs (``reduce_args``), the indexing family's options (``index_ops``: scatter_reduce with
include_self, index_put with accumulate and duplicates, masked_select, take/put, advanced indices, writes
through expanded views) and binary ops over every dtype pair (``dtype_pairs``).

Example:
    >>> case = reduce_args_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import ALL_DTYPES, GENERATORS, INT_DTYPES, _special_values, pick, values
from trust_diff import Case

# ---- reductions with their arguments ----------------------------------------------------------------------
REDUCE_ARGS = [
    "L.sum(x, {dims}, keepdim={kd}, dtype={dt})", "L.prod(x, {d}, keepdim={kd}, dtype={dt})",
    "L.mean(x, {dims}, keepdim={kd}, dtype={fdt})", "L.nansum(x, {dims}, keepdim={kd}, dtype={dt})",
    "L.nanmean(x, {dims}, keepdim={kd})", "L.var(x, {dims}, correction={c}, keepdim={kd})",
    "L.std(x, {dims}, correction={c}, keepdim={kd})", "L.var_mean(x, {dims}, correction={c})",
    "L.std_mean(x, {d}, correction={c}, keepdim={kd})", "L.amax(x, {dims}, keepdim={kd})",
    "L.amin(x, {dims})", "L.max(x, {d}, keepdim={kd})", "L.min(x, {d})", "L.argmax(x, {d}, keepdim={kd})",
    "L.argmin(x)", "L.argmax(x)", "L.aminmax(x, dim={d}, keepdim={kd})", "L.median(x, {d}, keepdim={kd})",
    "L.nanmedian(x, {d})", "L.mode(x, {d}, keepdim={kd})", "L.kthvalue(x, {k}, {d}, keepdim={kd})",
    "L.topk(x, {k}, {d}, largest={lg}, sorted=True)", "L.sort(x, dim={d}, descending={lg}, stable=True)",
    "L.argsort(x, dim={d}, descending={lg}, stable=True)", "L.cumsum(x, {d}, dtype={dt})",
    "L.cumprod(x, {d}, dtype={dt})", "L.logcumsumexp(x, {d})", "L.cummax(x, {d})", "L.cummin(x, {d})",
    "L.any(x, {d}, keepdim={kd})", "L.all(x, {dims})", "L.any(x)", "L.all(x)", "L.count_nonzero(x, {dims})",
    "L.quantile(x, {q}, dim={d}, keepdim={kd}, interpolation='{interp}')",
    "L.nanquantile(x, {q}, dim={d}, interpolation='{interp}')", "L.quantile(x, L.tensor({qs}), dim={d})",
    "L.logsumexp(x, {dims}, keepdim={kd})", "L.norm(x, {p}, {dims}, keepdim={kd})",
    "L.linalg.vector_norm(x, {p}, {dims}, keepdim={kd}, dtype={fdt})", "L.softmax(x, {d}, dtype={fdt})",
    "L.log_softmax(x, {d})", "L.cumsum(x, {d}).sum({d})", "L.sum(x, dtype={dt})", "x.sum({dims})",
]
OUT_FORMS = ["L.sum(x, {d}, out=o)", "L.cumsum(x, {d}, out=o)", "L.amax(x, {d}, out=o)", "L.mean(x, {d}, out=o)",
             "L.prod(x, {d}, out=o)", "L.max(x, {d}, out=(o, oi))", "L.sort(x, {d}, out=(o, oi))",
             "L.argmax(x, {d}, out=oi)", "L.logsumexp(x, {d}, out=o)", "L.std(x, {d}, out=o)",
             "L.cumprod(x, {d}, out=o)", "L.any(x, {d}, out=ob)", "L.nansum(x, {d}, out=o)",
             "L.topk(x, 1, {d}, out=(o, oi))", "L.cummax(x, {d}, out=(o, oi))", "L.median(x, {d}, out=(o, oi))"]


def reduce_args_case(rng: np.random.Generator) -> Case:
    """A reduction with dims (tuples, negative), keepdim, dtype=, correction, out= over special rows, including
    empty and 0-d tensors and integer/bool inputs."""
    shape = tuple(int(s) for s in pick(rng, [(5,), (3, 4), (2, 3, 2), (4, 1), (0,), (2, 0), (0, 3), (3, 0, 2), (),
                                              (1,), (2, 2)]))
    dtype = pick(rng, ["float64", "float32", "int64", "int32", "uint8", "int8", "bool", "float16", "bfloat16"])
    inputs = {"x": (_special_values(rng, dtype, shape), dtype)}
    nd = max(len(shape), 1)
    d = int(rng.integers(-nd, nd))
    if len(shape) >= 2 and rng.random() < 0.5:
        k = int(rng.integers(1, len(shape) + 1))
        dims = tuple(int(v) for v in rng.choice(len(shape), k, replace=False))
        dims = tuple(v - len(shape) if rng.random() < 0.4 else v for v in dims)
        dims_text = repr(dims) if rng.random() < 0.8 else repr(list(dims))
    else:
        dims_text = pick(rng, [str(d), f"({d},)", "()"] if shape else [str(d), "None"])
    size = shape[d % nd] if shape else 1
    fmt = dict(d=d, dims=dims_text, kd=pick(rng, [False, True]), k=int(rng.integers(1, size + 1)) if size else 1,
               dt=pick(rng, ["None", "None", "L.int64", "L.float64", "L.int8", "L.float32", "L.int32", "L.bool",
                             "L.float16", "L.uint8"]),
               fdt=pick(rng, ["None", "L.float64", "L.float32"]), c=pick(rng, [0, 1, 2, 0.5]),
               lg=pick(rng, [False, True]), q=pick(rng, [0.0, 0.3, 0.5, 1.0]),
               interp=pick(rng, ["linear", "lower", "higher", "midpoint", "nearest"]),
               qs=pick(rng, ["[0.25, 0.75]", "[[0.1], [0.9]]", "[]"]), p=pick(rng, [2, 1, 0, "float('inf')", 3.5, -1]))
    if rng.random() < 0.2:
        expr = pick(rng, OUT_FORMS).format(**fmt)
        odt = pick(rng, [dtype, "float64", "int64", "float32"])
        inputs["o"] = (np.zeros(pick(rng, [(0,), (3,), ()])), odt)
        inputs["oi"] = (np.zeros(0), "int64")
        inputs["ob"] = (np.zeros(0), "bool")
        return Case(f"r = {expr}\nout = (r, o, oi, ob)", inputs)
    return Case(f"out = {pick(rng, REDUCE_ARGS).format(**fmt)}", inputs)


GENERATORS["reduce_args"] = reduce_args_case


# ---- indexing family with options -------------------------------------------------------------------------
def index_ops_case(rng: np.random.Generator) -> Case:
    """scatter_reduce (every reduction, include_self), index_put(accumulate) with duplicates, index_reduce,
    masked_select/masked_scatter, take/put, nonzero, where(cond), and writes through expanded views."""
    shape = tuple(int(s) for s in pick(rng, [(5,), (3, 4), (2, 3, 2), (4, 1), (0, 3)]))
    dtype = pick(rng, ["float64", "float32", "int64", "int32", "bool", "float16", "uint8"])
    inputs: dict = {"x": (values(rng, dtype, shape, special=rng.random() < 0.3), dtype)}
    nd = len(shape)
    d = int(rng.integers(-nd, nd))
    kind = rng.random()
    n_el = int(np.prod(shape))
    if kind < 0.3 and n_el:
        ishape = [int(rng.integers(1, s + 1)) for s in shape]
        ishape[d % nd] = int(rng.integers(1, shape[d % nd] + 3))
        inputs["i"] = (rng.integers(0, shape[d % nd], ishape), "int64")
        sdt = dtype if rng.random() < 0.9 else pick(rng, ["float32", "int64"])
        inputs["v"] = (values(rng, sdt, tuple(ishape), special=rng.random() < 0.3), sdt)
        red = pick(rng, ["sum", "prod", "mean", "amax", "amin"])
        inc = pick(rng, [True, False])
        form = pick(rng, ["out = x.scatter_reduce({d}, i, v, '{r}', include_self={inc})",
                          "r = x.scatter_reduce_({d}, i, v, '{r}', include_self={inc})\nout = (r, r is x)",
                          "out = x.index_reduce({d}, i.flatten()[:3], w, '{r}', include_self={inc})",
                          "out = L.scatter_reduce(x, {d}, i, v, reduce='{r}')"])
        if "index_reduce" in form:
            wshape = list(shape)
            wshape[d % nd] = min(3, int(np.prod(ishape)))
            inputs["w"] = (values(rng, dtype, tuple(wshape), special=False), dtype)
            form = form.replace("'{r}'", "'{r2}'")
        code = form.format(d=d, r=red, inc=inc, r2=pick(rng, ["prod", "mean", "amax", "amin"]))
        return Case(code, inputs)
    if kind < 0.55 and n_el:
        k = int(rng.integers(0, 5))
        idx = [rng.integers(-s, s, k) for s in shape[:int(rng.integers(1, nd + 1))]]
        for j, a in enumerate(idx):
            inputs[f"i{j}"] = (a, "int64")
        vshape = pick(rng, [(), (k,), (1,)])
        vdt = dtype if rng.random() < 0.85 else pick(rng, ["float64", "int64", "bool"])
        inputs["v"] = (values(rng, vdt, vshape, special=False), vdt)
        names = ", ".join(f"i{j}" for j in range(len(idx)))
        acc = pick(rng, [True, False]) if k < 2 else True  # duplicates without accumulate: torch's pick is undefined
        form = pick(rng, ["out = x.index_put(({n},), v, accumulate={a})", "r = x.index_put_(({n},), v, accumulate={a})\nout = (r, r is x)",
                          "x[{n}] = v\nout = x" if k < 2 else "x.index_put_(({n},), v, True)\nout = x",
                          "out = x[{n}]", "out = x[{n}, ...]", "out = x[..., {last}]"])
        return Case(form.format(n=names, a=acc, last=f"i{len(idx) - 1}" if shape[-1] == shape[0] else "0"), inputs)
    if kind < 0.75:
        inputs["m"] = (rng.random(pick(rng, [shape, shape[-1:] if shape else (), ()])) < 0.5, "bool")
        sdt = dtype if rng.random() < 0.9 else "float64"
        inputs["s"] = (values(rng, sdt, (n_el + 1,), special=False), sdt)
        form = pick(rng, ["out = L.masked_select(x, m)", "out = x.masked_scatter(m, s)", "out = x[m]",
                          "x[m] = 3\nout = x", "out = L.nonzero(x)", "out = L.nonzero(x, as_tuple=True)",
                          "out = L.where(x != 0)", "out = x.masked_fill(m, -1)", "out = L.argwhere(x)",
                          "r = x.masked_scatter_(m, s)\nout = (r, r is x)", "out = L.take(x, L.tensor([0, -1]))"
                          if n_el else "out = L.take(x, L.tensor([], dtype=L.int64))",
                          "x.put_(L.tensor([0, 0]), L.tensor([1, 2], dtype=x.dtype), accumulate=True)\nout = x"
                          if n_el else "out = x.flatten()"])
        return Case(form, inputs)
    # writes into views of expanded tensors
    base = pick(rng, [(3,), (1, 3), (2, 1)])
    inputs = {"x": (values(rng, "float64", base, special=False), "float64")}
    target = pick(rng, [(2, 3), (4, 3), (2, 2, 3)]) if base != (2, 1) else pick(rng, [(2, 4), (3, 2, 4)])
    view = pick(rng, ["e", "e[0]", "e[..., 0]", "e[:, :1]", "e[1:]", "e.select(0, 0)", "e.diagonal()",
                      "e[0, 0]", "e.unbind(0)[0]", "e.narrow(-1, 0, 1)"])
    write = pick(rng, ["v.zero_()", "v.fill_(2.5)", "v.mul_(2)", "v.add_(1)", "v.copy_(L.ones_like(v))",
                      "v[...] = 4", "v.clamp_(max=0)", "v.neg_()", "v.exp_()", "v.index_fill_(-1, L.tensor([0]), 3)",
                      "v.masked_fill_(v > 0, 1)", "v.div_(2)", "v += 1", "v.uniform_(3, 3)"])
    return Case(f"e = x.expand{target}\nv = {view}\n{write}\nout = (x, e, v)", inputs)


GENERATORS["index_ops"] = index_ops_case


# ---- every dtype pair -------------------------------------------------------------------------------------
PAIR_OPS = ["a + b", "a - b", "a * b", "a / b", "a // b", "a % b", "a ** b", "a == b", "a < b", "a & b", "a | b",
            "a ^ b", "a << b", "a >> b", "L.maximum(a, b)", "L.minimum(a, b)", "L.fmod(a, b)", "L.atan2(a, b)",
            "L.remainder(a, b)", "L.floor_divide(a, b)", "L.div(a, b, rounding_mode='trunc')",
            "L.div(a, b, rounding_mode='floor')", "L.true_divide(a, b)", "L.eq(a, b)", "L.ge(a, b)",
            "L.logical_xor(a, b)", "L.bitwise_or(a, b)", "L.hypot(a, b)", "L.copysign(a, b)", "L.fmax(a, b)",
            "L.nextafter(a, b)", "L.xlogy(a, b)", "L.where(a != 0, a, b)", "L.lerp(a, b, 0.5)", "L.ldexp(a, b)",
            "L.gcd(a, b)", "L.lcm(a, b)", "L.heaviside(a, b)", "L.isclose(a, b)", "L.add(a, b, alpha=2)",
            "L.sub(a, b, alpha=2)", "L.float_power(a, b)", "L.logaddexp(a, b)", "L.igamma(a, b)",
            "a.add_(b)", "a.mul_(b)", "a.div_(b)", "a.sub_(b)", "a.remainder_(b)", "a.pow_(b)", "a.copy_(b)",
            "a.floor_divide_(b)", "a.bitwise_and_(b)", "a.clamp_(b, None)", "L.clamp(a, b, None)"]
PAIR_SCALARS = ["True", "0", "3", "-2", "200", "2.5", "-0.0", "float('inf')", "(1-2j)", "np.float32(1.5)",
                "np.int64(-3)"]
OVERFLOW_INTS = {"uint8": [0, 1, 255, 200, 7], "int8": [-128, 127, -1, 0, 5], "int16": [-32768, 32767, -1, 3, 0],
                 "int32": [-2**31, 2**31 - 1, -7, 2, 0], "int64": [-2**63, 2**63 - 1, -9, 4, 0]}


def _pair_values(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    if dtype in INT_DTYPES and rng.random() < 0.5:  # extremes: overflow in +, -, *, //, abs, neg
        return rng.choice(np.array(OVERFLOW_INTS[dtype], dtype=dtype), shape)
    return values(rng, dtype, shape, special=rng.random() < 0.5)


def dtype_pairs_case(rng: np.random.Generator) -> Case:
    """One binary op or in-place op on two operands of any two dtypes: n-d, 0-d tensors or Python/NumPy
    scalars, integer extremes (wrapping, division by zero, INT_MIN // -1)."""
    da, db = pick(rng, ALL_DTYPES), pick(rng, ALL_DTYPES)
    sa = pick(rng, [(3,), (), (2, 3)])
    inputs = {"a": (_pair_values(rng, da, sa), da)}
    r = rng.random()
    b = "b"
    if r < 0.7:
        inputs["b"] = (_pair_values(rng, db, pick(rng, [sa, (), (1,) + sa[1:] if sa else ()])), db)
    else:
        b = pick(rng, PAIR_SCALARS)
    op = pick(rng, PAIR_OPS)
    code = "out = " + op.replace("b", b, 1) if b != "b" else "out = " + op
    if b != "b":
        code = "out = " + op.replace("(a, b", f"(a, {b}").replace("a + b", f"a + {b}").replace(" b", f" {b}").replace(
            "(b)", f"({b})").replace("(b,", f"({b},")
    if op.startswith("a.") and op.endswith("_(b)"):
        code = code.replace("out = ", "r = ") + "\nout = (r, r is a)"
    return Case(code, inputs)


GENERATORS["dtype_pairs"] = dtype_pairs_case
