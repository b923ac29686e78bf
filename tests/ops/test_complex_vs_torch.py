"""Complex dtypes against torch 2.13: promotion, creation, elementwise values and gradients at random and
special points (0, inf, NaN in either component), reductions, the complex records, linalg.eig, errors.

Gradients follow PyTorch's convention (dL/dRe + i dL/dIm for a real loss); every expected value here is
torch's, computed on the same inputs.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_NAMES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
# ember has no complex32 (torch's result for float16 with complex): it gives complex64 there.
_COMPLEX32 = {("float16", "complex64"), ("float16", "complex128"), ("complex64", "float16"),
              ("complex128", "float16")}


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().resolve_conj().numpy()


def _rand_complex(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# ---- dtypes -------------------------------------------------------------------------------------------
def test_promotion_table_matches_torch() -> None:
    checked = 0
    for a, b in itertools.product(_NAMES, repeat=2):
        for da, db in ((1, 1), (1, 0), (0, 1), (0, 0)):
            ta, tb = torch.ones([2] * da, dtype=getattr(torch, a)), torch.ones([2] * db, dtype=getattr(torch, b))
            ea, eb = ember.ones([2] * da, dtype=getattr(ember, a)), ember.ones([2] * db, dtype=getattr(ember, b))
            want = str(torch.result_type(ta, tb)).replace("torch.", "")
            got = ember.result_type(ea, eb).name
            if want == "complex32":
                assert (a, b) in _COMPLEX32 or (b, a) in _COMPLEX32, (a, b, da, db)
                assert got == "complex64"
                continue
            assert got == want, (a, b, da, db, got, want)
            checked += 1
    for a in _NAMES:
        for scalar in (1j, 2.5, 3, True):
            want = str(torch.result_type(torch.ones(2, dtype=getattr(torch, a)), scalar)).replace("torch.", "")
            got = ember.result_type(ember.ones(2, dtype=getattr(ember, a)), scalar).name
            assert got == ("complex64" if want == "complex32" else want), (a, scalar)
    assert checked > 350


def test_dtype_names_and_defaults() -> None:
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert ember.complex64.is_complex and not ember.complex64.is_floating_point
    assert ember.float32.to_complex() is ember.complex64 and ember.complex128.to_real() is ember.float64
    assert ember.tensor([1 + 2j]).dtype is ember.complex64
    assert ember.tensor(np.array([1j], np.complex128)).dtype is ember.complex128
    assert ember.tensor(np.complex64(1j)).dtype is ember.complex64
    assert ember.zeros(2, dtype=ember.cfloat).dtype is ember.complex64
    assert ember.full((2,), 1 + 1j).dtype is ember.complex64
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1j]).dtype is ember.complex128
        assert (ember.ones(2) * 1j).dtype is ember.complex128
    finally:
        ember.set_default_dtype(ember.float32)
    z = ember.tensor([1 + 2j, 3 - 4j])
    assert ember.is_complex(z) and z.is_complex() and not ember.is_complex(z.real)
    assert complex(z[1]) == 3 - 4j and z.tolist() == [1 + 2j, 3 - 4j]
    assert (ember.arange(3) * 1j).dtype is ember.complex64  # integers with a Python complex: the default
    assert z.cdouble().dtype is ember.complex128 and z.cdouble().cfloat().dtype is ember.complex64


def test_randn_complex_has_variance_one_half_per_part() -> None:
    ember.manual_seed(0)
    z = ember.randn(200_000, dtype=ember.complex128)
    assert z.dtype is ember.complex128
    for part in (z.real, z.imag):
        assert abs(part.mean().item()) < 0.01
        assert abs(part.var().item() - 0.5) < 0.01
    assert abs((z.abs() ** 2).mean().item() - 1.0) < 0.01
    u = ember.rand(100_000, dtype=ember.complex64)
    assert 0 <= u.real.min().item() and u.imag.max().item() < 1 and abs(u.imag.mean().item() - 0.5) < 0.01
    assert ember.randn(3, 4, dtype=ember.cfloat, requires_grad=True).requires_grad


# ---- elementwise: values at special points, gradients at random points -----------------------------------
_SPECIAL_PARTS = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e30]
_SPECIAL = np.array([complex(a, b) for a, b in itertools.product(_SPECIAL_PARTS, repeat=2)])

UNARY = {
    "neg": lambda L, z: -z, "exp": lambda L, z: L.exp(z), "log": lambda L, z: L.log(z),
    "sqrt": lambda L, z: L.sqrt(z), "abs": lambda L, z: L.abs(z), "sin": lambda L, z: L.sin(z),
    "cos": lambda L, z: L.cos(z), "tanh": lambda L, z: L.tanh(z), "sigmoid": lambda L, z: L.sigmoid(z),
    "reciprocal": lambda L, z: L.reciprocal(z), "square": lambda L, z: z * z, "pow3": lambda L, z: z ** 3,
    "angle": lambda L, z: L.angle(z), "conj": lambda L, z: L.conj(z), "real": lambda L, z: z.real,
    "imag": lambda L, z: z.imag, "sgn": lambda L, z: L.sgn(z), "isnan": lambda L, z: L.isnan(z),
    "isinf": lambda L, z: L.isinf(z), "isfinite": lambda L, z: L.isfinite(z), "eq0": lambda L, z: z == 0,
    "rsqrt": lambda L, z: L.rsqrt(z), "log1p": lambda L, z: L.log1p(z), "expm1": lambda L, z: L.expm1(z),
    "sinh": lambda L, z: L.sinh(z), "cosh": lambda L, z: L.cosh(z), "tan": lambda L, z: L.tan(z),
    "atan": lambda L, z: L.atan(z), "asin": lambda L, z: L.asin(z), "log2": lambda L, z: L.log2(z),
    "mul_scalar": lambda L, z: z * (2 - 3j), "div_scalar": lambda L, z: z / (0.5 + 1j),
}
# The only differences found at these 64 points: log1p with an infinite and a NaN component (NumPy's C99
# log1p gives inf + nan j, torch nan + nan j) and sgn with an infinite component (z / |z| is NaN in both
# parts in ember, torch keeps a 0 real part). There, both must still be non-finite.
_NONFINITE_DIFFERS = {"log1p", "sgn"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_points_match_torch(name: str) -> None:
    fn = UNARY[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = _np(fn(torch, torch.tensor(_SPECIAL)))
        got = fn(ember, ember.tensor(_SPECIAL)).numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
        return
    check = np.ones(_SPECIAL.shape, bool)
    if name in _NONFINITE_DIFFERS:
        check = np.isfinite(_SPECIAL)
        assert not np.isfinite(got[~check]).any() and not np.isfinite(want[~check]).any()
    scale = np.where(np.isfinite(np.abs(want)), np.abs(want), 0)  # a rounding of a*a - b*b is relative to |z|^2
    for part in (np.real, np.imag):
        g, w = part(got[check]), part(want[check])
        close = np.isclose(g, w, rtol=1e-12, atol=0, equal_nan=True) | (np.abs(g - w) <= 1e-15 * scale[check])
        assert close.all(), (name, _SPECIAL[check][~close], got[check][~close], want[check][~close])


@pytest.mark.parametrize("name", sorted(n for n in UNARY if n not in ("isnan", "isinf", "isfinite", "eq0")))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unary_gradients_match_torch(name: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    z = (_rand_complex(rng, (3, 4)) * 0.8).astype(dtype)
    fn = UNARY[name]
    tz, ez = torch.tensor(z, requires_grad=True), ember.tensor(z, requires_grad=True)
    ty, ey = fn(torch, tz), fn(ember, ez)
    assert ey.dtype.name == str(ty.dtype).replace("torch.", "")
    w = _rand_complex(rng, tuple(ty.shape)) if ty.is_complex() else rng.standard_normal(tuple(ty.shape))
    tl = (ty * torch.tensor(w)).real.sum() if ty.is_complex() else (ty * torch.tensor(w)).sum()
    el = (ey * ember.tensor(w)).real.sum() if ey.dtype.is_complex else (ey * ember.tensor(w)).sum()
    tl.backward()
    el.backward()
    assert ez.grad.dtype.name == dtype
    tol = 1e-12 if dtype == "complex128" else 2e-5
    np.testing.assert_allclose(ez.grad.numpy(), _np(tz.grad), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,fn", [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("pow", lambda a, b: a ** b), ("matmul", lambda a, b: a @ b.mT),
    ("mixed_real", lambda a, b: a.real * b + a), ("where", lambda a, b: torch_or_ember(a).where(a.real > 0, a, b)),
])
def test_binary_values_and_gradients_match_torch(name: str, fn) -> None:
    rng = np.random.default_rng(1)
    a, b = _rand_complex(rng, (3, 4)), _rand_complex(rng, (1, 4))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ty, ey = fn(ta, tb), fn(ea, eb)
    np.testing.assert_allclose(ey.detach().numpy(), _np(ty), rtol=1e-12)
    w = _rand_complex(rng, tuple(ty.shape))
    (ty * torch.tensor(w)).real.sum().backward()
    (ey * ember.tensor(w)).real.sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), _np(ta.grad), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(eb.grad.numpy(), _np(tb.grad), rtol=1e-11, atol=1e-12)


def torch_or_ember(t):
    return torch if isinstance(t, torch.Tensor) else ember


def test_real_tensor_times_complex_gets_a_real_gradient() -> None:
    rng = np.random.default_rng(2)
    x, c = rng.standard_normal(5), _rand_complex(rng, (5,))
    for make in (lambda L, t: (t * L.tensor(c)).abs().sum(), lambda L, t: (t * 2j).exp().real.sum(),
                 lambda L, t: L.fft.fft(t).abs().sum()):
        tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
        make(torch, tx).backward()
        make(ember, ex).backward()
        assert ex.grad.dtype is ember.float64
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,fn", [
    ("sum", lambda L, z: z.sum(0)), ("mean", lambda L, z: z.mean()), ("prod", lambda L, z: z.prod(1)),
    ("cumsum", lambda L, z: z.cumsum(1)), ("cumprod", lambda L, z: z.cumprod(1)), ("var", lambda L, z: z.var(1)),
    ("std", lambda L, z: z.std()), ("norm", lambda L, z: z.norm()), ("einsum", lambda L, z: L.einsum("ij,kj->ik", z, z)),
    ("view_as_real", lambda L, z: L.view_as_real(z)), ("mH", lambda L, z: z.mH @ z), ("trace", lambda L, z: L.trace(z)),
])
def test_reductions_match_torch(name: str, fn) -> None:
    rng = np.random.default_rng(3)
    z = _rand_complex(rng, (3, 3))
    tz, ez = torch.tensor(z, requires_grad=True), ember.tensor(z, requires_grad=True)
    ty, ey = fn(torch, tz), fn(ember, ez)
    assert ey.dtype.name == str(ty.dtype).replace("torch.", "")
    np.testing.assert_allclose(ey.detach().numpy(), _np(ty), rtol=1e-12)
    w = _rand_complex(rng, tuple(ty.shape)) if ty.is_complex() else rng.standard_normal(tuple(ty.shape))
    ((ty * torch.tensor(w)).real if ty.is_complex() else ty * torch.tensor(w)).sum().backward()
    ((ey * ember.tensor(w)).real if ey.dtype.is_complex else ey * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(ez.grad.numpy(), _np(tz.grad), rtol=1e-11, atol=1e-12)


def test_prod_with_zero_matches_torch() -> None:
    z = np.array([[1 + 1j, 0j, 2 - 1j], [0.5j, 1.5, -1 + 0j]])
    tz, ez = torch.tensor(z, requires_grad=True), ember.tensor(z, requires_grad=True)
    torch.prod(tz, 1).abs().sum().backward()
    ember.prod(ez, 1).abs().sum().backward()
    np.testing.assert_allclose(ez.grad.numpy(), _np(tz.grad), rtol=1e-12)


# ---- the complex records ----------------------------------------------------------------------------------
def test_complex_polar_view_as_complex_match_torch() -> None:
    r = np.array([1.5, -2.0, 0.0, 3.0, 0.0, np.inf])
    t = np.array([0.3, -1.0, 2.0, 0.0, 0.0, 0.0])
    g = np.array([1 + 2j, -0.5 + 1j, 2 - 1j, 0.3 + 0.1j, 1j, 1.0])
    for name in ("polar", "complex", "view_as_complex"):
        results = []
        for L in (torch, ember):
            a, b = L.tensor(r, requires_grad=True), L.tensor(t, requires_grad=True)
            y = L.view_as_complex(L.stack([a, b], -1)) if name == "view_as_complex" else getattr(L, name)(a, b)
            y.backward(L.tensor(g))
            results.append([_np(v) if L is torch else v.detach().numpy() for v in (y, a.grad, b.grad)])
        for want, got in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=name)
    # complex() builds inf + 0j exactly (no 1j * inf = nan + inf j)
    assert ember.complex(ember.tensor([np.inf]), ember.tensor([0.0])).item() == complex(np.inf, 0)


def test_angle_of_real_and_zero_match_torch() -> None:
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan, -np.inf])
    np.testing.assert_array_equal(ember.angle(ember.tensor(x)).numpy(), torch.angle(torch.tensor(x)).numpy())
    z = np.array([0j, 1 + 1j, -1 + 0j])
    tz, ez = torch.tensor(z, requires_grad=True), ember.tensor(z, requires_grad=True)
    torch.angle(tz).sum().backward()
    ember.angle(ez).sum().backward()
    np.testing.assert_allclose(ez.grad.numpy(), _np(tz.grad), rtol=1e-12)


def test_conj_family_and_attributes() -> None:
    z = ember.tensor([[1 + 2j, 3 - 1j]])
    np.testing.assert_array_equal(z.conj().numpy(), [[1 - 2j, 3 + 1j]])
    np.testing.assert_array_equal(ember.conj_physical(z).numpy(), z.conj().numpy())
    assert ember.resolve_conj(z) is z and ember.resolve_neg(z) is z and not z.is_conj() and not ember.is_neg(z)
    np.testing.assert_array_equal(z.mH.numpy(), [[1 - 2j], [3 + 1j]])
    np.testing.assert_array_equal(z.H.numpy(), z.mH.numpy())
    x = ember.tensor([1.0, -2.0])
    assert ember.real(x) is x and x.real is x and ember.conj(x) is x
    np.testing.assert_array_equal(ember.isreal(ember.tensor([1 + 0j, 1j])).numpy(), [True, False])


def test_eig_matches_torch_values_and_gradients() -> None:
    rng = np.random.default_rng(4)
    for a in (rng.standard_normal((4, 4)), _rand_complex(rng, (2, 3, 3))):
        results = []
        for L in (torch, ember):
            A = L.tensor(a, requires_grad=True)
            w, v = L.linalg.eig(A)
            n = a.shape[-1]
            loss = (w * w.conj()).real.sum() + (v.abs() ** 2 * L.arange(n).to(L.float64)).sum() \
                + L.linalg.eigvals(A).imag.sum()
            loss.backward()
            results.append((w, v.abs(), A.grad))
        for want, got in zip(*results):
            assert got.dtype.name == str(want.dtype).replace("torch.", "")
            np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-9, atol=1e-10)
    assert ember.linalg.eigvals(ember.eye(3)).dtype is ember.complex64


def test_eig_refuses_phase_dependent_losses_as_torch() -> None:
    A = ember.tensor(np.random.default_rng(5).standard_normal((3, 3)), requires_grad=True)
    _, v = ember.linalg.eig(A)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        v.real.sum().backward()


# ---- errors where PyTorch refuses complex numbers -------------------------------------------------------------
@pytest.mark.parametrize("name,fn", [
    ("lt", lambda z: z < z), ("ge", lambda z: z >= 0), ("max", lambda z: z.max()), ("amax", lambda z: z.amax()),
    ("maximum", lambda z: ember.maximum(z, z)), ("floor", lambda z: z.floor()), ("ceil", lambda z: z.ceil()),
    ("clamp", lambda z: z.clamp(0, 1)), ("relu", lambda z: ember.relu(z)), ("sign", lambda z: z.sign()),
    ("sort", lambda z: z.sort()), ("remainder", lambda z: z % 2), ("argmax", lambda z: z.argmax()),
])
def test_ordering_ops_refuse_complex(name: str, fn) -> None:
    z = ember.tensor([1 + 1j, 2 - 1j])
    with torch_raises():
        fn_torch = {"maximum": lambda t: torch.maximum(t, t), "relu": lambda t: torch.relu(t)}.get(name)
        (fn_torch or fn)(torch.tensor([1 + 1j, 2 - 1j]))
    with pytest.raises(RuntimeError, match="complex"):
        fn(z)


class torch_raises:
    """Checks torch refuses too (so these errors are PyTorch's behaviour, not ember's choice)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, tb) -> bool:
        assert kind is not None, "torch accepted a complex input this test expects refused"
        return True


def test_backward_of_a_complex_output_needs_a_gradient() -> None:
    z = ember.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * 2).sum().backward()
    (z * 2).sum().backward(ember.tensor(1 + 0j))
    assert z.grad.item() == 2


def test_view_as_complex_and_complex_errors() -> None:
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        ember.view_as_complex(ember.ones(3, 3))
    with pytest.raises(RuntimeError, match="float and double"):
        ember.view_as_complex(ember.ones(3, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        ember.view_as_real(ember.ones(3))
    with pytest.raises(RuntimeError, match="scalar type"):
        ember.complex(ember.ones(2), ember.ones(2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="non-complex"):
        ember.ones(2).imag


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_complex_ops_on_the_device(device: str) -> None:
    """Complex tensors, their gradients and the FFTs on the stand-in CUDA device (no host conversion)."""
    context = ember.testing.standin_cuda() if device == "cuda" and not ember.cuda.is_available() else _nothing()
    rng = np.random.default_rng(6)
    a = _rand_complex(rng, (4, 6))
    with context:
        z = ember.tensor(a, device=device, requires_grad=True)
        y = ember.fft.rfft(ember.fft.ifft(z * z.conj() + z.exp(), dim=0).real, dim=1)
        loss = (y.abs() ** 2).sum() + ember.linalg.eigvals(z[:, :4]).real.sum()
        loss.backward()
        assert z.grad.device.type == device and z.grad.dtype is ember.complex128
        got = (loss.item(), z.grad.cpu().numpy())
    tz = torch.tensor(a, requires_grad=True)
    ty = torch.fft.rfft(torch.fft.ifft(tz * tz.conj() + tz.exp(), dim=0).real, dim=1)
    tl = (ty.abs() ** 2).sum() + torch.linalg.eigvals(tz[:, :4]).real.sum()
    tl.backward()
    np.testing.assert_allclose(got[0], tl.item(), rtol=1e-10)
    np.testing.assert_allclose(got[1], _np(tz.grad), rtol=1e-9, atol=1e-10)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args) -> bool:
        return False


@pytest.mark.parametrize("name,fn", [
    ("inv", lambda L, A, B: L.linalg.inv(A)), ("det", lambda L, A, B: L.linalg.det(A)),
    ("solve", lambda L, A, B: L.linalg.solve(A, B)), ("solve_right", lambda L, A, B: L.linalg.solve(A, B.mT, left=False)),
    ("inverse_matmul", lambda L, A, B: L.inverse(A) @ B),
])
def test_complex_inv_det_solve_match_torch(name: str, fn) -> None:
    rng = np.random.default_rng(7)
    a, b = _rand_complex(rng, (2, 3, 3)), _rand_complex(rng, (2, 3, 2))
    results = []
    for L in (torch, ember):
        A, B = L.tensor(a, requires_grad=True), L.tensor(b, requires_grad=True)
        y = fn(L, A, B)
        w = np.random.default_rng(8).standard_normal(tuple(y.shape)) * (1 + 0.5j)
        (y * L.tensor(w)).real.sum().backward()
        results.append((y, A.grad, B.grad))
    for want, got in zip(*results):
        if want is None:
            assert got is None
            continue
        np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("name,fn", [
    ("vdot", lambda L, a, b: L.vdot(a[0], b[0])), ("dot", lambda L, a, b: L.dot(a[0], b[0])),
    ("vecdot", lambda L, a, b: L.linalg.vecdot(a, b)), ("vector_norm", lambda L, a, b: L.linalg.vector_norm(a, 3)),
    ("vector_norm_0", lambda L, a, b: L.linalg.vector_norm(a, 0)), ("matrix_norm_fro", lambda L, a, b: L.linalg.matrix_norm(a)),
    ("matrix_norm_inf", lambda L, a, b: L.linalg.matrix_norm(a, float("inf"))), ("norm", lambda L, a, b: L.linalg.norm(a)),
    ("cov", lambda L, a, b: L.cov(a)), ("corrcoef", lambda L, a, b: L.corrcoef(a)), ("kron", lambda L, a, b: L.kron(a, b)),
    ("matrix_power", lambda L, a, b: L.linalg.matrix_power(a, -2)), ("outer", lambda L, a, b: L.outer(a[0], b[1])),
    ("addmm", lambda L, a, b: L.addmm(a, a, b, beta=0.5, alpha=1j)), ("lerp", lambda L, a, b: L.lerp(a, b, 0.3)),
    ("nan_to_num", lambda L, a, b: L.nan_to_num(a / L.tensor(np.array([0j, 1, 1]), dtype=a.dtype))),
])
def test_composites_with_complex_semantics_match_torch(name: str, fn) -> None:
    """Functions whose complex meaning differs from the real one (vdot/vecdot conjugate, cov uses x^H, norms take
    |x|, nan_to_num works per part) must not silently compute the real formula."""
    rng = np.random.default_rng(9)
    a, b = _rand_complex(rng, (3, 3)), _rand_complex(rng, (3, 3))
    grad = name not in ("nan_to_num", "vector_norm_0")  # torch refuses nan_to_num's complex gradient; ord 0: none
    results = []
    for L in (torch, ember):
        ta, tb = L.tensor(a, requires_grad=grad), L.tensor(b, requires_grad=grad)
        with np.errstate(all="ignore"):
            y = fn(L, ta, tb)
        w = np.random.default_rng(10).standard_normal(tuple(y.shape)) * ((1 - 0.5j) if y.is_complex() else 1)
        loss = (y * L.tensor(w)).real.sum() if y.is_complex() else (y * L.tensor(w)).sum()
        if grad:
            loss.backward()
        results.append((y, ta.grad, tb.grad))
    (ty, tga, tgb), (ey, ega, egb) = results
    assert ey.dtype.name == str(ty.dtype).replace("torch.", "")
    np.testing.assert_allclose(ey.detach().numpy(), _np(ty), rtol=1e-10, atol=1e-12)
    for t, e in ((tga, ega), (tgb, egb)):
        assert (t is None) == (e is None)
        if t is not None:
            np.testing.assert_allclose(e.numpy(), _np(t), rtol=1e-9, atol=1e-11)


def test_hermitian_eigh_matches_torch() -> None:
    rng = np.random.default_rng(11)
    a = _rand_complex(rng, (2, 4, 4))
    a = a + np.conj(np.swapaxes(a, -1, -2))
    weights = np.arange(4.0)
    results = []
    for L in (torch, ember):
        A = L.tensor(a, requires_grad=True)
        L_, V = L.linalg.eigh(A)
        loss = (L_ * L.tensor(weights)).sum() + (V.abs() ** 2 * L.tensor(weights)).sum() + (L.linalg.eigvalsh(A) ** 2).sum()
        loss.backward()
        results.append((L_, V.abs(), A.grad))
    for want, got in zip(*results):
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-10, atol=1e-10)
    A = ember.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        ember.linalg.eigh(A)[1].real.sum().backward()


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 3)])
def test_complex_svd_matches_torch(shape: tuple) -> None:
    rng = np.random.default_rng(12)
    a = _rand_complex(rng, shape)
    k = min(shape[-2:])
    w_a = rng.standard_normal(shape)
    w_u = rng.standard_normal(shape[:-1] + (k,))
    results = []
    for L in (torch, ember):
        A = L.tensor(a, requires_grad=True)
        U, S, Vh = L.linalg.svd(A, full_matrices=False)
        loss = (((U * S.unsqueeze(-2)) @ Vh) * L.tensor(w_a)).real.sum() + (U.abs() ** 2 * L.tensor(w_u)).sum() \
            + (Vh.abs() ** 3).sum() + (L.linalg.svdvals(A) ** 2).sum() + L.linalg.matrix_norm(A, "nuc").sum()
        loss.backward()
        results.append((S, U.abs(), A.grad))
    for want, got in zip(*results):
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-9, atol=1e-10)
    A = ember.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        ember.linalg.svd(A, full_matrices=False).U.real.sum().backward()


@pytest.mark.parametrize("name,fn", [
    ("both", lambda L, A: (lambda r: (r[0] * L.tensor([1 + 2j, -0.5j])).real.sum() + (r[1] * L.tensor([0.3, -1.2])).sum())(
        L.linalg.slogdet(A))),
    ("sign", lambda L, A: (L.linalg.slogdet(A)[0] * L.tensor([1 + 2j, -0.5j])).real.sum()),
    ("logdet", lambda L, A: (L.logdet(A) * L.tensor([1 - 1j, 2j])).real.sum()),
])
def test_complex_slogdet_matches_torch(name: str, fn) -> None:
    a = _rand_complex(np.random.default_rng(13), (2, 3, 3))
    results = []
    for L in (torch, ember):
        A = L.tensor(a, requires_grad=True)
        y = fn(L, A)
        y.backward()
        results.append((y.item(), A.grad))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-12)
    np.testing.assert_allclose(results[1][1].numpy(), _np(results[0][1]), rtol=1e-10, atol=1e-11)
    sign, logabs = ember.linalg.slogdet(ember.tensor(a))
    assert sign.dtype is ember.complex128 and logabs.dtype is ember.float64


@pytest.mark.parametrize("name,fn", [
    ("cholesky", lambda L, A, B: L.linalg.cholesky(A)), ("cholesky_upper", lambda L, A, B: L.linalg.cholesky(A, upper=True)),
    ("solve_triangular", lambda L, A, B: L.linalg.solve_triangular(A.tril(), B, upper=False)),
    ("solve_triangular_right", lambda L, A, B: L.linalg.solve_triangular(A.triu(), B.mT, upper=True, left=False)),
    ("solve_triangular_unit", lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True, unitriangular=True)),
])
def test_complex_cholesky_and_triangular_solves_match_torch(name: str, fn) -> None:
    rng = np.random.default_rng(14)
    m = _rand_complex(rng, (2, 3, 3))
    a = m @ np.conj(np.swapaxes(m, -1, -2)) + 3 * np.eye(3)
    b = _rand_complex(rng, (2, 3, 2))
    results = []
    for L in (torch, ember):
        A, B = L.tensor(a, requires_grad=True), L.tensor(b, requires_grad=True)
        y = fn(L, A, B)
        w = np.random.default_rng(15).standard_normal(tuple(y.shape)) * (1 + 0.5j)
        (y * L.tensor(w)).real.sum().backward()
        results.append((y, A.grad, B.grad))
    for want, got in zip(*results):
        assert (want is None) == (got is None)
        if want is not None:
            np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-10, atol=1e-11)
