"""Seeded case generators for the trust fuzzer's fourth wave, where silent wrong results hide in autograd and
in dtype rules:

- ``autograd_views``: gradients through chains of views (as_strided, unfold, diagonal, narrow, select, strided
  slices, transposes, expand) modified in place (index_put_, masked_fill_, setitem of tensors that require
  grad, mul_/addcmul_/clamp_/exp_...), version-counter errors exactly where torch raises them (a tensor saved
  for backward then modified, also through ``detach()``), in-place ops refused on leaves and their views, and
  allowed under ``no_grad``;
- ``ternary_out``: type promotion of binary and ternary ops (addcmul, addcdiv, lerp, where, clamp with tensor
  bounds, add/sub with alpha) over Python scalars, 0-d tensors and bool/int/float/complex mixes, with ``out=``
  of any dtype;
- ``reduce_edge``: reductions with ``dtype=``/keepdim over empty dims and rows that are all NaN, all inf or
  all equal, with their gradients;
- ``index_grad``: advanced indexing get/set with broadcast index tensors, negative indices, bool masks,
  duplicate indices (index_put_ accumulate) and the gradients of all of them.

Example:
    >>> case = autograd_views_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import ALL_DTYPES, GENERATORS, pick, values
from trust_diff import Case

try:
    import torch  # the shape oracle for setitem values (the test modules importorskip torch first)
except ImportError:
    torch = None


def _f64(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return np.round(rng.standard_normal(shape) * 2, 2)


# ---- (a) autograd through views and in-place ops ---------------------------------------------------------
def _view_chain(rng: np.random.Generator, shape: tuple) -> tuple:
    """(expression over ``b``, resulting shape or None) for one view of ``b``."""
    nd = len(shape)
    kinds = ["slice", "narrow", "select", "transpose", "diagonal", "unfold", "as_strided", "view", "unsqueeze",
             "movedim", "expand_read", "T", "flip_copy", "index_copy"]
    kind = pick(rng, kinds)
    d = int(rng.integers(nd))
    n = shape[d]
    if kind == "slice":
        start, step = int(rng.integers(0, n)), int(rng.integers(1, 3))
        new = list(shape)
        new[d] = len(range(start, n, step))
        return f"[{':, ' * d}{start}::{step}]", tuple(new)
    if kind == "narrow":
        start = int(rng.integers(0, n))
        length = int(rng.integers(1, n - start + 1))
        new = list(shape)
        new[d] = length
        return f".narrow({d}, {start}, {length})", tuple(new)
    if kind == "select" and nd > 1:
        return f".select({d}, {int(rng.integers(-n, n))})", shape[:d] + shape[d + 1:]
    if kind == "transpose" and nd > 1:
        a, c = (int(v) for v in rng.choice(nd, 2, replace=False))
        new = list(shape)
        new[a], new[c] = new[c], new[a]
        return f".transpose({a}, {c})", tuple(new)
    if kind == "T" and nd == 2:
        return ".T", shape[::-1]
    if kind == "diagonal" and nd > 1:
        a, c = (int(v) for v in rng.choice(nd, 2, replace=False))
        off = int(rng.integers(-1, 2))
        length = max(0, min(shape[a] - max(0, -off), shape[c] - max(0, off)))
        if length == 0:
            return "[...]", shape
        rest = tuple(s for i, s in enumerate(shape) if i not in (a, c))
        return f".diagonal({off}, {a}, {c})", rest + (length,)
    if kind == "unfold":
        size = int(rng.integers(1, n + 1))
        step = int(rng.integers(1, 3)) if size > 1 else 1
        step = size if rng.random() < 0.5 else step  # non-overlapping windows can be written
        new = list(shape)
        new[d] = (n - size) // step + 1
        return f".unfold({d}, {size}, {step})", tuple(new) + (size,)
    if kind == "as_strided":  # a non-overlapping window of the contiguous layout (b is contiguous here)
        total = int(np.prod(shape))
        if total >= 4:
            rows = 2
            cols = int(rng.integers(1, total // 2 + 1))
            stride_r = int(rng.integers(cols, total // 2 + 1))
            off = int(rng.integers(0, total - (stride_r + cols) + 1))
            return f".as_strided(({rows}, {cols}), ({stride_r}, 1), {off})", (rows, cols)
        return "[...]", shape
    if kind == "view":
        return ".view(-1)", (int(np.prod(shape)),)
    if kind == "unsqueeze":
        k = int(rng.integers(0, nd + 1))
        new = list(shape)
        new.insert(k, 1)
        return f".unsqueeze({k})", tuple(new)
    if kind == "movedim" and nd > 1:
        a, c = int(rng.integers(nd)), int(rng.integers(nd))
        new = list(shape)
        new.insert(c, new.pop(a))
        return f".movedim({a}, {c})", tuple(new)
    if kind == "expand_read":  # an expanded view is read-only for the writes below (overlap): keep as read
        return ".unsqueeze(0).expand(2, *[-1] * " + str(nd) + ")[1]", shape
    if kind == "flip_copy":  # a copy, not a view: writes into it must not reach b
        return f".flip({d})", shape
    if kind == "index_copy":  # advanced indexing copies
        return f"[[{int(rng.integers(-n, n))}]]", (1,) + shape[1:] if d == 0 else None
    return "[...]", shape


INPLACE_WRITES = [
    "{v}.mul_(2.5)", "{v}.add_(y)", "{v}.mul_(y)", "{v}.addcmul_(y, y, value=0.5)", "{v}.clamp_(-1, 1)",
    "{v}.exp_()", "{v}.sigmoid_()", "{v}.relu_()", "{v}.copy_(y)", "{v}.zero_()", "{v}[...] = y",
    "{v}.masked_fill_({v} > 0, 0.25)", "{v}.masked_fill_({v}.detach() < 0, y.sum())", "{v} += y", "{v} *= y",
    "{v}.div_(y.abs() + 1)", "{v}.pow_(2)", "{v}.tanh_()", "{v}.lerp_(y, 0.3)", "{v}.abs_()", "{v}.sqrt_()",
    "{v}.index_put_((L.tensor([0, -1]),), y[0] if y.dim() else y, accumulate=True)",
    "{v}.index_put_((L.tensor([0]),), y[0] if y.dim() else y)", "{v}.index_fill_(0, L.tensor([0]), 3.0)",
    "{v}.index_add_(0, L.tensor([0, 0]), L.stack([y[0], y[0]]) if y.dim() else y.expand(2))",
    "{v}.scatter_add_(0, L.zeros_like({v}, dtype=L.long), y.expand_as({v}))", "{v}.fill_(y.sum())",
]
SAVE_BEFORE = ["s = b.sin()", "s = b * b", "s = b.exp()", "s = (b + 1).relu()", "s = b.pow(3)", "s = b.sigmoid()",
               "s = b.tanh()", "s = b.sqrt()", "s = b.abs().log()", "s = b @ b.mT" if False else "s = b.cos()",
               "s = b.clone()", "s = b * 2", "s = b + y.sum()", "s = (b * b).sum()", "s = b.max()",
               "s = b.norm()", "s = b.softmax(-1)"]
LEAF_FORMS = [
    "x_g.add_(1)", "x_g[0] = 1.0", "x_g.view(-1)[0] = 2.0", "x_g.zero_()", "x_g.t_() if x_g.dim() == 2 else x_g.unsqueeze_(0)",
    "with L.no_grad():\n    x_g.mul_(2)", "with L.no_grad():\n    x_g[0] = 5.0", "x_g.detach().add_(1)",
    "x_g.data.mul_(3)", "x_g.requires_grad_(False).add_(1)", "x_g.narrow(0, 0, 1).zero_()",
    "with L.no_grad():\n    v = x_g[0]\nv.add_(1)",
]


def autograd_views_case(rng: np.random.Generator) -> Case:
    """A non-leaf ``b`` made from leaves, a chain of views, an in-place write through the last one (with a
    tensor that requires grad half the time), maybe a value saved for backward before the write; gradients of
    every result. A quarter of the cases write into the leaf itself (refused unless under no_grad)."""
    shape = tuple(int(s) for s in pick(rng, [(4,), (3, 4), (2, 3, 4), (4, 4), (2, 2), (4, 1, 3), (6,)]))
    inputs: dict = {"x_g": (_f64(rng, shape), "float64")}
    if rng.random() < 0.25:
        lines = [pick(rng, LEAF_FORMS), "out = (x_g * 2, x_g)"]
        return Case("\n".join(lines), inputs, grad=True)
    lines = [pick(rng, ["b = x_g * 1", "b = x_g.clone()", "b = x_g + 0", "b = x_g * 1", "b = x_g.clone()",
                        "b = x_g.exp()", "b = x_g.tanh()"])]  # exp/tanh save their output: any write then errs
    names = ["b"]
    yname = "y_g" if rng.random() < 0.6 else "y"
    lines.append("y = y_g" if yname == "y_g" else "")
    if rng.random() < 0.35:
        lines.append(pick(rng, SAVE_BEFORE))
        names.append("s")
    cur, cur_shape = "b", shape
    for k in range(int(rng.integers(1, 4))):
        if cur_shape is None or not all(cur_shape) or len(cur_shape) == 0:
            break
        expr, new_shape = _view_chain(rng, cur_shape)
        name = f"v{k}"
        lines.append(f"{name} = {cur}{expr}")
        names.append(name)
        cur, cur_shape = name, new_shape
    # the value written: a leaf that requires grad (gradients flow into it), a constant, or a 0-d one
    yshape = cur_shape if (cur_shape is not None and rng.random() < 0.7) else ()
    inputs[yname] = (_f64(rng, yshape), "float64")
    write = pick(rng, INPLACE_WRITES).format(v=cur)
    if rng.random() < 0.15:  # write into the base instead, then read the views
        write = pick(rng, INPLACE_WRITES[:12]).format(v="b").replace("(y)", "(y.sum())").replace("= y", "= y.sum()")
    if rng.random() < 0.1:  # through a detached alias: shares the version counter
        write = f"{cur}.detach().mul_(2)"
    lines.append(write)
    if rng.random() < 0.4:
        lines.append(pick(rng, ["w = b.sum() * 2", f"w = {cur} * 3", "w = b.exp().sum()", f"w = ({cur} ** 2).sum()"]))
        names.append("w")
    lines.append("out = (" + ", ".join(names) + ",)")
    return Case("\n".join(lines), inputs, grad=True)


GENERATORS["autograd_views"] = autograd_views_case


# ---- (b) promotion of binary and ternary ops with out= ----------------------------------------------------
TERNARY = [
    "L.addcmul({a}, {b}, {c})", "L.addcmul({a}, {b}, {c}, value={s})", "L.addcdiv({a}, {b}, {c})",
    "L.addcdiv({a}, {b}, {c}, value={s})", "L.lerp({a}, {b}, {c})", "L.lerp({a}, {b}, {s})",
    "L.where({a} > 0, {b}, {c})", "L.where({a} != 0, {s}, {c})", "L.where({a} > 0, {b}, {s})",
    "L.where({a} > 0, {s}, {s2})", "L.clamp({a}, {b}, {c})", "L.clamp({a}, min={b})", "L.clamp({a}, max={c})",
    "L.clamp({a}, {s}, {s2})", "L.add({a}, {b}, alpha={s})", "L.sub({a}, {b}, alpha={s})", "L.mul({a}, {b})",
    "L.div({a}, {b})", "L.div({a}, {b}, rounding_mode='floor')", "L.remainder({a}, {b})", "L.pow({a}, {b})",
    "L.maximum({a}, {b})", "L.fmin({a}, {b})", "L.atan2({a}, {b})", "L.eq({a}, {b})", "L.gt({a}, {b})",
    "L.bitwise_xor({a}, {b})", "L.logical_or({a}, {b})", "L.xlogy({a}, {b})", "L.hypot({a}, {b})",
    "L.copysign({a}, {b})", "L.true_divide({a}, {b})", "L.floor_divide({a}, {b})", "L.fmod({a}, {b})",
    "L.heaviside({a}, {b})", "L.nextafter({a}, {b})", "L.ldexp({a}, {b})", "L.float_power({a}, {b})",
]
TERNARY_INPLACE = ["{a}.addcmul_({b}, {c})", "{a}.addcdiv_({b}, {c}, value={s})", "{a}.lerp_({b}, {c})",
                   "{a}.clamp_({b}, {c})", "{a}.add_({b}, alpha={s})", "{a}.lerp_({b}, {s})",
                   "{a}.masked_fill_({b} > 0, {s})", "{a}.where({b} > 0, {s})"]
SCALARS = ["True", "False", "0", "2", "-3", "300", "2.5", "-0.0", "float('inf')", "float('nan')", "(1+2j)", "0.5j"]


def _ternary_operand(rng: np.random.Generator, name: str, inputs: dict, shape: tuple) -> str:
    r = rng.random()
    if r < 0.2:
        return pick(rng, SCALARS)
    dtype = pick(rng, ALL_DTYPES)
    sh = () if r < 0.45 else pick(rng, [shape, shape[-1:], (1,) + shape[1:] if shape else ()])
    inputs[name] = (values(rng, dtype, sh, special=rng.random() < 0.4), dtype)
    return name


def ternary_out_case(rng: np.random.Generator) -> Case:
    """A binary or ternary op over tensors of any dtype (n-d, 0-d), Python scalars, with out= half the time."""
    shape = tuple(int(s) for s in pick(rng, [(3,), (2, 3), ()]))
    inputs: dict = {}
    da = pick(rng, ALL_DTYPES)
    inputs["a"] = (values(rng, da, shape, special=rng.random() < 0.4), da)
    b = _ternary_operand(rng, "b", inputs, shape)
    c = _ternary_operand(rng, "c", inputs, shape)
    fmt = dict(a="a", b=b, c=c, s=pick(rng, SCALARS[1:]), s2=pick(rng, SCALARS[1:]))
    if rng.random() < 0.2:
        expr = pick(rng, TERNARY_INPLACE).format(**fmt)
        return Case(f"r = {expr}\nout = (r, r is a)", inputs)
    expr = pick(rng, TERNARY).format(**fmt)
    if rng.random() < 0.55:
        odt = pick(rng, ALL_DTYPES)
        oshape = pick(rng, [shape, shape, (0,), ()])
        inputs["o"] = (np.zeros(oshape), odt)
        expr = expr[:-1] + ", out=o)"
        return Case(f"r = {expr}\nout = (r, o, r is o)", inputs)
    return Case(f"out = {expr}", inputs)


GENERATORS["ternary_out"] = ternary_out_case


# ---- (c) reductions over empty dims and all-NaN rows, with gradients ---------------------------------------
EDGE_REDUCTIONS = [
    "L.sum(x, {d}, keepdim={kd})", "L.sum(x, {d}, dtype={dt})", "L.mean(x, {d}, keepdim={kd})", "L.mean(x)",
    "L.nansum(x, {d})", "L.nanmean(x, {d}, keepdim={kd})", "L.nanmean(x)", "L.prod(x, {d}, dtype={dt})",
    "L.amax(x, {d}, keepdim={kd})", "L.amin(x, {d})", "L.max(x, {d})", "L.min(x, {d}, keepdim={kd})",
    "L.max(x)", "L.min(x)", "L.aminmax(x)", "L.argmax(x, {d})", "L.argmin(x)", "L.logsumexp(x, {d}, keepdim={kd})",
    "L.std(x, {d}, keepdim={kd})", "L.var(x, {d}, correction=0)", "L.std(x)", "L.var_mean(x, {d})",
    "L.norm(x, dim={d})", "L.linalg.vector_norm(x, {p}, {d})", "L.linalg.vector_norm(x, {p})",
    "L.median(x)", "L.median(x, {d})", "L.nanmedian(x)", "L.nanmedian(x, {d}, keepdim={kd})",
    "L.quantile(x, 0.5, {d})", "L.nanquantile(x, 0.25, {d})", "L.nanquantile(x, 0.5)", "L.cumsum(x, {d}, dtype={dt})",
    "L.cumprod(x, {d})", "L.cummax(x, {d})", "L.cummin(x, {d})", "L.logcumsumexp(x, {d})", "L.softmax(x, {d})",
    "L.log_softmax(x, {d})", "L.count_nonzero(x, {d})", "L.any(x, {d}, keepdim={kd})", "L.all(x)",
    "L.sum(x, ({d},), keepdim={kd})", "L.mean(x, {d}, dtype=L.float64)", "L.special.logsumexp(x, {d})",
    "L.nan_to_num(x).sum({d})", "L.nansum(x)", "x.sum({d}).sum()", "L.std_mean(x, {d}, keepdim={kd})",
    "L.trapezoid(x, dim={d})", "L.cumulative_trapezoid(x, dim={d})", "L.diff(x, dim={d})",
]


def _edge_rows(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    if dtype in ("bool",):
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if not dtype.startswith("float"):
        return rng.integers(-3, 4, n).reshape(shape)
    kind = pick(rng, ["nan", "inf", "-inf", "mixed_inf", "equal", "nan_some", "zeros", "plain"])
    fill = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "equal": 1.5, "zeros": -0.0}.get(kind)
    if fill is not None:
        out = np.full(n, fill)
    elif kind == "mixed_inf":
        out = rng.choice(np.array([np.inf, -np.inf, 1.0]), n)
    elif kind == "nan_some":
        out = np.where(rng.random(n) < 0.5, np.nan, _f64(rng, (n,)))
    else:
        out = _f64(rng, (n,))
    return out.reshape(shape)


def reduce_edge_case(rng: np.random.Generator) -> Case:
    """A reduction along a dim that may be empty, over rows all NaN / all inf / all equal / all -0, with
    dtype= and keepdim; gradients in float64."""
    shape = tuple(int(s) for s in pick(rng, [(3, 4), (0, 3), (3, 0), (2, 0, 2), (4,), (0,), (), (1, 3), (2, 1)]))
    dtype = pick(rng, ["float64", "float64", "float32", "float16", "bfloat16", "int64", "bool", "int32", "uint8"])
    grad = dtype == "float64" and rng.random() < 0.6
    name = "x_g" if grad else "x"
    inputs = {name: (_edge_rows(rng, dtype, shape), dtype)}
    nd = max(len(shape), 1)
    fmt = dict(d=int(rng.integers(-nd, nd)), kd=pick(rng, [False, True]),
               dt=pick(rng, ["None", "L.float64", "L.int64", "L.float32", "L.int32", "L.float16"]),
               p=pick(rng, [2, 1, 0, "float('inf')", "-float('inf')", 3]))
    expr = pick(rng, EDGE_REDUCTIONS).format(**fmt)
    return Case(("x = x_g\n" if grad else "") + f"out = {expr}", inputs, grad=grad)


GENERATORS["reduce_edge"] = reduce_edge_case


# ---- (d) advanced indexing get/set and its gradients -------------------------------------------------------
def _adv_index(rng: np.random.Generator, shape: tuple, inputs: dict, dups: bool) -> str:
    """An index expression with 1-2 index tensors (broadcast against each other, negative entries,
    duplicates when ``dups``), bool masks, slices, None and Ellipsis."""
    nd = len(shape)
    parts = []
    n_adv = 0
    bshape = pick(rng, [(2,), (2, 1), (1, 3), (3,), (2, 2)])
    for d in range(nd):
        r = rng.random()
        if r < 0.45 and n_adv < 2:
            size = shape[d]
            idx = rng.integers(-size, size, bshape if n_adv == 0 else pick(rng, [bshape, bshape[-1:], (1,)]))
            if not dups:
                flat = rng.permutation(np.arange(-size, size) % size)[:idx.size]
                if flat.size < idx.size:
                    idx = np.zeros(1, dtype=np.int64) + int(rng.integers(0, size))
                else:
                    idx = (flat - size * (rng.random(flat.size) < 0.5)).reshape(idx.shape)
            name = f"i{d}"
            inputs[name] = (idx, "int64")
            parts.append(name)
            n_adv += 1
        elif r < 0.55 and n_adv < 2 and d == nd - 1:
            name = f"m{d}"
            inputs[name] = (rng.random(shape[d]) < 0.5, "bool")
            parts.append(name)
            n_adv += 1
        elif r < 0.65:
            parts.append(str(int(rng.integers(-shape[d], shape[d]))))
        elif r < 0.72:
            parts.append("None, :")
        elif r < 0.8 and d == 0:
            parts.append("...")
            break
        else:
            parts.append(pick(rng, [":", "1:", "::2", "-2:"]))
    if n_adv == 0:
        name = "i_last"
        inputs[name] = (rng.integers(-shape[-1], shape[-1], bshape), "int64")
        parts = ["..."] + [name]
    return ", ".join(parts)


def index_grad_case(rng: np.random.Generator) -> Case:
    """getitem / setitem / index_put_(accumulate) with advanced indices on a float64 tensor that requires
    grad (through a non-leaf copy for writes), values that require grad; gradients of both."""
    shape = tuple(int(s) for s in pick(rng, [(4,), (3, 4), (2, 3, 4), (4, 1, 3), (3, 3)]))
    inputs: dict = {"x_g": (_f64(rng, shape), "float64")}
    kind = rng.random()
    if kind < 0.35:
        idx = _adv_index(rng, shape, inputs, dups=True)
        tail = pick(rng, ["", ".sum(0)", " * 2", ".exp()", "[..., :1]"])
        return Case(f"out = x_g[{idx}]{tail}", inputs, grad=True)
    if kind < 0.7:
        idx = _adv_index(rng, shape, inputs, dups=False)
        vform = pick(rng, ["v_g", "v_g", "2.5", "v_g.sum()"])
        vshape = pick(rng, [(), (1,), "full", "last"])
        lines = ["y = x_g * 1"]
        lines.append(f"sel = y[{idx}]")
        if vform != "2.5":
            inputs["v_g"] = (_f64(rng, ()), "float64") if vshape == () else (None, "float64")
        lines.append(f"y[{idx}] = {vform}")
        lines.append("out = (y, sel)")
        case = Case("\n".join(lines), inputs, grad=True)
        if vform != "2.5":
            case = _with_value_shape(case, shape, idx, vshape, rng)
        return case
    # index_put_ with accumulate (duplicates allowed) or not (no duplicates), on a non-leaf or out of place
    idx = _adv_index(rng, shape, inputs, dups=True)
    names = [p for p in idx.split(", ") if p.startswith(("i", "m"))]
    only_tensors = len(names) == len(idx.split(", ")) and all(p.startswith("i") for p in names)
    if not only_tensors:  # index_put takes a tuple of index tensors (None means a full slice)
        parts = idx.split(", ")
        if "..." in parts or any(p.lstrip("-").isdigit() or ":" in p or p == "None" for p in parts):
            return Case(f"out = x_g[{idx}] * 1.5", inputs, grad=True)
    acc = True
    inputs["v_g"] = (_f64(rng, ()), "float64")
    form = pick(rng, ["y = x_g * 1\ny.index_put_(({n},), v_g, accumulate={a})\nout = y",
                      "out = x_g.index_put(({n},), v_g, accumulate={a})",
                      "out = L.index_put(x_g, ({n},), v_g * 2, {a})",
                      "y = x_g.clone()\ny.index_put_(({n},), v_g.expand(1), accumulate={a})\nout = y"])
    return Case(form.format(n=", ".join(names), a=acc), inputs, grad=True)


def _with_value_shape(case: Case, shape: tuple, idx: str, vshape: object, rng: np.random.Generator) -> Case:
    """Give ``v_g`` the shape of the selection (or a broadcastable part of it), computed with NumPy-free torch
    semantics by asking torch itself (the shape oracle only; values come from ``rng``)."""
    if torch is None:
        return case
    env = {"L": torch, "x_g": torch.zeros(shape)}
    for k, (arr, dt) in case.inputs.items():
        if k.startswith(("i", "m")):
            env[k] = torch.tensor(arr, dtype=torch.bool if dt == "bool" else torch.int64)
    try:
        sel = tuple(eval(f"x_g[{idx}]", env).shape)  # noqa: S307 - the generator's own index text
    except Exception:  # noqa: BLE001 - an invalid index: both sides must raise, any value shape will do
        sel = ()
    if vshape == "full":
        want = sel
    elif vshape == "last":
        want = sel[-1:]
    else:
        want = vshape
    inputs = dict(case.inputs)
    inputs["v_g"] = (_f64(rng, tuple(want)), "float64")
    return Case(case.code, inputs, grad=True)


GENERATORS["index_grad"] = index_grad_case
