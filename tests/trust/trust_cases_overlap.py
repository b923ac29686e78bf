"""Seeded case generator for the trust fuzzer's sixth wave: writes whose inputs share memory with the output.

``overlap`` draws a written view ``W`` and one or two read views ``R``, ``R2`` of one buffer ``b`` (a clone of the
input, so the input itself stays untouched): dense flat windows at offsets that coincide, shift or miss, their
transposes, rows, single elements, stride-2 and column views, expanded rows. It then runs an in-place op
(``W.add_(R)``, ``copy_``, ``addcmul_``, ``lerp_``, ``clamp_``, comparisons, ``index_copy_``, ``scatter_``, ``put_``,
setitem with basic and advanced keys) or an ``out=`` call (``exp(R, out=W)``, ``sort``, ``cumsum``, ``where``,
``index_select``, ``gather``, ``cat``, ``stack``, ``topk``, ``max(dim)``, ``mm``, ``sum(dim)``) and returns the
whole buffer. Where PyTorch raises "some elements of the input tensor and the written-to tensor refer to a single
memory location", ember must raise; where it computes, the buffers must agree.

Two kinds of aliasing make PyTorch's values depend on the order its kernel visits the elements (it then reads
memory it has already overwritten): views that are not dense (PyTorch's ``TooHard``: no check) and the functions
that never check (matrix products, reductions, triangles). For those the generator knows the pair shares memory
(NumPy's ``shares_memory`` on the same recipes) and compares only whether each library raises.

Example:
    >>> case = overlap_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import GENERATORS
from trust_diff import Case

N = 36  # the buffer: 36 elements, seen flat or as (6, 6)

# recipe -> (code over the flat buffer ``f``, numpy view builder over an array ``a``, shape)
def _flat(o: int, shape: tuple) -> tuple:
    n = int(np.prod(shape))
    return (f"f[{o}:{o + n}].view({shape})", lambda a: a[o:o + n].reshape(shape), shape)


def _views(rng: np.random.Generator, dense_only: bool = False) -> tuple:
    """A (3, 3) view of the buffer: (code, numpy builder, shape)."""
    o = int(rng.choice([0, 0, 1, 3, 9, 9, 12, 20, 27]))
    kinds = ["flat", "flat", "t", "rows"] + ([] if dense_only else ["stride2", "block", "col_t"])
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "flat":
        return _flat(o, (3, 3))
    if kind == "t":
        code, fn, _ = _flat(o, (3, 3))
        return (code + ".t()", lambda a: fn(a).T, (3, 3))
    if kind == "rows":
        return (f"f[{o}:{o + 9}].view(3, 3)[[0, 1, 2]]", None, (3, 3))  # a copy: never shares
    if kind == "stride2":
        o = min(o, N - 18)
        return (f"f[{o}:{o + 18}:2].view(3, 3)", lambda a: a[o:o + 18:2].reshape(3, 3), (3, 3))
    if kind == "block":
        r, c = int(rng.integers(4)), int(rng.integers(4))
        return (f"b[{r}:{r + 3}, {c}:{c + 3}]", lambda a: a.reshape(6, 6)[r:r + 3, c:c + 3], (3, 3))
    r, c = int(rng.integers(4)), int(rng.integers(4))
    return (f"b[{r}:{r + 3}, {c}:{c + 3}].t()", lambda a: a.reshape(6, 6)[r:r + 3, c:c + 3].T, (3, 3))


def _read(rng: np.random.Generator) -> tuple:
    """A read operand broadcastable to (3, 3): a (3, 3) view, a row, an element, an expanded row."""
    u = rng.random()
    if u < 0.6:
        return _views(rng)
    o = int(rng.choice([0, 1, 3, 4, 8, 10]))
    if u < 0.75:
        return _flat(o, (3,))
    if u < 0.85:
        return (f"f[{o}]", lambda a: a[o:o + 1].reshape(()), ())
    if u < 0.93:
        return (f"f[{o}:{o + 3}].view(3, 1)", lambda a: a[o:o + 3].reshape(3, 1), (3, 1))
    return (f"f[{o}:{o + 3}].expand(3, 3)", lambda a: np.broadcast_to(a[o:o + 3], (3, 3)), (3, 3))


# (template, kind): kind "partial"/"none" follows PyTorch's check; "unchecked" functions read what they overwrite
INPLACE = [
    ("W.add_(R)", "partial"), ("W.sub_(R, alpha=2)", "partial"), ("W.mul_(R)", "partial"), ("W.div_(R2b)", "partial"),
    ("W.atan2_(R)", "partial"), ("W.hypot_(R)", "partial"), ("W.copysign_(R)", "partial"),
    ("W.copy_(R)", "partial"), ("W.lerp_(R, 0.25)", "partial"),
    ("W.lerp_(R, R2)", "partial"), ("W.addcmul_(R, R2)", "partial"), ("W.addcdiv_(R, R2b)", "partial"),
    ("W.clamp_(min=R)", "partial"), ("W.clamp_(R, R2)", "partial"), ("W.clamp_max_(R)", "partial"),
    ("W.eq_(R)", "partial"), ("W.lt_(R)", "partial"), ("W.fmod_(R2b)", "partial"), ("W.xlogy_(R2b)", "partial"),
    ("W.pow_(R2b)", "partial"), ("W.nextafter_(R)", "partial"),
    ("W[...] = R", "partial"), ("W[1:] = R[:2]", "partial"), ("W[0] = R[1]", "partial"),
    ("W[[2, 0, 1]] = R", "none"), ("W[:, [1, 0]] = R[:, :2]", "none"), ("W[0, [2, 1]] = R[1, :2]", "none"),
    ("W[W > 1] = R[R > 1][:int((W > 1).sum())] if int((R > 1).sum()) >= int((W > 1).sum()) else None", "none"),
    ("W.index_copy_(0, L.tensor([2, 0, 1]), R)", "none"), ("W.index_add_(1, L.tensor([1, 1, 0]), R)", "none"),
    ("W.scatter_(0, L.tensor([[2, 0, 1], [0, 1, 2]]), R)", "none"),
    ("W.scatter_add_(1, L.tensor([[2, 2], [0, 1], [1, 0]]), R)", "none"),
    ("W.scatter_reduce_(0, L.tensor([[1, 0, 1]]), R, 'amax')", "none"),
    ("W.index_put_((L.tensor([1, 0]),), R[:2])", "none"), ("W.index_put_((L.tensor([1, 1]),), R[0], accumulate=True)", "none"),
    ("W.put_(L.tensor([4, 0, 8]), R[0])", "none"), ("W.index_reduce_(0, L.tensor([0, 0, 2]), R, 'prod')", "quirk"),
    ("W.masked_scatter_(W > 1, R)", "unchecked"), ("W.index_fill_(1, L.tensor([0]), R[0, 0])", "unchecked"),
    ("W.addmm_(R, R2)", "unchecked"), ("W.masked_fill_(W > 2, R[1, 1])", "unchecked"),
]
OUTS = [
    ("L.exp(R, out=W)", "partial"), ("L.add(R, R2, alpha=3, out=W)", "partial"), ("L.neg(R, out=W)", "partial"),
    ("L.mul(R, 2, out=W)", "partial"), ("L.maximum(R, R2, out=W)", "partial"), ("L.sigmoid(R, out=W)", "partial"),
    ("L.where(R > 1, R, R2, out=W)", "partial"), ("L.clamp(R, min=R2, out=W)", "partial"),
    ("L.addcmul(R, R, R2, out=W)", "partial"), ("L.lerp(R, R2, 0.5, out=W)", "partial"),
    ("L.cumsum(R, 1, out=W)", "partial"), ("L.sort(R, 1, out=(W, L.empty(3, 3, dtype=L.int64)))", "partial"),
    ("L.sort(R, dim=0, descending=True, stable=True, out=(W, L.empty(3, 3, dtype=L.int64)))", "partial"),
    ("L.index_select(R, 0, L.tensor([2, 0, 1]), out=W)", "none"), ("L.gather(R, 1, L.tensor([[0, 0, 1]] * 3), out=W)", "none"),
    ("L.cat([R[:1], R[1:]], out=W)", "none"), ("L.stack([R[0], R[2], R[1]], out=W)", "none"),
    ("L.take_along_dim(R, L.tensor([[2, 1, 0]] * 3), 1, out=W)", "none"),
    ("L.topk(R, 3, 1, out=(W, L.empty(3, 3, dtype=L.int64)))", "none"),
    ("L.max(R, 1, keepdim=True, out=(W[:, :1], L.empty(3, 1, dtype=L.int64)))", "none"),
    ("L.mm(R, R2, out=W)", "unchecked"), ("L.sum(R, 0, keepdim=True, out=W[:1])", "unchecked"),
    ("L.tril(R, out=W)", "unchecked"), ("L.softmax(R, 1, out=W)", "unchecked"),
]


def _shares(w: tuple, r: tuple) -> bool:
    if w[1] is None or r[1] is None:
        return False
    a = np.arange(N, dtype=np.float64)
    return bool(np.shares_memory(w[1](a), r[1](a)))


def _dense(view: np.ndarray) -> bool:
    expected = view.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(view.strides, view.shape) if n > 1):
        if stride != expected:
            return False
        expected *= n
    return True


def _too_hard(w: tuple, r: tuple) -> bool:
    """The pair shares memory but one of them is not dense: PyTorch does not check, its values depend on order."""
    if not _shares(w, r):
        return False
    a = np.arange(N, dtype=np.float64)
    return not (_dense(w[1](a)) and _dense(r[1](a)))


def overlap_case(rng: np.random.Generator) -> Case:
    dtype = str(rng.choice(["float32", "float64"]))
    x = np.round(rng.uniform(-3, 3, N), 1)
    x[x == 0] = 0.5
    w = _views(rng)
    r, r2 = _read(rng), _read(rng)
    template, kind = (INPLACE + OUTS)[int(rng.integers(len(INPLACE) + len(OUTS)))]
    if "out=" in template and r[2] == ():  # reductions and sorts need a (3, 3) input
        r = _views(rng)
    if "out=" in template and r2[2] == ():
        r2 = _views(rng)
    code = template.replace("R2b", "(r2.abs() + 1)").replace("R2", "r2").replace("R", "r").replace("W", "w")
    shares = _shares(w, r) or _shares(w, r2)
    # values are compared unless PyTorch may read memory it has already written: a pair that is not dense (its
    # TooHard: no check), a function that never checks, a template that indexes W or R first (the pair checked
    # is then a sub-view this generator does not model): there only whether each library raises is compared
    order_dependent = _too_hard(w, r) or _too_hard(w, r2) or (
        shares and (kind == "unchecked" or "[" in template.replace("L.tensor([", "").replace("]] * 3", "")))
    head = f"b = x.clone().view(6, 6); f = b.view(-1); w = {w[0]}; r = {r[0]}; r2 = {r2[0]}\n"
    if kind == "quirk" and shares:  # torch's index_reduce_ checks some non-dense pairs and not others
        code = f"try:\n    {code}\nexcept RuntimeError:\n    pass"
        order_dependent = True
    body = f"{code}\nout = True" if order_dependent else f"{code}\nout = b"
    return Case(head + body, {"x": (x, dtype)})


GENERATORS["overlap"] = overlap_case
