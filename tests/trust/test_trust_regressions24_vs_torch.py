"""Classes the program fuzzer (tools/fuzz_vs_torch.py, trust24) found, each checked against torch 2.13 on the CPU:
values, dtypes, strides, aliasing (a write through the result reaches the input) and gradients at special points."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402

NAN, INF = float("nan"), float("inf")


def _both(fn):
    """fn(L) for torch and ember, as plain lists/tuples (bfloat16 through float32)."""
    out = []
    for L in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(fn(L))
    return out


def _plain(t):
    t = t.detach()
    dtype = str(t.dtype).split(".")[-1]
    return dtype, tuple(t.shape), (t.float() if dtype == "bfloat16" else t).numpy().tolist()


def _same(a, b):
    np.testing.assert_equal(a, b)


@pytest.mark.parametrize("eq,shape", [("ij->ji", (3, 3)), ("ii->i", (3, 3)), ("ij", (2, 3)), ("ji", (2, 3)),
                                      ("...->...", (2, 3)), ("i...->...i", (2, 3)), ("bij->bji", (2, 3, 4)),
                                      ("iij->ji", (3, 3, 2)), ("b...->...b", (2, 3, 4))])
def test_einsum_of_one_operand_without_sums_is_a_view(eq, shape):
    def run(L):
        x = L.arange(float(np.prod(shape))).reshape(shape)
        y = L.einsum(eq, x)
        strides = y.stride()
        y.mul_(-1)  # a view: the write reaches x
        return _plain(y), strides, _plain(x)

    _same(*_both(run))


def test_einsum_with_sums_still_copies():
    def run(L):
        x = L.arange(9.0).reshape(3, 3)
        y = L.einsum("ij->i", x)
        y.zero_()
        return _plain(x), _plain(L.einsum("ii", x))

    _same(*_both(run))


def test_nonzero_and_argwhere_are_column_major():
    def run(L):
        x = L.tensor([[1, 0, 2], [0, 3, 4]])
        flat = x.nonzero().flatten()  # torch must copy: the (N, 2) result has strides (1, N)
        return (x.nonzero().stride(), L.argwhere(x).stride(), x.nonzero().is_contiguous(), _plain(x.nonzero()),
                L.ones(5).nonzero().stride(), _plain(flat))

    _same(*_both(run))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32"])
def test_unary_of_an_expanded_input_is_row_major(dtype):
    def run(L):
        a = L.arange(6.0).reshape(3, 2).to(getattr(L, dtype))
        x = a.unsqueeze(1).expand(-1, 2, 2)
        ops = [L.neg(x), L.abs(x), x.clamp(max=3), L.isfinite(x), x.permute(2, 1, 0).neg(),
               L.isfinite(x.permute(2, 1, 0))]
        if dtype != "int32":
            ops += [L.trunc(x), L.exp2(x), L.sqrt(x), L.sigmoid(x)]
        return [(t.stride(), t.is_contiguous(), _plain(t)) for t in ops]

    _same(*_both(run))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_logit_keeps_half_dtypes_under_autograd(dtype):
    def run(L):
        x = L.tensor([0.3, 0.5, -0.5, 2.0, 0.0, 1.0]).to(getattr(L, dtype)).requires_grad_()
        y = L.logit(x)
        y.sum().backward()
        return y.dtype == x.dtype, x.grad.dtype == x.dtype, _plain(y), _plain(x.grad)

    got, want = _both(run)
    _same(got[:3], want[:3])
    assert got[3][:2] == want[3][:2]
    # half gradients: ember's composite rounds each step (an ulp of float16 at 4.76), torch's kernel once
    np.testing.assert_allclose(got[3][2], want[3][2], rtol=2e-3 if "16" in dtype else 1e-6)


def test_xlog1py_with_a_python_number_keeps_the_default_float():
    def run(L):
        i, b, f = L.tensor([1, 2]), L.tensor([True, False]), L.tensor([1.0, 2.0])
        cases = [L.special.xlog1py(i, 1), L.special.xlog1py(b, 1.5), L.special.xlog1py(f, 1), L.special.xlog1py(f, 0.5),
                 L.special.xlog1py(f.half(), 2), L.special.xlog1py(f.double(), 3)]
        return [_plain(t) for t in cases]

    got, want = _both(run)
    for g, w in zip(got, want):
        assert g[:2] == w[:2]
        np.testing.assert_allclose(g[2], w[2], rtol=1e-6)


def test_block_diag_promotes_zero_dim_tensors_as_numbers():
    def run(L):
        u = L.tensor([[10, 6, 0]], dtype=L.uint8)
        return [L.block_diag(u, L.tensor(-3, dtype=L.int32)).dtype == L.uint8,
                L.block_diag(u, L.tensor([-3], dtype=L.int32)).dtype == L.int32,
                L.block_diag(L.tensor(1.5), L.tensor([[1, 2]])).dtype == L.int64]

    _same(*_both(run))


def test_trapezoid_is_torchs_formula_bit_for_bit():
    rng = np.random.default_rng(24)

    def run(L):
        out = []
        for dt in ["int16", "uint8", "int64", "float16", "bfloat16", "float32", "float64"]:
            for k in range(12):
                shape = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(1, 4))))
                v = rng.standard_normal(shape) * 100
                if k % 3 == 0:
                    v.flat[int(rng.integers(v.size))] = [INF, -INF, NAN, 32766][k % 4]
                with np.errstate(all="ignore"):
                    t = L.tensor(v.astype("float32" if dt == "bfloat16" else dt))
                t = t.to(L.bfloat16) if dt == "bfloat16" else t
                dim = int(rng.integers(len(shape)))
                r = L.trapezoid(t, dim=dim) if k % 2 else L.trapezoid(t, dx=[0.1, 2.5][k % 4 // 2], dim=dim)
                out.append(_plain(r))
        return out

    state = rng.bit_generator.state
    want = run(torch)
    rng.bit_generator.state = state
    got = run(ember)
    _same(got, want)


@pytest.mark.parametrize("fn", ["std", "var"])
@pytest.mark.parametrize("correction", [0, 1, 2, 3, 5.5])
@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_std_var_gradient_when_correction_reaches_the_count(fn, correction, dtype):
    def run(L):
        x = L.tensor([1.5, 2.5, -1.0]).to(getattr(L, dtype)).requires_grad_()
        getattr(L, fn)(x, 0, correction=correction).backward()
        return _plain(x.grad)

    got, want = _both(run)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-2 if "16" in dtype else 1e-12)


@pytest.mark.parametrize("upstream", [1.0, NAN, INF])
def test_full_max_min_gradient_is_zero_off_the_extremum_for_any_upstream(upstream):
    def run(L):
        out = []
        for reduce in ("max", "min"):
            x = L.tensor([0.5, 3.0, 3.0, -1.0]).requires_grad_()
            (getattr(x, reduce)() * upstream).backward()
            out.append(_plain(x.grad))
        return out

    _same(*_both(run))


def test_maximum_minimum_clamp_gradients_at_nan():
    def run(L):
        out = []
        x = L.tensor([NAN, 1.0, 0.5, 2.0, 1.0, 3.0]).requires_grad_()
        m = L.tensor([1.0, 1.0, 1.0, NAN, 1.0, 2.0]).requires_grad_()
        top = L.tensor([2.0, 2.0, 2.0, 2.0, NAN, 2.0]).requires_grad_()
        w = L.arange(6.0)
        for f in (lambda: L.maximum(x, m), lambda: L.minimum(x, m), lambda: L.clamp(x, min=m),
                  lambda: L.clamp(x, max=m), lambda: L.clamp(x, min=m, max=top), lambda: L.clamp(x, min=L.tensor(1.0))):
            for t in (x, m, top):
                t.grad = None
            y = f()
            (y * w).sum().backward()
            out.append((_plain(y), [None if t.grad is None else _plain(t.grad) for t in (x, m, top)]))
        return out

    _same(*_both(run))


def test_nextafter_gradient_is_zero_where_equal_and_in_the_inputs_dtype():
    def run(L):
        x = L.tensor([1.9999999, 2.0, 3.0, NAN, 1.0], requires_grad=True)
        y = L.tensor([2.0, 2.0, 2.0, 1.0, NAN], requires_grad=True)
        (L.nextafter(x, y) * L.arange(5.0)).sum().backward()
        x1 = L.tensor([-1.5, 2.0], requires_grad=True)
        y1 = L.tensor(2.0, dtype=L.float64, requires_grad=True)
        r = L.nextafter(x1, y1)
        (r * 3).sum().backward()
        return _plain(x.grad), _plain(y.grad), _plain(r), _plain(x1.grad), _plain(y1.grad)

    _same(*_both(run))


def test_copysign_requires_grad_through_its_sign_operand():
    def run(L):
        y = L.tensor([1.0, -2.0]).to(L.bfloat16).requires_grad_()
        c = L.copysign(L.tensor(-1, dtype=L.int16), y)
        rg = c.requires_grad
        c.sum().backward()
        return rg, _plain(c), _plain(y.grad)

    _same(*_both(run))


def test_nan_to_num_gradient_is_upstream_times_isfinite():
    def run(L):
        x = L.tensor([NAN, INF, -INF, 1.0, 2.0], requires_grad=True)
        y = L.nan_to_num(x, nan=0.0, posinf=1.0)
        (y * L.tensor([1.0, 2.0, 3.0, NAN, 5.0])).sum().backward()
        return _plain(y), _plain(x.grad)

    _same(*_both(run))


def test_flatten_without_merging_returns_the_tensor_itself():
    def run(L):
        a = L.tensor([1.0, 2.0, 3.0])
        b = a.permute(0)
        b.flatten().unsqueeze_(0)  # torch: flatten() of a 1-d tensor is the tensor, so b becomes (1, 3)
        c = L.ones(2, 3)
        return a.flatten() is a, c.flatten(1, 1) is c, tuple(b.shape), tuple(L.zeros(()).flatten().shape)

    _same(*_both(run))


def test_angle_of_real_input_has_zero_gradient_for_any_upstream():
    def run(L):
        x = L.tensor([0.25, -1.0, 0.0], requires_grad=True)
        (L.angle(x) * L.tensor([NAN, INF, -2.0])).sum().backward()
        return _plain(x.grad)

    _same(*_both(run))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_pow_exponent_gradient_at_zero_base_keeps_a_nan_upstream(dtype):
    def run(L):
        b = L.tensor([0.0, 0.0, 2.0, -1.0, 0.0]).to(getattr(L, dtype)).requires_grad_()
        e = L.tensor([100.0, -1.0, 0.5, 2.0, 0.0]).to(getattr(L, dtype)).requires_grad_()
        (L.pow(b, e) * L.tensor([NAN, 1.0, 1.0, 2.0, INF]).to(getattr(L, dtype))).sum().backward()
        return _plain(e.grad), _plain(b.grad)

    _same(*_both(run))


def test_trunc_division_by_a_half_zero_dim_tensor_keeps_the_float64_result():
    def run(L):
        a = L.tensor([2.35, 1e-30, -0.0], dtype=L.float64)
        h = L.tensor(0.95, dtype=L.float16, requires_grad=True)
        r = L.div(a, h, rounding_mode="trunc")
        r.sum().backward()
        x = L.tensor([3.8, -0.5]).to(L.bfloat16).requires_grad_()
        y = L.tensor(1.0, dtype=L.float16, requires_grad=True)
        q = L.div(x, y, rounding_mode="trunc")
        q.sum().backward()
        return _plain(r), _plain(h.grad), _plain(q), _plain(x.grad), _plain(y.grad)

    _same(*_both(run))
