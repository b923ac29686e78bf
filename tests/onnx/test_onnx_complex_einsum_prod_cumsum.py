"""Complex einsum, prod and cumsum exported to ONNX (real Einsums of the parts, a tree of complex multiplies, CumSum
on the (..., 2) pairs) and run in onnxruntime, against torch 2.13's complex results and ember's eager ones: random
values, every reduction axis and keepdim, odd/even/one/zero lengths, real operands mixed in, special values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import ember.onnx as eonnx  # noqa: E402

RNG = np.random.default_rng(23)


def _complex(shape, dtype="complex128", scale=1.0):
    z = (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)) * scale
    return z.astype(dtype)


def _exported(fn, arrays):
    """onnxruntime's results of the exported ``fn`` and ember's eager ones."""
    tensors = [ember.tensor(a) for a in arrays]
    model = eonnx.export(fn, tuple(tensors), None)
    got = eonnx.run(model, list(arrays))
    eager = fn(*tensors)
    eager = eager if isinstance(eager, tuple) else (eager,)
    return got, [e.numpy() for e in eager]


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-13) if np.dtype(dtype) == np.complex128 else dict(rtol=2e-5, atol=2e-6)


EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("i,i->", [(6,), (6,)]),
    ("ii->i", [(4, 4)]),
    ("ij->ji", [(3, 5)]),
    ("...ij,...j->...i", [(2, 3, 4), (2, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("i,j", [(3,), (4,)]),  # implicit output: the outer product
]


@pytest.mark.parametrize("equation,shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_einsum_exports(equation, shapes, dtype):
    arrays = [_complex(s, dtype) for s in shapes]
    (got,), (eager,) = _exported(lambda *t: ember.einsum(equation, *t), arrays)
    want = torch.einsum(equation, *[torch.from_numpy(a) for a in arrays]).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **_tol(dtype))
    np.testing.assert_allclose(eager, want, **_tol(dtype))


def test_complex_einsum_with_a_real_operand_and_conjugates():
    a, w = _complex((3, 4)), RNG.standard_normal((4, 2)).astype(np.complex128).real.copy()
    b = _complex((3, 4))
    (got,), (eager,) = _exported(lambda x, y, r: ember.einsum("ij,ij->i", x.conj(), y) + ember.einsum(
        "ij,jk->ik", x, r.to(ember.complex128)).sum(1), [a, b, w])
    want = np.einsum("ij,ij->i", a.conj(), b) + (a @ w).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(eager, want, rtol=1e-12, atol=1e-13)


def test_einsum_of_too_many_complex_operands_is_refused_by_name():
    zs = [ember.tensor(_complex((2, 2))) for _ in range(5)]
    with pytest.raises(NotImplementedError, match=r"einsum of 5 complex operands is not exported.*2\^5"):
        eonnx.export(lambda *t: ember.einsum("ab,bc,cd,de,ef->af", *t), tuple(zs), None)


@pytest.mark.parametrize("length", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_prod_over_one_axis_exports(length, dtype):
    z = _complex((3, length, 2), dtype, scale=0.8)
    for dim in (1, -2):
        for keepdim in (False, True):
            (got,), (eager,) = _exported(lambda t: t.prod(dim, keepdim=keepdim), [z])
            want = torch.from_numpy(z).prod(dim, keepdim=keepdim).numpy()
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, **_tol(dtype))
            np.testing.assert_allclose(eager, want, **_tol(dtype))


def test_complex_prod_of_everything_and_of_empty_axes():
    z = _complex((3, 7, 2), scale=0.9)
    (got,), _ = _exported(lambda t: t.prod(), [z])
    np.testing.assert_allclose(got, torch.from_numpy(z).prod().numpy(), rtol=1e-12)
    empty = _complex((3, 0, 2))
    (got,), (eager,) = _exported(lambda t: t.prod(1), [empty])
    want = torch.from_numpy(empty).prod(1).numpy()
    np.testing.assert_array_equal(got, want)  # 1 + 0i for every empty product
    np.testing.assert_array_equal(eager, want)


def test_complex_prod_special_values():
    """Exact zeros, signed zeros and large values multiply as they do eagerly (finite results; inf*0 NaN cases
    follow the four-term product, whose order differs from NumPy's sequential one: not compared)."""
    z = np.array([[1 + 0j, 0j, 2 - 1j], [-0.0 - 0j, 1e150 + 1e150j, 1e150 - 1e150j], [1j, 1j, 1j]])
    (got,), (eager,) = _exported(lambda t: t.prod(1), [z])
    want = torch.from_numpy(z).prod(1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(eager, want, rtol=1e-14)


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_cumsum_exports(dtype):
    z = _complex((3, 5, 4), dtype)
    for dim in (0, 1, 2, -1, -3):
        (got,), (eager,) = _exported(lambda t: t.cumsum(dim), [z])
        want = torch.from_numpy(z).cumsum(dim).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **_tol(dtype))
        np.testing.assert_allclose(eager, want, **_tol(dtype))
    special = np.array([np.inf + 0j, 1j, np.nan + 1j, -np.inf * 1j]).astype(dtype)
    (got,), _ = _exported(lambda t: t.cumsum(0), [special])
    np.testing.assert_array_equal(got, torch.from_numpy(special).cumsum(0).numpy())


def test_cumsum_of_a_real_input_into_a_complex_dtype():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    (got,), (eager,) = _exported(lambda t: ember.cumsum(t, 0, dtype=ember.complex128), [x])
    want = torch.cumsum(torch.from_numpy(x), 0, dtype=torch.complex128).numpy()
    assert got.dtype == want.dtype == eager.dtype
    np.testing.assert_allclose(got, want, rtol=1e-7)


# ---- reciprocal, rsqrt, sigmoid, log2, log10, log1p, expm1 of complex values --------------------------------------
_EDGE = np.array([-0.0, 1e-9, -1e-9, 0.3, 1.0, -1.0, 2.5, -7.0, 30.0, -30.0, 1e200])
SPECIAL = (_EDGE[:, None] + 0j).repeat(len(_EDGE), 1)
SPECIAL.imag = _EDGE[None, :] + 1e-3  # no exact zero: 1/0 and log(0) are not compared (inf/NaN by convention)
FORMULAS = ["reciprocal", "rsqrt", "sigmoid", "log2", "log10", "log1p", "expm1"]


def _close(got, want, tol, where):
    assert got.dtype == want.dtype and got.shape == want.shape, where
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=where)
    error = np.abs(got[finite] - want[finite]) / np.maximum(np.abs(want[finite]), 1.0)
    assert error.max(initial=0) <= tol, f"{where}: worst relative error {error.max():.2e}"


@pytest.mark.parametrize("name", FORMULAS)
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("points", ["random", "special"])
def test_complex_functions_export_against_torch(name, dtype, points):
    if dtype == "complex64" and points == "special":
        z = SPECIAL[:-1, :-1].astype(dtype)  # 1e200 is beyond float32
    else:
        z = (_complex((4, 6), scale=2.0) if points == "random" else SPECIAL).astype(dtype)
    (got,), (eager,) = _exported(lambda t: getattr(ember, name)(t), [z])
    want = getattr(torch, name)(torch.from_numpy(z)).numpy()
    tol = 1e-14 if dtype == "complex128" else 4e-6
    _close(got, want, tol, f"{name} {dtype} {points} onnx vs torch")
    _close(eager, want, tol, f"{name} {dtype} {points} eager vs torch")


def test_real_inputs_of_these_functions_still_export_the_plain_ops():
    x = np.abs(RNG.standard_normal((3, 4))) + 0.1
    for dtype in (np.float32, np.float64):
        for name in FORMULAS:
            fn = (lambda t, n=name: getattr(ember, n)(t))
            got = eonnx.run(eonnx.export(fn, (ember.tensor(x.astype(dtype)),), None), [x.astype(dtype)])[0]
            np.testing.assert_allclose(got, fn(ember.tensor(x.astype(dtype))).numpy(),
                                       rtol=1e-6 if dtype == np.float32 else 1e-14, err_msg=name)
