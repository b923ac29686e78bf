"""ember.ops.special_math (the NumPy-only special functions) against SciPy, with mpmath as the judge
where SciPy itself is off (it is, near lgamma's root at 1, digamma's poles, erfcx at -24)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ember.ops import special_math as sm

sp = pytest.importorskip("scipy.special")

_RNG = np.random.default_rng(0)
_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e-30, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5,
                     1e300, -1e300, 3.0, -3.0, 1.5, 2.5, 7.0, 10.0])
_TINY = np.finfo(np.float64).tiny  # relative error is not meaningful for subnormal results


def _grid(lo: float, hi: float, n: int = 5000) -> np.ndarray:
    return np.concatenate([_RNG.uniform(lo, hi, n), np.linspace(lo, hi, n)])


_DOMAINS = {
    "erf": np.concatenate([_grid(-7, 7), _grid(-30, 30), np.logspace(-300, 1.5, 3000), -np.logspace(-300, 1.5, 3000)]),
    "erfinv": np.concatenate([_grid(-1, 1), 1 - np.logspace(-16, 0, 2000), -1 + np.logspace(-16, 0, 2000),
                              np.logspace(-300, 0, 2000), [1.5, -1.5]]),
    "erfcinv": np.concatenate([_grid(0, 2), np.logspace(-307, 0, 3000), 2 - np.logspace(-16, 0, 1000), [-1.0, 3.0]]),
    "ndtri": np.concatenate([_grid(0, 1), np.logspace(-307, 0, 3000), 1 - np.logspace(-16, 0, 1000), [-1.0, 2.0]]),
    "lgamma": np.concatenate([_grid(0, 20), _grid(-20, 0), _grid(0, 1e4), np.logspace(-300, 300, 3000),
                              np.arange(-10, 10.0) + 1e-9, np.arange(-10, 10.0) - 1e-9]),
}
_DOMAINS["erfc"] = _DOMAINS["erfcx"] = _DOMAINS["erf"]
_DOMAINS["digamma"] = _DOMAINS["lgamma"]
_SCIPY = {"erf": "erf", "erfc": "erfc", "erfcx": "erfcx", "erfinv": "erfinv", "erfcinv": "erfcinv", "ndtri": "ndtri",
          "lgamma": "gammaln", "digamma": "psi"}


def _mpmath_value(name: str, x: float) -> float:
    mp = pytest.importorskip("mpmath")
    digits = 40 if name not in ("erfcinv", "ndtri", "erfinv") else 40 + int(-math.log10(max(abs(x), 1e-300)) if name != "erfinv" else 20)
    with mp.workdps(digits):
        v = mp.mpf(x)
        fn = {"erf": mp.erf, "erfc": mp.erfc, "erfcx": lambda t: mp.exp(t * t) * mp.erfc(t),
              "erfinv": mp.erfinv, "erfcinv": lambda t: mp.erfinv(1 - t),
              "ndtri": lambda t: mp.sqrt(2) * mp.erfinv(2 * t - 1),
              "lgamma": lambda t: mp.re(mp.loggamma(t)), "digamma": mp.digamma}[name]
        return float(fn(v))


def _negative_root_zone(name: str, x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """lgamma and digamma cross zero once between each pair of negative integers; there a value is
    the difference of two O(1) terms, so only absolute accuracy is possible (SciPy's too)."""
    if name in ("lgamma", "digamma"):
        return (x < 0) & (np.abs(ref) < 1.0)
    return np.zeros(x.shape, bool)


@pytest.mark.parametrize("name", sorted(_SCIPY))
def test_float64_within_1e14_of_scipy_or_of_mpmath(name: str) -> None:
    x = np.concatenate([_DOMAINS[name], _SPECIAL])
    got = sm.FUNCTIONS[name](x)
    with np.errstate(all="ignore"):
        ref = getattr(sp, _SCIPY[name])(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    normal = np.isfinite(ref) & (np.abs(ref) >= _TINY) & np.isfinite(got)
    abs_zone = _negative_root_zone(name, x, ref)
    with np.errstate(all="ignore"):
        err = np.abs(got - ref) / np.abs(ref)
        err = np.where(abs_zone, np.abs(got - ref), err)
    suspects = np.nonzero(normal & (err > 1e-14))[0]
    # SciPy is not exact everywhere: each disagreement is settled by mpmath, within the same bound.
    assert len(suspects) < 3000, f"{name}: {len(suspects)} values differ from SciPy by more than 1e-14"
    for i in suspects:
        truth = _mpmath_value(name, float(x[i]))
        scale = 1.0 if abs_zone[i] else abs(truth)
        assert abs(got[i] - truth) <= 1e-14 * scale, (name, x[i], got[i], ref[i], truth)
    # Subnormal results: absolute agreement (SciPy flushes some of them to 0).
    sub = np.isfinite(ref) & (np.abs(ref) < _TINY)
    np.testing.assert_allclose(got[sub], ref[sub], rtol=0, atol=1e-300)


@pytest.mark.parametrize("name", sorted(_SCIPY))
def test_float32_within_2_ulp_of_scipy(name: str) -> None:
    x = np.concatenate([_DOMAINS[name], _SPECIAL])
    with np.errstate(all="ignore"):
        x32 = x.astype(np.float32)
        got = sm.FUNCTIONS[name](x32)
        ref = getattr(sp, _SCIPY[name])(x32.astype(np.float64)).astype(np.float32)  # correctly rounded reference
    assert got.dtype == np.float32
    finite = np.isfinite(ref) & np.isfinite(got) & ~_negative_root_zone(name, x32, ref)
    finite &= np.abs(ref) >= np.finfo(np.float32).tiny
    ulp = np.spacing(np.abs(ref[finite]))
    worst = np.max(np.abs(got[finite].astype(np.float64) - ref[finite]) / ulp)
    assert worst <= 2, f"{name}: float32 off by {worst} ulp"


@pytest.mark.parametrize("name", sorted(_SCIPY))
def test_special_points_match_scipy_and_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    x = np.concatenate([_SPECIAL, [-0.0, 1e-320, -1e-320]])
    got = sm.FUNCTIONS[name](x)
    with np.errstate(all="ignore"):
        ref = getattr(sp, _SCIPY[name])(x)
    torch_fn = {"erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv, "lgamma": torch.lgamma,
                "digamma": torch.digamma}.get(name)
    if torch_fn is not None:  # PyTorch's conventions win where SciPy's differ (lgamma(-inf) = +inf)
        ref = torch_fn(torch.tensor(x)).numpy()
    nonfinite = ~np.isfinite(ref)
    np.testing.assert_array_equal(got[nonfinite], ref[nonfinite])
    if torch_fn is not None:  # signed zeros as in PyTorch (SciPy's erfcinv(1) is -0.0, for one)
        zero = ref == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(ref[zero]))


def test_dtypes_shapes_and_out() -> None:
    x = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    for dtype in (np.float16, np.float32, np.float64):
        assert sm.erf(x.astype(dtype)).dtype == dtype
    assert sm.lgamma(np.arange(1, 5)).dtype == np.float64  # integers compute in float64, as in SciPy
    out = np.empty_like(x)
    assert sm.erf(x, out=out) is out
    np.testing.assert_allclose(out, sp.erf(x), rtol=1e-15)
    np.testing.assert_allclose(sm.erf(x[:, ::2].T), sp.erf(x[:, ::2].T), rtol=1e-15)  # non-contiguous
    assert np.isscalar(sm.erf(np.float64(0.5))) or sm.erf(np.float64(0.5)).shape == ()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_large_inputs_run_in_blocks_with_the_same_values(dtype, monkeypatch) -> None:
    """Inputs over 2 * BLOCK elements are evaluated piece by piece (cache-sized): the same values as one
    whole-array call, for every function of the table (domains mixed within each piece, specials, a
    non-contiguous 2-D input, ``out=``)."""
    from ember.ops.special_table import FUNCTIONS

    unary = ("erf", "erfc", "erfcx", "erfinv", "erfcinv", "ndtri", "lgamma", "digamma", "ndtr", "log_ndtr", "i0",
             "i0e", "i1", "i1e")
    x = np.concatenate([_DOMAINS["lgamma"][::3], _DOMAINS["erf"][::3], _DOMAINS["ndtri"][::3], _SPECIAL])
    with np.errstate(all="ignore"):
        x = _RNG.permutation(x).astype(dtype)
        whole = {name: FUNCTIONS[name](x) for name in unary}
        monkeypatch.setattr(sm, "BLOCK", 777)  # ~20 pieces, the last one partial
        for name in unary:
            got = FUNCTIONS[name](x)
            assert got.dtype == x.dtype and got.shape == x.shape
            np.testing.assert_array_equal(got, whole[name], err_msg=name)
        grid = x[: 2 * (x.size // 2)].reshape(2, -1)[:, ::3]  # non-contiguous
        np.testing.assert_array_equal(FUNCTIONS["ndtri"](grid), FUNCTIONS["ndtri"](grid.copy()))
        out = np.empty_like(x)
        assert FUNCTIONS["erfinv"](x, out=out) is out
        np.testing.assert_array_equal(out, whole["erfinv"])
