"""Seeded case generators for the trust fuzzer, one per area (promotion, indexing, views, reductions, gradients).

Each generator takes a ``numpy.random.Generator`` and returns one :class:`trust_diff.Case`: a snippet run
with ``L`` bound to ember and to torch. The same seed gives the same case, so a failure is reproduced by
its seed alone (``python tests/trust/trust_fuzz_cli.py promotion 1234``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from trust_diff import Case

INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")
ALL_DTYPES = ("bool",) + INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES


def pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def values(rng: np.random.Generator, dtype: str, shape: tuple, special: bool = True) -> np.ndarray:
    """Inputs of ``dtype`` with its edge values: 0, -0., +-1, wrap-around ints, inf, NaN."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        pool = [0, 1, -1, 2, -2, 3, -3, 5, -7, 100, -100, 127, -128, 255, info.max, info.min]
        vals = [v for v in pool if info.min <= v <= info.max]
        out = np.array([pick(rng, vals) if rng.random() < 0.6 else int(rng.integers(-9, 10)) for _ in range(n)])
        return np.clip(out, info.min, info.max).astype(dtype).reshape(shape)
    real = rng.standard_normal(n) * 3
    real = np.round(real, 1) if rng.random() < 0.5 else real  # ties and exact halves for rounding ops
    if special:
        pool = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.inf, -np.inf, np.nan, 1e4, -7.0]
        mask = rng.random(n) < 0.3
        real[mask] = [pick(rng, pool) for _ in range(int(mask.sum()))]
    if dtype in COMPLEX_DTYPES:
        imag = np.round(rng.standard_normal(n) * 2, 1)
        return (real + 1j * imag).reshape(shape)
    return real.reshape(shape)


def shape_of(rng: np.random.Generator, max_ndim: int = 3, allow_empty: bool = False) -> tuple:
    ndim = int(rng.integers(0, max_ndim + 1))
    sizes = [1, 2, 3, 4] + ([0] if allow_empty else [])
    return tuple(int(pick(rng, sizes)) for _ in range(ndim))


# ---- 1. type promotion ------------------------------------------------------------------------------------
PY_SCALARS = ["True", "False", "0", "1", "-3", "7", "300", "-129", "2.5", "-0.0", "0.5", "1e30", "float('inf')",
              "float('nan')", "(1+2j)", "-1.5j"]
NP_SCALARS = ["np.float64(2.5)", "np.float64(-0.0)", "np.float32(1.5)", "np.int64(3)", "np.int64(-2)", "np.int32(7)",
              "np.bool_(True)", "np.bool_(False)", "np.float16(0.5)", "np.uint8(200)", "np.complex128(1j)"]
ARRAY_OPERANDS = ["np.array(2.5)", "np.array(3)", "np.array(True)", "np.array(-2, dtype=np.int8)",
                  "np.array(1.5, dtype=np.float32)", "np.array([1.0, -2.0])", "np.array([True, False])"]
BINARY_OPS = ["+", "-", "*", "/", "//", "%", "**", "==", "<", ">=", "!=", "&", "|", "^", "<<", ">>"]
BINARY_FNS = ["L.add({a}, {b})", "L.sub({a}, {b})", "L.mul({a}, {b})", "L.div({a}, {b})", "L.true_divide({a}, {b})",
              "L.floor_divide({a}, {b})", "L.remainder({a}, {b})", "L.fmod({a}, {b})", "L.pow({a}, {b})",
              "L.div({a}, {b}, rounding_mode='floor')", "L.div({a}, {b}, rounding_mode='trunc')",
              "L.maximum({a}, {b})", "L.minimum({a}, {b})", "L.atan2({a}, {b})", "L.add({a}, {b}, alpha=2)",
              "L.sub({a}, {b}, alpha=-1)", "L.eq({a}, {b})", "L.lt({a}, {b})", "L.logical_and({a}, {b})",
              "L.bitwise_and({a}, {b})", "L.fmax({a}, {b})", "L.hypot({a}, {b})", "L.copysign({a}, {b})",
              "L.where({a} > 0, {a}, {b})", "L.where({a} != 0, {b}, {a})", "L.xlogy({a}, {b})",
              "L.clamp({a}, min={b})", "L.clamp({a}, max={b})", "L.lerp({a}, {b}, 0.5)", "L.isclose({a}, {b})"]
INPLACE = ["add_", "sub_", "mul_", "div_", "floor_divide_", "remainder_", "pow_", "clamp_", "fmod_", "copy_",
           "bitwise_and_", "lerp_", "masked_fill_", "__iadd__", "__imul__", "__itruediv__", "__ifloordiv__"]


def _operand(rng: np.random.Generator, name: str, inputs: dict, shape: tuple | None = None) -> str:
    dtype = pick(rng, ALL_DTYPES)
    shape = shape_of(rng, 2) if shape is None else shape
    inputs[name] = (values(rng, dtype, shape), dtype)
    return name


def _other(rng: np.random.Generator, inputs: dict) -> str:
    """The second operand: a tensor (n-d or 0-d), a Python scalar, a NumPy scalar or an ndarray."""
    r = rng.random()
    if r < 0.35:
        return _operand(rng, "y", inputs, pick(rng, [(), (), (3,), (1, 3), (2, 1)]))
    if r < 0.65:
        return pick(rng, PY_SCALARS)
    if r < 0.9:
        return pick(rng, NP_SCALARS)
    return pick(rng, ARRAY_OPERANDS)


def promotion_case(rng: np.random.Generator) -> Case:
    """A binary op / function / in-place op / reduction on random dtypes and operand kinds."""
    inputs: dict = {}
    kind = rng.random()
    if kind < 0.3:
        a = _operand(rng, "x", inputs, pick(rng, [(), (3,), (2, 3)]))
        b = _other(rng, inputs)
        op = pick(rng, BINARY_OPS)
        code = f"out = {a} {op} {b}" if rng.random() < 0.75 or b.startswith("np.array") else f"out = {b} {op} {a}"
    elif kind < 0.6:
        a = _operand(rng, "x", inputs, pick(rng, [(), (3,), (2, 3)]))
        b = _other(rng, inputs)
        fn = pick(rng, BINARY_FNS)
        code = "out = " + (fn.format(a=a, b=b) if rng.random() < 0.8 or "{a} >" in fn else fn.format(a=b, b=a))
    elif kind < 0.8:
        a = _operand(rng, "x", inputs, pick(rng, [(), (3,), (2, 3)]))
        b = _other(rng, inputs)
        op = pick(rng, INPLACE)
        if op == "clamp_":
            call = f"{a}.clamp_(min={b})"
        elif op == "lerp_":
            call = f"{a}.lerp_({b}, 0.25)"
        elif op == "masked_fill_":
            call = f"{a}.masked_fill_({a} != 0, {b})"
        elif op == "copy_":
            call = f"{a}.copy_(L.as_tensor({b}))" if not b.startswith("np.") or b.startswith("np.array") else \
                f"{a}.copy_(L.tensor({b}))"
        else:
            call = f"{a}.{op}({b})"
        code = f"r = {call}\nout = (r, r is {a})"
    else:
        code = _reduction_promotion(rng, inputs)
    return Case(code, inputs)


def _reduction_promotion(rng: np.random.Generator, inputs: dict) -> str:
    dtype = pick(rng, ALL_DTYPES)
    shape = pick(rng, [(), (4,), (2, 3), (0,), (2, 0)])
    inputs["x"] = (values(rng, dtype, shape, special=rng.random() < 0.3), dtype)
    dim = "" if not shape or rng.random() < 0.4 else f"{int(rng.integers(-len(shape), len(shape)))}"
    red = pick(rng, ["sum", "prod", "cumsum", "cumprod", "mean", "nansum", "nanmean", "var", "std", "amax",
                     "argmax", "max", "all", "any", "count_nonzero", "logsumexp", "norm", "median", "mode", "abs",
                     "neg", "sign", "sqrt", "exp", "floor", "round", "bitwise_not", "logical_not", "reciprocal",
                     "square", "sigmoid", "trunc", "signbit", "isnan", "isfinite", "positive", "frac", "angle",
                     "clone", "float", "int", "long", "bool", "half", "real", "conj", "softmax", "cummax"])
    if red in ("cumsum", "cumprod", "softmax", "cummax", "logsumexp") and not dim:
        dim = "0" if shape else "0"
    arg = dim
    if red in ("sum", "prod", "cumsum", "mean") and rng.random() < 0.3:
        arg = (dim + ", " if dim else "") + f"dtype=L.{pick(rng, ['int32', 'float64', 'int64', 'float16', 'bool'])}"
    return f"out = x.{red}({arg})"


def promotion_cases(seed: int, n: int) -> list:
    rng = np.random.default_rng(seed)
    return [promotion_case(rng) for _ in range(n)]


GENERATORS: dict[str, Callable] = {"promotion": promotion_case}


# ---- 2. indexing ------------------------------------------------------------------------------------------
def _index_part(rng: np.random.Generator, size: int, inputs: dict, allow_advanced: bool) -> tuple:
    """One index component for a dim of ``size``: (text, consumes_dim, is_advanced)."""
    r = rng.random()
    if r < 0.25:
        return str(int(rng.integers(-size - (1 if rng.random() < 0.1 else 0), size + (1 if rng.random() < 0.1 else 0))) if size else "0"), True, False
    if r < 0.55:
        start = pick(rng, ["", str(int(rng.integers(-size - 1, size + 2)))])
        stop = pick(rng, ["", str(int(rng.integers(-size - 1, size + 2)))])
        step = pick(rng, ["", "", "2", "3"] + (["-1"] if rng.random() < 0.05 else []))
        return f"{start}:{stop}" + (f":{step}" if step else ""), True, False
    if r < 0.62:
        return "None", False, False
    if not allow_advanced or size == 0:
        return ":", True, False
    if r < 0.8:
        n = int(rng.integers(1, 4))
        vals = [int(v) for v in rng.integers(-size, size, n)]
        if rng.random() < 0.05:
            vals[0] = size  # out of range
        return ("[" + ", ".join(map(str, vals)) + "]" if rng.random() < 0.5 else
                f"L.tensor({vals})"), True, True
    name = f"m{len(inputs)}"
    inputs[name] = (rng.random(size) < 0.5, "bool")
    return name, True, True


def _index_expr(rng: np.random.Generator, shape: tuple, inputs: dict) -> str:
    parts = []
    dim = 0
    advanced = 0
    ellipsis_used = False
    while dim < len(shape) and len(parts) < len(shape) + 2:
        if not ellipsis_used and rng.random() < 0.1:
            parts.append("...")
            ellipsis_used = True
            dim = len(shape) - int(rng.integers(0, len(shape) - dim + 1))
            continue
        text, consumes, adv = _index_part(rng, shape[dim], inputs, advanced < 2)
        advanced += adv
        parts.append(text)
        dim += consumes
        if rng.random() < 0.3:
            break
    if not parts:
        parts = [pick(rng, ["...", "None", ":", "True", "False"])]
    return ", ".join(parts)


INDEX_FNS = [
    "out = L.gather(x, {d}, i)", "out = x.index_select({d}, i.flatten())", "out = L.take(x, i)",
    "out = L.take_along_dim(x, i, {d})", "out = x.scatter({d}, i, v)", "out = x.scatter_add({d}, i, v)",
    "out = x.index_add({d}, i.flatten(), w)", "out = x.index_copy({d}, L.unique(i.flatten()), u)",
    "out = x.index_fill({d}, i.flatten(), -1)", "out = x.masked_scatter(x > 0, v)",
    "out = x.scatter({d}, i, 2.5)", "out = x.scatter_reduce({d}, i, v, 'sum')",
    "out = x.scatter_reduce({d}, i, v, 'amax', include_self=False)", "out = x.put(i, v, accumulate=True)",
    "out = x.index_put((i,), v, accumulate=True)", "out = x.index_put_((i.flatten(),), L.tensor(7.0), accumulate=True)",
    "out = x.scatter({d}, i, v, reduce='add')", "out = x.masked_fill(x < 0, 0.5)",
]


def indexing_case(rng: np.random.Generator) -> Case:
    """getitem/setitem with basic, advanced, bool-mask, None and Ellipsis indices; gather/scatter and relatives."""
    inputs: dict = {}
    shape = tuple(int(s) for s in pick(rng, [(5,), (3, 4), (2, 3, 4), (4, 1, 3), (0, 3), (3, 0, 2)]))
    dtype = pick(rng, ["float32", "float64", "int64", "bool", "float16"])
    inputs["x"] = (values(rng, dtype, shape, special=False), dtype)
    kind = rng.random()
    if kind < 0.35:
        idx = _index_expr(rng, shape, inputs)
        code = f"out = x[{idx}]"
        if rng.random() < 0.5:  # a view of x? Write through it and compare x afterwards
            code += "\nif out.numel():\n    out.fill_(True if out.dtype == L.bool else 7)"
        return Case(code, inputs)
    if kind < 0.65:
        idx = _index_expr(rng, shape, inputs)
        r = rng.random()
        if r < 0.4:
            value = pick(rng, ["0", "1.5", "True", "-3", "float('nan')"])
        else:
            vshape = tuple(int(s) for s in pick(rng, [(), (1,), (shape[-1],) if shape else (), (2,), (1, 1)]))
            inputs["v"] = (values(rng, dtype, vshape, special=False), dtype)
            value = "v"
        return Case(f"x[{idx}] = {value}\nout = x", inputs)
    if not shape or 0 in shape:
        return Case(f"out = x[{_index_expr(rng, shape, inputs)}]", inputs)
    d = int(rng.integers(-len(shape), len(shape)))
    ishape = list(shape)
    ishape[d] = int(rng.integers(1, shape[d] + 2))
    ishape = [int(rng.integers(1, s + 1)) if i != d % len(shape) else ishape[i] for i, s in enumerate(shape)]
    bound = shape[d]
    idx = rng.integers(0, bound, ishape)
    if rng.random() < 0.08:
        idx.flat[0] = bound if rng.random() < 0.5 else -1  # out of range / negative: torch refuses
    inputs["i"] = (idx, "int64")
    vdtype = dtype if rng.random() < 0.9 else pick(rng, ["float32", "int64"])
    inputs["v"] = (values(rng, vdtype, tuple(shape), special=False), vdtype)
    wshape = list(shape)
    wshape[d] = idx.size
    inputs["w"] = (values(rng, dtype, tuple(wshape), special=False), dtype)
    ushape = list(shape)
    ushape[d] = len(np.unique(idx))
    inputs["u"] = (values(rng, dtype, tuple(ushape), special=False), dtype)
    fn = pick(rng, INDEX_FNS)
    code = fn.format(d=d)
    if ("scatter(" in code and "reduce" not in code) or "index_copy" in code:
        # plain scatter with repeated targets is nondeterministic in torch: distinct indices along d
        ax = d % len(shape)
        k = min(ishape[ax], shape[ax])
        order = np.argsort(rng.random(tuple(ishape[:ax]) + (shape[ax],) + tuple(ishape[ax + 1:])), axis=ax)
        inputs["i"] = (np.take(order, range(k), axis=ax), "int64")
    if rng.random() < 0.3 and "out = x." in code and "(" in code:
        name = code.split("out = x.")[1].split("(")[0]
        if name in ("scatter", "scatter_add", "index_add", "index_copy", "index_fill", "masked_scatter", "put",
                    "index_put", "masked_fill", "scatter_reduce"):
            code = code.replace(f"out = x.{name}(", f"r = x.{name}_(") + "\nout = (r, r is x)"
    return Case(code, inputs)


GENERATORS["indexing"] = indexing_case


# ---- 3. views and in-place --------------------------------------------------------------------------------
def _view_of(rng: np.random.Generator, name: str, shape: tuple) -> tuple:
    """(expression, shape-or-None) for a view (or a maybe-copy) of ``name``; None: shape not tracked."""
    nd = len(shape)
    options = ["slice", "unsqueeze", "view", "reshape", "detach", "flatten", "squeeze", "expand", "contiguous"]
    if nd >= 1:
        options += ["narrow", "select", "unfold", "split", "chunk", "unbind", "movedim"]
    if nd >= 2:
        options += ["transpose", "permute", "diagonal", "t", "mT", "T_reshape", "T_view", "T_contiguous", "T_flatten"]
    kind = pick(rng, options)
    d = int(rng.integers(nd)) if nd else 0
    if kind == "slice" and nd:
        n = shape[d]
        start, step = int(rng.integers(0, max(n, 1))), int(rng.integers(1, 3))
        new = list(shape)
        new[d] = len(range(start, n, step))
        return f"{name}[{':, ' * d}{start}::{step}]", tuple(new)
    if kind == "narrow":
        start = int(rng.integers(0, shape[d])) if shape[d] else 0
        length = int(rng.integers(0, shape[d] - start + 1))
        new = list(shape)
        new[d] = length
        return f"{name}.narrow({d}, {start}, {length})", tuple(new)
    if kind == "select" and shape[d]:
        return f"{name}.select({d}, {int(rng.integers(-shape[d], shape[d]))})", shape[:d] + shape[d + 1:]
    if kind == "unfold" and shape[d]:
        size = int(rng.integers(1, shape[d] + 1))
        step = int(rng.integers(1, 3))
        return f"{name}.unfold({d}, {size}, {step})", None
    if kind in ("split", "chunk") and shape[d]:
        return f"{name}.{kind}({int(rng.integers(1, shape[d] + 1))}, {d})[0]", None
    if kind == "unbind" and shape[d]:
        return f"{name}.unbind({d})[-1]", shape[:d] + shape[d + 1:]
    if kind == "movedim":
        return f"{name}.movedim({d}, {int(rng.integers(nd))})", None
    if kind == "transpose":
        a, b = (int(v) for v in rng.choice(nd, 2, replace=False))
        new = list(shape)
        new[a], new[b] = new[b], new[a]
        return f"{name}.transpose({a}, {b})", tuple(new)
    if kind == "permute":
        perm = [int(v) for v in rng.permutation(nd)]
        return f"{name}.permute({perm})", tuple(shape[p] for p in perm)
    if kind == "diagonal":
        a, b = (int(v) for v in rng.choice(nd, 2, replace=False))
        return f"{name}.diagonal({int(rng.integers(-1, 2))}, {a}, {b})", None
    if kind == "t" and nd == 2:
        return f"{name}.t()", (shape[1], shape[0])
    if kind == "mT":
        return f"{name}.mT", shape[:-2] + (shape[-1], shape[-2])
    if kind.startswith("T_"):  # a non-contiguous tensor reshaped / viewed / flattened: a copy or an error
        op = kind[2:]
        call = {"reshape": ".reshape(-1)", "view": ".view(-1)", "contiguous": ".contiguous()",
                "flatten": ".flatten()"}[op]
        return f"{name}.transpose(0, 1){call}", None
    if kind == "unsqueeze":
        k = int(rng.integers(-nd - 1, nd + 1))
        new = list(shape)
        new.insert(k % (nd + 1), 1)
        return f"{name}.unsqueeze({k})", tuple(new)
    if kind in ("view", "reshape"):
        return f"{name}.{kind}({list(reversed(shape)) if rng.random() < 0.3 else -1})", None
    if kind == "flatten":
        return f"{name}.flatten()", (int(np.prod(shape)),)
    if kind == "squeeze":
        return f"{name}.squeeze()", tuple(s for s in shape if s != 1)
    if kind == "expand":
        return f"{name}.expand(2, *{name}.shape)", (2,) + shape
    if kind == "contiguous":
        return f"{name}.contiguous()", shape
    return f"{name}.detach()", shape


VIEW_WRITES = ["{v}.add_(1.5)", "{v}.mul_(-2)", "{v}.zero_()", "{v}.fill_(3)", "{v}.clamp_(min=0)",
               "{v}.copy_(L.ones_like({v}) * 4)", "{v}[...] = 7", "{v}.neg_()", "{v}.sub_({v}.detach() * 0.5)",
               "{v} += 1", "{v} *= 2", "{v}.exp_()", "{v}.masked_fill_({v} > 0, -1)", "{v}.abs_()",
               "{v}.index_fill_(0, L.tensor([0]), 9)" ]


def views_case(rng: np.random.Generator) -> Case:
    """A chain of views, an in-place write through the last one, then base and views read back; with
    gradients half the time (the base a non-leaf made from a leaf that requires grad)."""
    shape = tuple(int(s) for s in pick(rng, [(4,), (3, 4), (2, 3, 4), (4, 1, 3), (2, 2), (3, 1)]))
    dtype = pick(rng, ["float64", "float32", "int64"])
    grad = dtype == "float64" and rng.random() < 0.5
    inputs: dict = {}
    lines = []
    if grad:
        inputs["x_g"] = (values(rng, dtype, shape, special=False), dtype)
        lines.append("x = x_g * 1" if rng.random() < 0.85 else "x = x_g")  # sometimes the leaf itself (error)
    else:
        inputs["x"] = (values(rng, dtype, shape, special=False), dtype)
    names = ["x"]
    if grad and rng.random() < 0.3:  # a value saved for backward before the write: a version-counter error
        lines.append(pick(rng, ["s = x.sin()", "s = x * x", "s = x.exp()", "s = (x + 1).relu()"]))
        names.append("s")
    cur, cur_shape = "x", shape
    for k in range(int(rng.integers(1, 4))):
        if cur_shape is None:
            break
        expr, cur_shape = _view_of(rng, cur, cur_shape)
        name = f"v{k}"
        lines.append(f"{name} = {expr}")
        names.append(name)
        cur = name
    write = pick(rng, VIEW_WRITES).format(v=cur)
    if dtype == "int64" and ("exp_" in write or "1.5" in write or "0.5" in write):
        write = f"{cur}.add_(2)"
    if rng.random() < 0.2:  # write into the base instead and read the views
        write = pick(rng, VIEW_WRITES).format(v="x").replace("1.5", "2" if dtype == "int64" else "1.5")
        if dtype == "int64" and "exp_" in write:
            write = "x.add_(3)"
    if "index_fill_" in write and dtype == "int64":
        write = write.replace("9)", "9)")
    lines.append(write)
    if rng.random() < 0.3:  # an out-of-place op after the write, to read the values through autograd too
        # x.sum() only in float64: a float32 sum's rounding depends on the summation order
        lines.append(f"w = {cur} * 2" + (" + x.sum()" if dtype != "float32" else ""))
        names.append("w")
    lines.append("out = (" + ", ".join(names) + ",)")
    return Case("\n".join(lines), inputs, grad=grad)


GENERATORS["views"] = views_case


# ---- 4. reductions and sorting at special points ----------------------------------------------------------
def _special_values(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    """Rows with ties, NaN, +-inf and +-0 (floats), repeated values (integers)."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype in INT_DTYPES:
        return rng.integers(-3, 4, n).astype(dtype).reshape(shape)
    pool = [0.0, -0.0, 1.0, -1.0, 2.5, 2.5, -7.0, np.inf, -np.inf, np.nan, 1e30, -1e-30]
    weights = np.ones(len(pool))
    weights[pool.index(np.nan) if False else 9] = 0.6 if rng.random() < 0.5 else 0.05
    out = rng.choice(np.array(pool), size=n, p=weights / weights.sum())
    if rng.random() < 0.3:
        out = np.round(rng.standard_normal(n), 1)  # plain values, some ties
    return out.reshape(shape)


REDUCTIONS = [
    "x.max()", "x.min()", "x.max({d})", "x.min({d}, keepdim=True)", "x.argmax()", "x.argmin({d})",
    "x.argmax({d}, keepdim=True)", "x.amax({dims})", "x.amin({dims}, keepdim=True)", "x.aminmax()",
    "x.sort({d})", "x.sort({d}, descending=True)", "x.sort(dim={d}, stable=True)", "x.argsort({d})",
    "x.sort(dim={d}, descending=True, stable=True)", "x.topk({k}, {d})", "x.topk({k}, {d}, largest=False)",
    "x.kthvalue({k}, {d})", "x.median()", "x.median({d})", "x.nanmedian()", "x.nanmedian({d})", "x.mode({d})",
    "L.unique(x)", "L.unique(x, return_inverse=True, return_counts=True)", "L.unique(x, sorted=True, dim={d})",
    "L.unique_consecutive(x)", "x.cummax({d})", "x.cummin({d})", "x.cumsum({d})", "x.cumprod({d})",
    "x.logcumsumexp({d})", "x.sum({dims})", "x.sum({dims}, keepdim=True)", "x.prod({d})", "x.mean({dims})",
    "x.nansum({dims})", "x.nanmean({d})", "x.std({dims})", "x.var({d}, correction=0)", "x.all({d})",
    "x.any()", "L.count_nonzero(x, {d})", "x.msort()", "x.norm(dim={dims})", "x.logsumexp({dims})",
    "x.max(dim={d}).indices", "L.max(x, {d}, True)", "x.softmax({d})", "x.log_softmax({d})",
    "L.std_mean(x, {dims})", "L.var_mean(x, {d}, keepdim=True)", "x.quantile(0.3, {d})", "x.nanquantile(0.5)",
    "L.searchsorted(x.flatten().sort().values, x)", "L.bucketize(x, L.tensor([-1.0, 0.0, 2.5]))",
    "L.isin(x, L.tensor([0.0, 2.5]))", "x.diff(dim={d})", "x.flip({d})", "x.roll(1, {d})", "x.renorm(2, 0, 1.0)",
    "L.histc(x.float(), bins=4, min=-3, max=3)", "x.max(x.flip({d}))", "L.fmax(x, x.flip({d}))",
    "L.minimum(x, x.flip({d}))", "x.clamp(-1, 1)", "L.nan_to_num(x)", "x.sign()", "x.abs()",
]


def reductions_case(rng: np.random.Generator) -> Case:
    """A reduction, sort or scan over rows with NaN, inf, -0 and ties; empty dims; dim tuples; keepdim."""
    shape = tuple(int(s) for s in pick(rng, [(5,), (3, 4), (2, 3, 2), (4, 1), (0,), (2, 0), (3, 0, 2), (), (1,)]))
    dtype = pick(rng, ["float64", "float32", "float64", "int64", "bool", "float16", "int32"])
    inputs = {"x": (_special_values(rng, dtype, shape), dtype)}
    nd = max(len(shape), 1)
    d = int(rng.integers(-nd, nd))
    if rng.random() < 0.5 and len(shape) >= 2:
        k = int(rng.integers(1, len(shape) + 1))
        dims = tuple(int(v) for v in rng.choice(len(shape), k, replace=False))
        dims = tuple(v - len(shape) if rng.random() < 0.3 else v for v in dims)
        dims_text = repr(dims) if rng.random() < 0.8 else repr(list(dims))
    else:
        dims_text = str(d)
    size = shape[d % nd] if shape else 1
    k = int(rng.integers(1, size + 1)) if size else 1
    expr = pick(rng, REDUCTIONS).format(d=d, dims=dims_text, k=k)
    return Case(f"out = {expr}", inputs)


GENERATORS["reductions"] = reductions_case


# ---- 5. gradients at kinks and special points -------------------------------------------------------------
GRAD_EXPRS = [
    "x.abs()", "x.relu()", "L.maximum(x, y)", "L.minimum(x, y)", "x.clamp(-1, 1)", "x.clamp(min=0)",
    "x.clamp(min=y)", "x.clamp(max=y)", "L.where(x > 0, x, -x)", "L.where(x >= y, x, y)", "x.norm()",
    "x.norm(dim=-1)", "x.norm(p=1)", "x.norm(p=float('inf'))", "x.sqrt()", "x.abs().sqrt()", "x ** 2",
    "x ** 0.5", "x.abs() ** 1.5", "x ** 0", "L.pow(x, y)", "L.pow(x.abs(), y)", "L.pow(0.0, y)", "L.pow(2.0, x)",
    "L.atan2(x, y)", "x.max()", "x.min()", "x.amax(-1)", "x.amin(0)", "x.max(-1).values", "x.min(0).values",
    "x.sort(-1).values", "x.topk(1, -1).values", "x.median()", "x.median(-1).values", "x.prod()", "x.prod(-1)",
    "x.cumprod(-1)", "x.std()", "x.var(-1)", "x.logsumexp(-1)", "x.softmax(-1)", "x.log_softmax(-1)",
    "L.nn.functional.hardtanh(x)", "L.nn.functional.leaky_relu(x, 0.1)", "L.nn.functional.elu(x)",
    "L.nn.functional.gelu(x)", "L.nn.functional.silu(x)", "L.nn.functional.softplus(x)", "x.sigmoid()",
    "x.tanh()", "x.exp()", "x.log()", "x.abs().log()", "x.sign() * x", "x.floor() + x", "x.round() * x",
    "x.frac()", "L.fmod(x, 1.5)", "L.remainder(x, 1.5)", "x.reciprocal()", "x.rsqrt()", "L.hypot(x, y)",
    "L.nn.functional.normalize(x, dim=-1)", "L.cdist(x.reshape(1, -1, 1), y.reshape(1, -1, 1))",
    "L.dist(x, y)", "L.nn.functional.mse_loss(x, y)", "L.nn.functional.l1_loss(x, y)",
    "L.nn.functional.smooth_l1_loss(x, y)", "L.nn.functional.huber_loss(x, y)", "x.mean()", "x.sum() * x",
    "L.nn.functional.relu6(x * 6)", "L.nn.functional.hardsigmoid(x * 3)", "L.nn.functional.hardswish(x * 3)",
    "L.nn.functional.threshold(x, 0.0, -1.0)", "L.nn.functional.softshrink(x, 0.5)", "L.nn.functional.celu(x)",
    "x.trunc() + x.ceil() * 0", "L.lerp(x, y, 0.5)", "x.cummax(-1).values", "x.cummin(-1).values",
    "x.kthvalue(1, -1).values", "x.msort()", "x.unique()", "x[x > 0]", "x.masked_fill(x < 0, 0.0)",
    "L.nn.functional.glu(L.cat([x, y], -1), -1)", "x.logcumsumexp(-1)", "L.xlogy(x, y.abs())",
    "L.special.xlog1py(x, y)", "L.special.entr(x)", "L.nn.functional.logsigmoid(x)", "x.erf()", "x.sinc()",
    "x.expm1()", "x.log1p()", "L.nn.functional.cosine_similarity(x.reshape(1, -1), y.reshape(1, -1))",
    "L.linalg.vector_norm(x, 2)", "L.trace(x.reshape(1, -1).T @ y.reshape(1, -1))", "L.outer(x, y).sum()",
    "x.clip(-0.5, 0.5)", "x.nan_to_num()", "x.diff()", "x.var(correction=0)", "L.nn.functional.mish(x)",
]


def gradients_case(rng: np.random.Generator) -> Case:
    """An expression at special points (0, -0, kinks, ties, +-1, bounds) with gradients compared."""
    n = int(pick(rng, [1, 2, 3, 4]))
    pool = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1.5, -1.5, 6.0, 3.0, -3.0])
    def draw() -> np.ndarray:
        vals = rng.choice(pool, n)
        if rng.random() < 0.4:
            vals = np.full(n, pick(rng, list(pool)))  # all equal: ties everywhere
        return vals
    inputs = {"x_g": (draw(), "float64")}
    expr = pick(rng, GRAD_EXPRS)
    if "y" in expr.replace("xlogy", "").replace("xlog1py", ""):
        inputs["y_g"] = (draw(), "float64")
    code = "x, y = x_g, globals().get('y_g')\nout = " + expr
    return Case(code, inputs, grad=True)


GENERATORS["gradients"] = gradients_case
