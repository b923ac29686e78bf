"""ember against PyTorch 2.13 (CPU) on randomly drawn shapes: forward values, result dtypes and
gradients, op family by op family, plus dtype promotion and the lectures' two-layer network.

Every test writes its computation once as ``fn(lib, *tensors)`` and runs it with ``lib=ember``
and ``lib=torch`` (ember speaks PyTorch's API), so the two sides cannot drift apart.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DRAWS = 25


def _np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(value.detach().__array__())


def _dtype_name(t: Any) -> str:
    return str(getattr(t, "dtype", t)).split(".")[-1]


def _flat(outs: Any) -> list:
    if isinstance(outs, (tuple, list)):
        return [o for item in outs for o in _flat(item)]
    return [outs]


def compare(fn: Callable, arrays: list, grad: bool = True, rtol: float = 1e-7, atol: float = 1e-9,
            grad_rtol: float | None = None, seed: int = 0) -> None:
    """Run ``fn`` under both libraries on the same inputs; compare outputs, dtypes and gradients."""
    diff = [grad and a.dtype.kind == "f" for a in arrays]
    e_in = [ember.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    t_in = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    e_out, t_out = _flat(fn(ember, *e_in)), _flat(fn(torch, *t_in))
    assert len(e_out) == len(t_out)
    for i, (e, t) in enumerate(zip(e_out, t_out)):
        assert tuple(e.shape) == tuple(t.shape), f"output {i}: shape {tuple(e.shape)} vs torch {tuple(t.shape)}"
        assert _dtype_name(e) == _dtype_name(t), f"output {i}: dtype {e.dtype} vs torch {t.dtype}"
        np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol, err_msg=f"output {i}")
    if not any(diff):
        return
    rng = np.random.default_rng(seed + 99)
    e_loss, t_loss = 0, 0
    for e, t in zip(e_out, t_out):
        if t.requires_grad:
            v = rng.standard_normal(tuple(t.shape))
            e_loss = e_loss + (e * ember.tensor(v, dtype=e.dtype)).sum()
            t_loss = t_loss + (t * torch.tensor(v, dtype=t.dtype)).sum()
    if isinstance(t_loss, int):
        return
    e_loss.backward()
    t_loss.backward()
    for i, (e, t) in enumerate(zip(e_in, t_in)):
        if t.requires_grad:
            t_grad = t.grad if t.grad is not None else torch.zeros_like(t)
            assert e.grad is not None or not t_grad.any(), f"input {i}: ember gave no gradient"
            e_grad = _np(e.grad) if e.grad is not None else np.zeros(t.shape)
            np.testing.assert_allclose(e_grad, _np(t_grad), rtol=grad_rtol or rtol * 10, atol=atol * 10,
                                       err_msg=f"gradient of input {i}")


# ---- random shapes -------------------------------------------------------------------------------
def random_shape(rng: np.random.Generator, max_ndim: int = 3, max_size: int = 4, min_ndim: int = 0) -> tuple:
    return tuple(int(s) for s in rng.integers(1, max_size + 1, size=rng.integers(min_ndim, max_ndim + 1)))


def broadcast_partner(rng: np.random.Generator, shape: tuple) -> tuple:
    """A shape that broadcasts with ``shape``: some dims set to 1, some leading dims dropped."""
    out = [1 if rng.random() < 0.3 else s for s in shape]
    drop = rng.integers(0, len(out) + 1)
    return tuple(out[drop:])


def draws(n: int = DRAWS) -> Any:
    return pytest.mark.parametrize("seed", range(n))


UNARY = {
    "exp": (lambda L, x: L.exp(x), "real"), "log": (lambda L, x: L.log(x), "pos"),
    "sqrt": (lambda L, x: x.sqrt(), "pos"), "rsqrt": (lambda L, x: L.rsqrt(x), "pos"),
    "tanh": (lambda L, x: L.tanh(x), "real"), "sigmoid": (lambda L, x: L.sigmoid(x), "real"),
    "relu": (lambda L, x: L.relu(x), "real"), "abs": (lambda L, x: x.abs(), "real"),
    "sin": (lambda L, x: L.sin(x), "real"), "cos": (lambda L, x: x.cos(), "real"),
    "log1p": (lambda L, x: L.log1p(x), "pos"), "neg": (lambda L, x: -x, "real"),
    "reciprocal": (lambda L, x: L.reciprocal(x), "pos"), "erf": (lambda L, x: L.erf(x), "real"),
    "sign": (lambda L, x: L.sign(x), "real"), "floor": (lambda L, x: L.floor(x), "real"),
    "round": (lambda L, x: L.round(x), "real"), "square_pow": (lambda L, x: x ** 2, "real"),
}

BINARY = {
    "add": lambda L, a, b: a + b, "sub": lambda L, a, b: a - b, "mul": lambda L, a, b: a * b,
    "div": lambda L, a, b: a / b, "pow": lambda L, a, b: a.abs() ** b, "maximum": lambda L, a, b: L.maximum(a, b),
    "minimum": lambda L, a, b: L.minimum(a, b), "where": lambda L, a, b: L.where(a > b, a, b),
    "fmod": lambda L, a, b: L.fmod(a, b), "remainder": lambda L, a, b: L.remainder(a, b),
    "rsub_scalar": lambda L, a, b: 2.0 - a * b, "sub_alpha": lambda L, a, b: L.sub(a, b, alpha=0.5),
    "atan_like": lambda L, a, b: (a * b + 1).abs().log() / (b * b + 1),
}


def _values(rng: np.random.Generator, shape: tuple, domain: str = "real") -> np.ndarray:
    if domain == "pos":
        return rng.uniform(0.2, 3.0, shape)
    return rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)  # away from 0: kinks, poles


@pytest.mark.parametrize("name", sorted(UNARY))
@draws(8)
def test_unary(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    fn, domain = UNARY[name]
    compare(fn, [_values(rng, random_shape(rng), domain)])


@pytest.mark.parametrize("name", sorted(BINARY))
@draws(10)
def test_binary_broadcasting(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng)
    shapes = [shape, broadcast_partner(rng, shape)]
    if rng.random() < 0.5:
        shapes.reverse()
    compare(BINARY[name], [_values(rng, s) for s in shapes])


@draws()
def test_clamp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo = float(rng.uniform(-1, 0))
    compare(lambda L, x: (x.clamp(min=lo) * x.clamp(max=-lo) + L.clamp(x, lo, -lo)), [_values(rng, random_shape(rng))])


# ---- reductions -----------------------------------------------------------------------------------
def _random_dims(rng: np.random.Generator, ndim: int) -> Any:
    if ndim == 0 or rng.random() < 0.2:
        return None
    k = int(rng.integers(1, ndim + 1))
    dims = sorted(rng.choice(ndim, size=k, replace=False).tolist())
    dims = [d - ndim if rng.random() < 0.5 else d for d in dims]  # negative dims too
    return dims[0] if k == 1 and rng.random() < 0.5 else tuple(dims)


REDUCTIONS = {
    "sum": lambda L, x, dims, keep: x.sum() if dims is None else x.sum(dims, keepdim=keep),
    "mean": lambda L, x, dims, keep: x.mean() if dims is None else L.mean(x, dims, keepdim=keep),
    "amax": lambda L, x, dims, keep: L.amax(x, () if dims is None else dims, keepdim=keep),
    "amin": lambda L, x, dims, keep: x.amin(() if dims is None else dims, keepdim=keep),
    "var": lambda L, x, dims, keep: L.var(x, dims, keepdim=keep, correction=0) if dims is not None else x.var(),
    "std": lambda L, x, dims, keep: x.std(dims, keepdim=keep, correction=1) if dims is not None else L.std(x),
    "logsumexp": lambda L, x, dims, keep: L.logsumexp(x, dims if dims is not None else tuple(range(x.ndim)),
                                                       keepdim=keep),
    "norm": lambda L, x, dims, keep: x.norm(2, dim=dims, keepdim=keep),
    "norm_p1": lambda L, x, dims, keep: L.norm(x, 1, dims, keep),
    "prod": lambda L, x, dims, keep: x.prod() if not isinstance(dims, int) else x.prod(dims, keepdim=keep),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@draws()
def test_reductions(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, max_ndim=4, min_ndim=1 if name in ("var", "std") else 0)
    if name in ("var", "std") and int(np.prod(shape)) < 2:
        shape = shape + (2,)
    dims = _random_dims(rng, len(shape))
    keep = bool(rng.random() < 0.5)
    values = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 + 0.05 + rng.uniform(0, 0.01, shape)
    values = values * rng.choice([-1.0, 1.0], shape) if name != "prod" else values + 0.5
    compare(lambda L, x: REDUCTIONS[name](L, x, dims, keep), [values])


@draws()
def test_max_min_with_indices(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1)
    dim = int(rng.integers(-len(shape), len(shape)))
    keep = bool(rng.random() < 0.5)
    values = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)

    def fn(L: Any, x: Any) -> tuple:
        mx, mn = x.max(dim, keepdim=keep), L.min(x, dim=dim, keepdim=keep)
        return mx.values, mx.indices, mn[0], mn[1], x.argmax(dim), L.argmin(x), x.max(), L.min(x)

    compare(fn, [values])


@draws()
def test_cumsum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1)
    dim = int(rng.integers(-len(shape), len(shape)))
    compare(lambda L, x: L.cumsum(x, dim) * x.cumsum(dim=dim), [rng.standard_normal(shape)])
    compare(lambda L, x: x.cumsum(dim), [rng.integers(-3, 4, shape)], grad=False)


def test_integer_and_bool_reductions(rng: np.random.Generator) -> None:
    for dtype in (np.int32, np.int64, np.bool_, np.uint8):
        a = (rng.integers(0, 3, (3, 4)) > 0 if dtype is np.bool_ else rng.integers(0, 5, (3, 4))).astype(dtype)
        compare(lambda L, x: (x.sum(), x.sum(1), x.prod(0), x.cumsum(1), x.amax(1)), [a], grad=False)
        if dtype is not np.uint8:  # torch's all/any keep uint8 (a legacy quirk ember does not copy)
            compare(lambda L, x: (x.all(), x.any(0)), [a], grad=False)


# ---- matmul / einsum -------------------------------------------------------------------------------
@draws(40)
def test_matmul_batch_broadcasting(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k, m = (int(v) for v in rng.integers(1, 5, 3))
    batch = random_shape(rng, max_ndim=2, max_size=3)
    a_shape = broadcast_partner(rng, batch) + (n, k)
    b_shape = broadcast_partner(rng, batch) + (k, m)
    if rng.random() < 0.2:
        a_shape = (k,)
    elif rng.random() < 0.2:
        b_shape = (k,)
    compare(lambda L, a, b: a @ b, [rng.standard_normal(a_shape), rng.standard_normal(b_shape)])


EINSUMS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("i,i->", [(4,), (4,)]),
           ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,j->ij", [(2,), (3,)]), ("ii->i", [(3, 3)]),
           ("ii", [(3, 3)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 2, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)]),
           ("ijk->kj", [(2, 3, 4)]), ("ij,ij->i", [(3, 2), (3, 2)])]


@pytest.mark.parametrize("equation,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(equation: str, shapes: list, rng: np.random.Generator) -> None:
    compare(lambda L, *xs: L.einsum(equation, *xs), [rng.standard_normal(s) for s in shapes])


# ---- indexing ---------------------------------------------------------------------------------------
def _random_index(rng: np.random.Generator, shape: tuple, lib: Any) -> tuple:
    index = []
    for size in shape:
        kind = rng.integers(0, 4)
        if kind == 0:
            index.append(slice(None))
        elif kind == 1:
            start = int(rng.integers(-size, size))
            index.append(slice(start, None, int(rng.integers(1, 3))))
        elif kind == 2:
            index.append(int(rng.integers(-size, size)))
        else:
            index.append(("long", rng.integers(-size, size, size=int(rng.integers(1, 4)))))
    advanced = [i for i, item in enumerate(index) if isinstance(item, tuple)]
    for i in advanced[1:]:  # advanced indices must broadcast together
        index[i] = ("long", rng.integers(-shape[i], shape[i], size=len(index[advanced[0]][1])))
    return tuple(lib.tensor(item[1]) if isinstance(item, tuple) else item for item in index)


@draws(40)
def test_getitem(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1)
    state = rng.bit_generator.state

    def fn(L: Any, x: Any) -> Any:
        local = np.random.default_rng(0)
        local.bit_generator.state = state
        index = _random_index(local, shape, L)
        if local.random() < 0.3:
            return x[x > 0]
        return x[index]

    compare(fn, [rng.standard_normal(shape)])


@draws(30)
def test_setitem(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1)
    state = rng.bit_generator.state
    value = float(rng.standard_normal())

    def fn(L: Any, x: Any, v: Any) -> Any:
        local = np.random.default_rng(0)
        local.bit_generator.state = state
        index = _random_index(local, shape, L)
        y = x * 1.0
        kind = local.integers(0, 3)
        if kind == 0:
            y[y > 0] = value
        elif kind == 1:
            y[index] = v.sum()
        else:
            y[index] = value
        return y

    compare(fn, [rng.standard_normal(shape), rng.standard_normal(2)])


def test_setitem_lecture_relu_mask(rng: np.random.Generator) -> None:
    def fn(L: Any, h: Any, g: Any) -> Any:
        grad_h = g.clone()
        grad_h[h < 0] = 0
        return grad_h

    compare(fn, [rng.standard_normal((6, 5)), rng.standard_normal((6, 5))])


# ---- joining, splitting, gathering --------------------------------------------------------------------
@draws()
def test_cat_stack_split_chunk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1, max_size=5)
    dim = int(rng.integers(-len(shape), len(shape)))
    other = list(shape)
    other[dim] = int(rng.integers(1, 4))
    size = int(rng.integers(1, 4))
    chunks = int(rng.integers(1, 4))

    def fn(L: Any, a: Any, b: Any, c: Any) -> tuple:
        return (L.cat([a, b], dim), L.stack([a, c], dim), L.stack((a, c)), *L.split(a, size, dim),
                *a.chunk(chunks, dim), *L.unbind(a, dim))

    compare(fn, [rng.standard_normal(shape), rng.standard_normal(other), rng.standard_normal(shape)])


@draws()
def test_gather_scatter_add_index_select(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=1)
    dim = int(rng.integers(0, len(shape)))
    index_shape = tuple(int(rng.integers(1, s + 1)) for s in shape)
    index = rng.integers(0, shape[dim], index_shape)
    select = rng.integers(0, shape[dim], int(rng.integers(1, 5)))

    def fn(L: Any, x: Any, src: Any) -> tuple:
        idx = L.tensor(index)
        return (L.gather(x, dim, idx), x.scatter_add(dim, idx, src), L.index_select(x, dim, L.tensor(select)))

    compare(fn, [rng.standard_normal(shape), rng.standard_normal(index_shape)])


@draws(10)
def test_views(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, min_ndim=2, max_ndim=4)
    perm = tuple(rng.permutation(len(shape)).tolist())

    def fn(L: Any, x: Any) -> tuple:
        return (x.permute(perm).reshape(-1), x.transpose(0, -1).contiguous(), x.mT, x.unsqueeze(1).squeeze(1),
                x.flatten(), x.flatten(1), x.expand(2, *shape) * 1.0, x.flip(0), x.T if x.ndim == 2 else x.mT,
                L.movedim(x, 0, -1), x.repeat(2, *([1] * (len(shape) - 1))), L.tril(x), L.triu(x, 1),
                x.narrow(-1, 0, 1), x.roll(1, 0))

    compare(fn, [rng.standard_normal(shape)])


# ---- dtype promotion -----------------------------------------------------------------------------------
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SCALARS = [True, 2, -3, 2.5]


def _make(lib: Any, dtype: str, zero_dim: bool) -> Any:
    shape = () if zero_dim else (2,)
    return lib.ones(shape, dtype=getattr(lib, dtype))


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_result_type_tensor_pairs(a: str, b: str) -> None:
    for za, zb in [(False, False), (True, False), (False, True), (True, True)]:
        want = torch.result_type(_make(torch, a, za), _make(torch, b, zb))
        got = ember.result_type(_make(ember, a, za), _make(ember, b, zb))
        assert got.name == _dtype_name(want), f"{a}{'(0-d)' * za} with {b}{'(0-d)' * zb}"
        if a != "bool" or b != "bool":  # the op itself promotes the same way
            e_sum = _make(ember, a, za) + _make(ember, b, zb)
            assert e_sum.dtype.name == _dtype_name(want), f"{a} + {b} gave {e_sum.dtype}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_result_type_with_python_scalars(dtype: str) -> None:
    for scalar, zero_dim in itertools.product(SCALARS, (False, True)):
        if dtype == "uint8" and scalar == -3:
            continue  # torch wraps around to 253; ember (NumPy) refuses the out-of-range integer
        want = torch.result_type(_make(torch, dtype, zero_dim), scalar)
        got = ember.result_type(_make(ember, dtype, zero_dim), scalar)
        assert got.name == _dtype_name(want), f"{dtype} with {scalar!r}"
        assert (_make(ember, dtype, zero_dim) * scalar).dtype.name == _dtype_name(torch.ones(
            () if zero_dim else (2,), dtype=getattr(torch, dtype)) * scalar), f"{dtype} * {scalar!r}"


@pytest.mark.parametrize("op", ["div", "mul", "sub", "pow", "maximum", "where", "eq"])
def test_op_promotion(op: str) -> None:
    fns = {"div": lambda L, a, b: a / b, "mul": lambda L, a, b: a * b, "sub": lambda L, a, b: a - b,
           "pow": lambda L, a, b: a ** b, "maximum": lambda L, a, b: L.maximum(a, b),
           "where": lambda L, a, b: L.where(a > 0, a, b), "eq": lambda L, a, b: a == b}
    for a, b in itertools.product(["bool", "uint8", "int32", "int64", "float16", "float32", "float64"], repeat=2):
        if op == "sub" and "bool" in (a, b) or op == "pow" and a == "bool" and b == "bool":
            continue
        want = fns[op](torch, _make(torch, a, False), _make(torch, b, False))
        got = fns[op](ember, _make(ember, a, False), _make(ember, b, False))
        assert got.dtype.name == _dtype_name(want), f"{op}({a}, {b}) gave {got.dtype}, torch {want.dtype}"


def test_creation_dtypes_match_torch() -> None:
    for data in ([1, 2], [1.0, 2], [True, False], 3, 2.5, [[1, 2], [3, 4]]):
        assert _dtype_name(ember.tensor(data)) == _dtype_name(torch.tensor(data)), repr(data)
    for args in [(5,), (1, 4), (0.0, 1.0, 0.25), (0, 3, 0.5)]:
        np.testing.assert_allclose(_np(ember.arange(*args)), _np(torch.arange(*args)))
        assert _dtype_name(ember.arange(*args)) == _dtype_name(torch.arange(*args))
    assert _dtype_name(ember.full((2,), 3)) == _dtype_name(torch.full((2,), 3))
    assert _dtype_name(ember.full((2,), True)) == _dtype_name(torch.full((2,), True))
    np.testing.assert_allclose(_np(ember.linspace(-1, 1, 7)), _np(torch.linspace(-1, 1, 7)), rtol=1e-6, atol=1e-7)


# ---- the lectures' two-layer network -----------------------------------------------------------------------
def _two_layer(lib: Any, x0: np.ndarray, y0: np.ndarray, w10: np.ndarray, w20: np.ndarray, autograd: bool,
               steps: int = 20) -> tuple:
    x, y = lib.tensor(x0), lib.tensor(y0)
    w1, w2 = lib.tensor(w10, requires_grad=autograd), lib.tensor(w20, requires_grad=autograd)
    learning_rate = 1e-6
    losses = []
    for _ in range(steps):
        if autograd:
            y_pred = x.mm(w1).clamp(min=0).mm(w2)
            loss = (y_pred - y).pow(2).sum()
            losses.append(loss.item())
            loss.backward()
            with lib.no_grad():
                w1 -= learning_rate * w1.grad
                w2 -= learning_rate * w2.grad
                w1.grad.zero_()
                w2.grad.zero_()
        else:
            h = x.mm(w1)
            h_relu = h.clamp(min=0)
            y_pred = h_relu.mm(w2)
            loss = (y_pred - y).pow(2).sum()
            losses.append(loss.item())
            grad_y_pred = 2.0 * (y_pred - y)
            grad_w2 = h_relu.t().mm(grad_y_pred)
            grad_h_relu = grad_y_pred.mm(w2.t())
            grad_h = grad_h_relu.clone()
            grad_h[h < 0] = 0
            grad_w1 = x.t().mm(grad_h)
            w1 -= learning_rate * grad_w1
            w2 -= learning_rate * grad_w2
    return np.array(losses), _np(w1), _np(w2)


@pytest.mark.parametrize("autograd", [False, True], ids=["manual", "autograd"])
def test_two_layer_net_matches_torch(autograd: bool) -> None:
    rng = np.random.default_rng(0)
    n, d_in, h, d_out = 64, 1000, 100, 10
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(n, d_in), (n, d_out), (d_in, h), (h, d_out)]]
    e_losses, e_w1, e_w2 = _two_layer(ember, *arrays, autograd=autograd)
    t_losses, t_w1, t_w2 = _two_layer(torch, *arrays, autograd=autograd)
    assert e_losses[-1] < e_losses[0] * 0.5, "the loss should fall"
    np.testing.assert_allclose(e_losses, t_losses, rtol=1e-3)
    np.testing.assert_allclose(e_w1, t_w1, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(e_w2, t_w2, rtol=1e-3, atol=1e-3)
