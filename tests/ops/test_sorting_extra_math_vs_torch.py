"""ember vs PyTorch 2.13 (CPU) for the API extras: sorting/searching (ember/ops/sorting.py), the extra
math (ember/ops/extra_math.py), the new Tensor methods (new_*, softmax, in-place addcmul_ & co.).

Each comparison writes its computation once as ``fn(lib, *tensors)`` and runs it with ``lib=ember``
and ``lib=torch`` on randomly drawn shapes; forward values, dtypes and gradients must agree.
(Forward vs NumPy and gradients vs finite differences live in tests/op_specs.py.)
"""
from __future__ import annotations

import zlib
from typing import Any, Callable

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DRAWS = 8


def _np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(value.detach().__array__())


def _flat(outs: Any) -> list:
    if isinstance(outs, (tuple, list)):
        return [o for item in outs for o in _flat(item)]
    return [outs]


def compare(fn: Callable, arrays: list, grad: bool = True, rtol: float = 1e-7, atol: float = 1e-9,
            exact: bool = False) -> None:
    """Run ``fn`` with both libraries on the same arrays; compare outputs, dtypes and gradients."""
    diff = [grad and a.dtype.kind == "f" for a in arrays]
    e_in = [ember.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    t_in = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, diff)]
    e_out, t_out = _flat(fn(ember, *e_in)), _flat(fn(torch, *t_in))
    assert len(e_out) == len(t_out)
    for i, (e, t) in enumerate(zip(e_out, t_out)):
        assert tuple(e.shape) == tuple(t.shape), f"output {i}: shape {tuple(e.shape)} vs torch {tuple(t.shape)}"
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"output {i}: {e.dtype} vs {t.dtype}"
        if exact or not t.dtype.is_floating_point:
            np.testing.assert_array_equal(_np(e), _np(t), err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol, err_msg=f"output {i}")
    if not any(diff):
        return
    rng = np.random.default_rng(7)
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
            t_grad = _np(t.grad) if t.grad is not None else np.zeros(t.shape)
            e_grad = _np(e.grad) if e.grad is not None else np.zeros(t.shape)
            np.testing.assert_allclose(e_grad, t_grad, rtol=rtol * 10, atol=atol * 10, err_msg=f"gradient of input {i}")


def random_shape(rng: np.random.Generator, max_ndim: int = 3, max_size: int = 4, min_ndim: int = 0) -> tuple:
    return tuple(int(s) for s in rng.integers(1, max_size + 1, size=rng.integers(min_ndim, max_ndim + 1)))


def _partner(rng: np.random.Generator, shape: tuple) -> tuple:
    """A shape broadcastable with ``shape``."""
    out = [1 if rng.random() < 0.3 else s for s in shape]
    return tuple(out[rng.integers(0, len(out) + 1):])


def _distinct(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 - n * 0.25 + rng.uniform(-0.1, 0.1, n)).reshape(shape)


def _ties(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.integers(-2, 3, size=shape).astype(np.float64)


# ---- elementwise ---------------------------------------------------------------------------------
UNIT = lambda rng, s: rng.uniform(-0.9, 0.9, s)  # noqa: E731
REAL = lambda rng, s: rng.standard_normal(s)  # noqa: E731
POSITIVE = lambda rng, s: rng.uniform(0.3, 3.0, s)  # noqa: E731
UNARY = {
    "tan": UNIT, "asin": UNIT, "acos": UNIT, "atan": REAL, "sinh": REAL, "cosh": REAL, "asinh": REAL,
    "acosh": lambda rng, s: rng.uniform(1.2, 4.0, s), "atanh": UNIT, "expm1": REAL, "log2": POSITIVE,
    "log10": POSITIVE, "exp2": REAL, "trunc": lambda rng, s: rng.uniform(-3, 3, s), "frac": lambda rng, s:
    rng.uniform(-3, 3, s), "square": REAL, "erfinv": UNIT, "nan_to_num": REAL, "deg2rad": REAL, "rad2deg": REAL,
    "logit": lambda rng, s: rng.uniform(0.05, 0.95, s), "arcsin": UNIT, "arctan": REAL, "fix": REAL,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_vs_torch(name: str) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for _ in range(DRAWS // 2):
        x = UNARY[name](rng, random_shape(rng))
        compare(lambda lib, a: getattr(lib, name)(a), [x], rtol=1e-6 if name == "erfinv" else 1e-7)
        compare(lambda lib, a: getattr(a, name)(), [x.astype(np.float32)], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["tan", "atan", "expm1", "log2", "exp2", "square", "trunc", "sinh", "log10",
                                  "nan_to_num"])
def test_unary_integer_input_dtypes_match_torch(name: str) -> None:
    x = np.array([[1, 2, 3], [4, 5, 7]], dtype=np.int64)
    compare(lambda lib, a: getattr(lib, name)(a), [x], grad=False, rtol=1e-6)


def test_nan_to_num_special_values_vs_torch() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0])
    for dtype in (np.float32, np.float64):
        compare(lambda lib, a: lib.nan_to_num(a), [x.astype(dtype)], grad=False)
        compare(lambda lib, a: lib.nan_to_num(a, nan=2.0, posinf=1e3, neginf=-7.0), [x.astype(dtype)], grad=False)
    compare(lambda lib, a: lib.nan_to_num(a, nan=2.0), [x], grad=True)  # gradient 1 where finite, 0 where replaced


def test_erfinv_edges_vs_torch() -> None:
    compare(lambda lib, a: lib.erfinv(a), [np.array([-1.0, -0.999, 0.0, 0.5, 1.0])], grad=False, rtol=1e-6)


BINARY = {
    "atan2": (REAL, REAL), "hypot": (REAL, REAL), "logaddexp": (REAL, REAL), "logaddexp2": (REAL, REAL),
    "xlogy": (REAL, POSITIVE),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_vs_torch(name: str) -> None:
    rng = np.random.default_rng(len(name))
    first, second = BINARY[name]
    for _ in range(DRAWS):
        shape = random_shape(rng)
        a, b = first(rng, shape), second(rng, _partner(rng, shape))
        if rng.random() < 0.5:
            a, b = b, a
            if name == "xlogy":
                a, b = b, a
        compare(lambda lib, x, y: getattr(lib, name)(x, y), [a, b])


def test_xlogy_and_logaddexp_special_values_vs_torch() -> None:
    x = np.array([0.0, 0.0, 0.0, 1.0, 2.0, -np.inf, np.inf, -np.inf])
    y = np.array([0.0, np.nan, 3.0, 0.0, np.inf, -np.inf, np.inf, 1.0])
    compare(lambda lib, a, b: lib.xlogy(a, b), [x, y], grad=False)
    compare(lambda lib, a, b: lib.logaddexp(a, b), [x, y], grad=False)
    # xlogy's gradient at x == 0 is 0 even where log(y) is -inf
    # (gradients at x == y == 0 differ on purpose: PyTorch gives NaN for y, ember 0)
    compare(lambda lib, a, b: lib.xlogy(a, b), [np.array([0.0, 1.0, 0.0]), np.array([3.0, 2.0, 5.0])])
    compare(lambda lib, a: lib.xlogy(a, 3.0), [np.array([0.0, 1.5])])


def test_atan2_quadrants_vs_torch() -> None:
    y = np.array([0.0, 0.0, -0.0, 1.0, -1.0, 1.0, -1.0, np.inf])
    x = np.array([1.0, -1.0, -1.0, 0.0, 0.0, -2.0, -2.0, 1.0])
    compare(lambda lib, a, b: lib.atan2(a, b), [y, x], grad=False)


def test_lerp_addcmul_addcdiv_vs_torch() -> None:
    rng = np.random.default_rng(3)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1)
        a, b, w = rng.standard_normal(shape), rng.standard_normal(_partner(rng, shape)), rng.uniform(-0.5, 1.5, shape)
        compare(lambda lib, x, y, z: lib.lerp(x, y, z), [a, b, w])
        weight = float(rng.uniform(-0.5, 1.5))
        compare(lambda lib, x, y: lib.lerp(x, lib.broadcast_to(y, x.shape), weight), [a, b])
        value = float(rng.uniform(-2, 2))
        c = rng.uniform(0.5, 2.0, _partner(rng, shape))
        compare(lambda lib, x, y, z: lib.addcmul(x, y, z, value=value), [a, b, c])
        compare(lambda lib, x, y, z: lib.addcdiv(x, y, z, value=value), [a, b, c])
        compare(lambda lib, x, y, z: x.addcdiv(y, z), [a, b, c])


def test_lerp_is_exact_at_the_ends() -> None:
    start, end = ember.tensor([0.1, 1e8]), ember.tensor([0.3, -3.0])
    np.testing.assert_array_equal(_np(ember.lerp(start, end, 1.0)), _np(end))
    np.testing.assert_array_equal(_np(ember.lerp(start, end, 0.0)), _np(start))


def test_clamp_min_max_isclose_count_nonzero_vs_torch() -> None:
    rng = np.random.default_rng(4)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1)
        x = rng.standard_normal(shape)
        compare(lambda lib, a: lib.clamp_min(a, 0.1), [x])
        compare(lambda lib, a: a.clamp_max(-0.1), [x])
        y = np.where(rng.random(shape) < 0.5, x, x + rng.standard_normal(shape))
        compare(lambda lib, a, b: lib.isclose(a, b, rtol=0.05, atol=0.1), [x, y], grad=False)
        ints = rng.integers(-1, 2, size=shape)
        dim = int(rng.integers(0, len(shape)))
        compare(lambda lib, a: lib.count_nonzero(a), [ints], grad=False)
        compare(lambda lib, a: lib.count_nonzero(a, dim=dim), [ints.astype(np.float32)], grad=False)
    specials = np.array([np.nan, np.inf, -np.inf, 1.0, np.inf])
    other = np.array([np.nan, np.inf, np.inf, 1.0 + 1e-9, 1e308])
    for equal_nan in (False, True):
        compare(lambda lib, a, b: lib.isclose(a, b, equal_nan=equal_nan), [specials, other], grad=False)


# ---- matrices ------------------------------------------------------------------------------------
def test_matrix_composites_vs_torch() -> None:
    rng = np.random.default_rng(5)
    for _ in range(DRAWS):
        n, k, m, b = (int(v) for v in rng.integers(1, 5, size=4))
        beta, alpha = float(rng.choice([0.0, 1.0, 0.5])), float(rng.choice([1.0, -2.0]))
        bias = rng.standard_normal(_partner(rng, (n, m)))
        compare(lambda lib, x, p, q: lib.addmm(x, p, q, beta=beta, alpha=alpha),
                [bias, rng.standard_normal((n, k)), rng.standard_normal((k, m))])
        compare(lambda lib, x, p, q: lib.addmv(x, p, q, beta=beta, alpha=alpha),
                [rng.standard_normal(_partner(rng, (n,))), rng.standard_normal((n, k)), rng.standard_normal(k)])
        compare(lambda lib, x, p, q: lib.addr(x, p, q, alpha=alpha),
                [bias, rng.standard_normal(n), rng.standard_normal(m)])
        compare(lambda lib, x, p, q: lib.baddbmm(x, p, q, beta=beta, alpha=alpha),
                [rng.standard_normal(_partner(rng, (b, n, m))), rng.standard_normal((b, n, k)),
                 rng.standard_normal((b, k, m))])
        compare(lambda lib, x, p, q: lib.addbmm(x, p, q, beta=beta, alpha=alpha),
                [bias, rng.standard_normal((b, n, k)), rng.standard_normal((b, k, m))])
        compare(lambda lib, p, q: lib.outer(p, q), [rng.standard_normal(n), rng.standard_normal(m)])
        compare(lambda lib, x, p, q: x.addmm(p, q), [bias, rng.standard_normal((n, k)), rng.standard_normal((k, m))])
    nan_bias = np.full((2, 2), np.nan)
    compare(lambda lib, x, p, q: lib.addmm(x, p, q, beta=0), [nan_bias, np.eye(2), np.ones((2, 2))], grad=False)


def test_tensordot_vs_torch() -> None:
    rng = np.random.default_rng(6)
    for _ in range(DRAWS):
        shape_a = random_shape(rng, 4, 3, min_ndim=1)
        n = int(rng.integers(0, len(shape_a) + 1))
        shape_b = shape_a[len(shape_a) - n:] + random_shape(rng, 2, 3)
        compare(lambda lib, a, b: lib.tensordot(a, b, dims=n), [rng.standard_normal(shape_a),
                                                                rng.standard_normal(shape_b)])
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5, 3))
    compare(lambda lib, x, y: lib.tensordot(x, y, dims=([1, 2], [2, 0])), [a, b])
    compare(lambda lib, x, y: lib.tensordot(x, y, dims=([-1], [0])), [a, b])


def test_diagonal_diag_trace_vs_torch() -> None:
    rng = np.random.default_rng(8)
    for _ in range(DRAWS):
        shape = random_shape(rng, 4, 4, min_ndim=2)
        d1, d2 = (int(v) for v in rng.choice(len(shape), size=2, replace=False))
        offset = int(rng.integers(-3, 4))
        x = rng.standard_normal(shape)
        compare(lambda lib, a: lib.diagonal(a, offset, d1, d2), [x])
        compare(lambda lib, a: a.diagonal(offset=offset, dim1=d1 - len(shape), dim2=d2), [x])
        v = rng.standard_normal(int(rng.integers(1, 5)))
        compare(lambda lib, a: lib.diag(a, offset), [v])
        compare(lambda lib, a: lib.diag(a, offset), [x.reshape(x.shape[0], -1)])
        compare(lambda lib, a: lib.trace(a), [x.reshape(x.shape[0], -1)])
        compare(lambda lib, a: lib.diag_embed(a, offset), [rng.standard_normal(random_shape(rng, 3, 3, 1))])
    compare(lambda lib, a: lib.trace(a), [np.arange(9).reshape(3, 3)], grad=False)


def test_masked_select_meshgrid_vs_torch() -> None:
    rng = np.random.default_rng(9)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1)
        x, mask = rng.standard_normal(_partner(rng, shape)), rng.random(shape) < 0.5
        compare(lambda lib, a, m: lib.masked_select(a, m), [x, mask])
        compare(lambda lib, a, m: a.masked_select(m), [x, mask])
        vectors = [rng.standard_normal(int(rng.integers(1, 4))) for _ in range(int(rng.integers(1, 4)))]
        for indexing in ("ij", "xy"):
            compare(lambda lib, *vs: lib.meshgrid(*vs, indexing=indexing), vectors)


# ---- scans ---------------------------------------------------------------------------------------
def test_cumprod_with_zeros_vs_torch() -> None:
    rng = np.random.default_rng(10)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1, max_size=5)
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
        x[rng.random(shape) < 0.25] = 0.0  # zero, one or several zeros per slice
        dim = int(rng.integers(-len(shape), len(shape)))
        compare(lambda lib, a: lib.cumprod(a, dim), [x])
        compare(lambda lib, a: a.cumprod(dim=dim), [x.astype(np.float32)], rtol=1e-5, atol=1e-6)
    compare(lambda lib, a: lib.cumprod(a, 0), [np.array([1, 2, 3], dtype=np.int32)], grad=False)


def test_cumprod_second_derivative_vs_torch() -> None:
    for x in (np.array([0.5, 0.0, 2.0, -1.5, 0.7]), np.array([0.5, 0.0, 2.0, 0.0, 0.7]),
              np.array([0.0, 1.5, 0.0, 0.0, 2.0]), np.array([0.3, 1.5, -2.0, 0.4, 2.0])):
        _check_cumprod_second_derivative(x)


def _check_cumprod_second_derivative(x: np.ndarray) -> None:
    results = []
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad((lib.cumprod(t, 0) * lib.tensor([1.0, 2.0, 3.0, 4.0, -1.0], dtype=t.dtype)).sum(), [t],
                                 create_graph=True)
        (h,) = lib.autograd.grad((g * lib.tensor([0.3, -1.0, 0.7, 2.0, 0.5], dtype=t.dtype)).sum(), [t])
        results.append((_np(g), _np(h)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_vs_torch(name: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1)
        dim = int(rng.integers(-len(shape), len(shape)))
        compare(lambda lib, a: getattr(lib, name)(a, dim), [_distinct(rng, shape)])
        compare(lambda lib, a: getattr(a, name)(dim), [_ties(rng, shape)], grad=False)  # ties: the later index
        compare(lambda lib, a: getattr(lib, name)(a, dim), [rng.integers(-2, 3, shape)], grad=False)
    compare(lambda lib, a: getattr(lib, name)(a, 0), [np.array([1.0, np.nan, 3.0, np.nan, 0.0])], grad=False)


# ---- sorting -------------------------------------------------------------------------------------
def test_sort_vs_torch() -> None:
    rng = np.random.default_rng(12)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1, max_size=6)
        dim = int(rng.integers(-len(shape), len(shape)))
        descending = bool(rng.random() < 0.5)
        compare(lambda lib, a: lib.sort(a, dim, descending), [_distinct(rng, shape)])
        # ties: stable=True fixes the order of equal elements, in both directions
        compare(lambda lib, a: lib.sort(a, dim=dim, descending=descending, stable=True), [_ties(rng, shape)])
        compare(lambda lib, a: a.sort(dim=dim, descending=descending, stable=True), [rng.integers(-2, 3, shape)])
        compare(lambda lib, a: lib.argsort(a, dim=dim, descending=descending, stable=True), [_ties(rng, shape)])
        compare(lambda lib, a: a.argsort(dim), [_distinct(rng, shape)])
    compare(lambda lib, a: lib.sort(a, descending=True, stable=True), [np.array([True, False, True, False])])
    compare(lambda lib, a: lib.sort(a), [np.array(2.5)])
    compare(lambda lib, a: lib.sort(a, descending=True), [np.array([1.0, np.nan, -np.inf, 3.0])], grad=False)
    compare(lambda lib, a: lib.sort(a), [np.array([1.0, np.nan, -np.inf, 3.0])], grad=False)


def test_topk_kthvalue_vs_torch() -> None:
    rng = np.random.default_rng(13)
    for _ in range(DRAWS):
        shape = random_shape(rng, min_ndim=1, max_size=6)
        dim = int(rng.integers(-len(shape), len(shape)))
        k = int(rng.integers(1, shape[dim] + 1))
        largest = bool(rng.random() < 0.7)
        x = _distinct(rng, shape)
        compare(lambda lib, a: lib.topk(a, k, dim, largest=largest), [x])
        compare(lambda lib, a: a.topk(k, dim=dim), [x])
        compare(lambda lib, a: lib.kthvalue(a, k, dim, keepdim=bool(k % 2)), [x])
        compare(lambda lib, a: a.kthvalue(k, dim), [x.astype(np.float32)], rtol=1e-6)


def test_named_tuples() -> None:
    x = ember.tensor([[3.0, 1.0, 2.0]])
    for result in (ember.sort(x), ember.topk(x, 2), ember.kthvalue(x, 1), ember.cummax(x, 1), ember.cummin(x, 1),
                   x.sort(descending=True), x.topk(1, largest=False)):
        values, indices = result
        assert result.values is values and result.indices is indices
        assert indices.dtype is ember.int64
    assert ember.sort(x).indices.tolist() == [[1, 2, 0]]
    assert ember.topk(x, 2).indices.tolist() == [[0, 2]]


def test_sort_gradient_flows_through_the_permutation() -> None:
    x = ember.tensor([3.0, 1.0, 2.0], requires_grad=True)
    (ember.sort(x).values * ember.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [100.0, 1.0, 10.0]
    y = ember.tensor([[4.0, 9.0, 1.0]], requires_grad=True)
    ember.topk(y, 2).values.sum().backward()
    assert y.grad.tolist() == [[1.0, 1.0, 0.0]]


def test_unique_vs_torch() -> None:
    rng = np.random.default_rng(14)
    for _ in range(DRAWS):
        shape = random_shape(rng, max_size=5)
        x = rng.integers(-3, 4, shape)
        for inverse in (False, True):
            for counts in (False, True):
                compare(lambda lib, a: lib.unique(a, return_inverse=inverse, return_counts=counts), [x])
        # (PyTorch marks a float result as requiring grad, then fails in backward; ember gives no grad)
        compare(lambda lib, a: a.unique(sorted=True, return_counts=True), [x.astype(np.float32)], grad=False)
        if len(shape) >= 1:
            rows = np.concatenate([x.reshape(shape[0], -1)] * 2)[rng.permutation(2 * shape[0])]
            compare(lambda lib, a: lib.unique(a, dim=0, return_inverse=True, return_counts=True), [rows])


def test_unique_has_no_gradient() -> None:
    x = ember.tensor([1.0, 2.0, 1.0], requires_grad=True)
    values, inverse, counts = ember.unique(x, return_inverse=True, return_counts=True)
    assert not values.requires_grad and not inverse.requires_grad and not counts.requires_grad
    assert values.grad_fn is None


def test_searchsorted_bucketize_vs_torch() -> None:
    rng = np.random.default_rng(15)
    for _ in range(DRAWS):
        n = int(rng.integers(1, 6))
        seq = np.sort(rng.integers(-3, 4, n)).astype(np.float64)
        values = rng.integers(-4, 5, random_shape(rng)).astype(np.float64)
        for right in (False, True):
            compare(lambda lib, s, v: lib.searchsorted(s, v, right=right), [seq, values], grad=False)
            compare(lambda lib, v, s: lib.bucketize(v, s, right=right), [values, seq], grad=False)
        batch = np.sort(rng.standard_normal((2, 3, n)), -1)
        compare(lambda lib, s, v: lib.searchsorted(s, v, side="right"), [batch, rng.standard_normal((2, 3, 4))],
                grad=False)
    compare(lambda lib, s, v: lib.searchsorted(s, v, out_int32=True), [np.arange(4.0), np.array([1.5, 9.0])],
            grad=False)


# ---- Tensor methods -------------------------------------------------------------------------------
def test_new_constructors_follow_the_source_tensor() -> None:
    for lib in (ember, torch):
        base = lib.ones(2, dtype=lib.float64)
        assert base.new_zeros(2, 3).dtype == lib.float64 and tuple(base.new_zeros((2, 3)).shape) == (2, 3)
        assert base.new_ones(4).sum().item() == 4 and base.new_ones(4).dtype == lib.float64
        full = base.new_full((2, 2), 7)
        assert full.dtype == lib.float64 and full.tolist() == [[7.0, 7.0], [7.0, 7.0]]
        assert tuple(base.new_empty(3, 1).shape) == (3, 1)
        t = base.new_tensor([1, 2])
        assert t.dtype == lib.float64 and t.tolist() == [1.0, 2.0]
        assert base.new_zeros(2, dtype=lib.int32).dtype == lib.int32
        assert base.new_ones(2, requires_grad=True).requires_grad
        src = lib.tensor([1.0, 2.0], requires_grad=True)
        copy = base.new_tensor(src)
        assert not copy.requires_grad and copy.tolist() == [1.0, 2.0]


def test_softmax_methods_vs_torch() -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 3, 4))
    for dim in (0, 1, -1):
        compare(lambda lib, a: a.softmax(dim), [x])
        compare(lambda lib, a: a.log_softmax(dim=dim), [x])
    compare(lambda lib, a: a.softmax(-1, dtype=lib.float64), [x.astype(np.float32)])


def test_fmod_method_keeps_the_dividend_sign() -> None:
    compare(lambda lib, a, b: a.fmod(b), [np.array([-3.0, 3.0, -3.5]), np.array([2.0, -2.0, 2.0])])


def test_inplace_variants_vs_torch() -> None:
    rng = np.random.default_rng(17)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.uniform(0.5, 2, (3,))

    def run(lib: Any, x: Any, y: Any, z: Any) -> Any:
        h = x * 1.0  # a non-leaf: its in-place updates are recorded
        h.addcmul_(y, z, value=0.5)
        h.addcdiv_(y, z, value=-2)
        h.lerp_(y, 0.3)
        h.lerp_(y, z * 0.2)
        h.square_()
        return h

    compare(run, [a, b, c])
    # optimizer style: leaves updated under no_grad
    for lib in (ember, torch):
        p = lib.tensor(a.copy(), requires_grad=True)
        with lib.no_grad():
            p.addcdiv_(lib.tensor(b), lib.tensor(c), value=-0.1)
        np.testing.assert_allclose(_np(p), a - 0.1 * b / c, rtol=1e-12)
        assert p.requires_grad and p.grad_fn is None


def test_inplace_variants_follow_inplace_rules() -> None:
    leaf = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="addcmul_.*leaf"):
        leaf.addcmul_(ember.ones(3), ember.ones(3))
    # a tensor saved for backward and then changed in place is caught at backward time
    x = ember.ones(3, requires_grad=True)
    h = x * 2.0
    out = (h * h).sum()
    h.square_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    # a plain tensor updated with an operand that requires grad records the update
    base, t1 = ember.zeros(3), ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base.addcmul_(t1, ember.tensor([2.0, 2.0, 2.0]))
    assert base.requires_grad
    base.sum().backward()
    assert t1.grad.tolist() == [2.0, 2.0, 2.0]
    v = ember.tensor([2.0, -3.0])
    assert v.square_() is v and v.tolist() == [4.0, 9.0]


# ---- errors --------------------------------------------------------------------------------------
def test_errors_name_the_op_and_the_fix() -> None:
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="topk: k \\(4\\)"):
        ember.topk(x, 4)
    with pytest.raises(RuntimeError, match="kthvalue"):
        ember.kthvalue(x, 0)
    with pytest.raises(RuntimeError, match="tensordot"):
        ember.tensordot(x, ember.ones(2, 3), dims=1)
    with pytest.raises(RuntimeError, match="diagonal: dim1 and dim2"):
        ember.diagonal(x, 0, 1, 1)
    with pytest.raises(RuntimeError, match="outer"):
        ember.outer(x, x)
    with pytest.raises(RuntimeError, match="addmm"):
        ember.addmm(x, ember.ones(3), ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="trace"):
        ember.trace(ember.ones(3))
    with pytest.raises(RuntimeError, match="masked_select"):
        ember.masked_select(x, ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="searchsorted"):
        ember.searchsorted(ember.ones(2, 3), ember.ones(3, 3))


def test_compiled_step_through_sort_and_cumprod_matches_eager() -> None:
    w = ember.tensor([0.3, -1.2, 0.8, 2.0], requires_grad=True)
    x = ember.tensor([1.0, 0.5, -2.0, 1.5])

    def step(inp: Any) -> Any:
        loss = (ember.sort(w * inp, descending=True).values.cumprod(0)).sum() + ember.topk(w, 2).values.sum()
        loss.backward()
        return loss

    compiled = ember.compile(step)
    loss_c = compiled(x)
    grad_c = w.grad.clone()
    w.grad = None
    loss_e = step(x)
    np.testing.assert_allclose(_np(loss_c), _np(loss_e), rtol=1e-6)
    np.testing.assert_allclose(_np(grad_c), _np(w.grad), rtol=1e-6)


def test_new_elementwise_ops_fuse_in_compiled_graphs() -> None:
    def f(x: Any, y: Any) -> Any:
        return (ember.atan2(ember.sinh(x) * 0.5, ember.expm1(y)) + ember.trunc(x * 3) + ember.asin(ember.tanh(y))
                + ember.log2(x.abs() + 1) + ember.exp2(y) + ember.erfinv(ember.tanh(x)) + ember.cumprod(x, 1))

    compiled = ember.compile(f)
    x, y = ember.randn(3, 4), ember.randn(3, 4)
    for _ in range(3):  # traced on a later call
        result = compiled(x, y)
    assert "fused" in compiled.explain()
    np.testing.assert_allclose(_np(result), _np(f(x, y)), rtol=1e-6, atol=1e-6)
