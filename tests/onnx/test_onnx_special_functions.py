"""torch.special's functions that ONNX can express accurately (erfc, erfcx, ndtr, log_ndtr, erfinv, ndtri, lgamma,
digamma, the modified Bessel functions I0/I1/K0/K1 and their scaled forms, entr, xlog1py), exported
and run in onnxruntime against mpmath (50 digits) at special points: 0, -0, tiny, the interval edges of the fits,
the far tails (where 1 - Erf(x) would give 0 and log(ndtr) -inf), +-inf and NaN, in float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
mp = pytest.importorskip("mpmath")

import ember.onnx as eonnx  # noqa: E402

mp.mp.dps = 60
POINTS = [0.0, -0.0, 1e-300, 1e-30, 1e-8, 0.3, -0.3, 0.999, -0.999, 1.0, -1.0, 1.5, -1.5, 2.4, 2.6, -2.6, 4.9, 5.1,
          -5.1, 6.0, -6.0, 9.0, -9.0, 10.0, -10.0, 26.0, -26.0, 27.0, -27.0, 30.0, -30.0, 37.0, -37.0, 39.9, -40.0,
          -41.0, 41.0, 100.0, -100.0, 1e10, -1e10, np.inf, -np.inf, np.nan]


def _ncdf(v):
    return mp.ncdf(v)


def _log_ndtr(v):
    return mp.log1p(-mp.ncdf(-v)) if v > 0 else mp.log(mp.ncdf(v))


REFERENCES = {  # name -> (ember function, mpmath reference at a finite point)
    "erfc": (ember.special.erfc, mp.erfc),
    "erfcx": (ember.special.erfcx, lambda v: mp.exp(v * v) * mp.erfc(v)),
    "ndtr": (ember.special.ndtr, _ncdf),
    "log_ndtr": (ember.special.log_ndtr, _log_ndtr),
    "entr": (ember.special.entr, lambda v: -v * mp.log(v) if v > 0 else (0 if v == 0 else -mp.inf)),
    "erfinv": (ember.special.erfinv, lambda v: mp.erfinv(v) if abs(v) < 1 else (mp.inf * v if abs(v) == 1 else mp.nan)),
    "ndtri": (ember.special.ndtri, lambda v: _ndtri(v)),
    "lgamma": (ember.lgamma, lambda v: mp.inf if v <= 0 and v == int(v) else mp.log(abs(mp.gamma(v)))),
    "digamma": (ember.digamma, lambda v: (-mp.inf if str(v) == "0.0" else mp.nan) if v <= 0 and v == int(v) else mp.digamma(v)),
}
BESSEL = {  # name -> (ember function, mpmath reference, values at +inf and -inf)
    "i0": (ember.special.i0, lambda v: mp.besseli(0, v), (np.inf, np.inf)),
    "i1": (ember.special.i1, lambda v: mp.besseli(1, v), (np.inf, -np.inf)),
    "i0e": (ember.special.i0e, lambda v: mp.besseli(0, v) * mp.exp(-abs(v)), (0.0, 0.0)),
    "i1e": (ember.special.i1e, lambda v: mp.besseli(1, v) * mp.exp(-abs(v)), (0.0, -0.0)),
    "modified_bessel_i0": (ember.special.modified_bessel_i0, lambda v: mp.besseli(0, v), (np.inf, np.inf)),
    "modified_bessel_k0": (ember.special.modified_bessel_k0, lambda v: _k(0, v), (0.0, np.nan)),
    "modified_bessel_k1": (ember.special.modified_bessel_k1, lambda v: _k(1, v), (0.0, np.nan)),
    "scaled_modified_bessel_k0": (ember.special.scaled_modified_bessel_k0, lambda v: _k(0, v) * mp.exp(v), (0.0, np.nan)),
    "scaled_modified_bessel_k1": (ember.special.scaled_modified_bessel_k1, lambda v: _k(1, v) * mp.exp(v), (0.0, np.nan)),
}
BESSEL_POINTS = [0.0, -0.0, 1e-300, 1e-20, 0.5, -0.5, 1.99, 2.0, 2.01, -2.0, 5.0, 7.99, 8.0, 8.01, -8.01, -30.0, 30.0,
                 80.0, 700.0, 713.0, -713.0, 1e5, np.inf, -np.inf, np.nan]


def _k(nu, v):
    if v == 0:
        return mp.inf
    return mp.besselk(nu, v) if v > 0 else mp.nan


for _name, (_fn, _ref, _limits) in BESSEL.items():
    REFERENCES[_name] = (_fn, _ref)
GAMMA_POINTS = [0.0, 1e-300, 1e-8, 0.25, 0.4999, 0.5, 1.0, 1.2, 1.4616321449683622, 1.5, 2.0, 2.4999, 2.5, 3.0, 4.5,
                6.999, 7.0, 10.0, 171.5, 1e5, 1e300, -1e-8, -0.5, -1.0, -1.5, -2.5, -3.2, -10.5, -1e5 - 0.5, np.inf, -np.inf,
                np.nan]


def _ndtri(v):
    if v in (0, 1):
        return mp.inf * (2 * v - 1)
    if not 0 < v < 1:
        return mp.nan
    with mp.workdps(700):  # 2v - 1 for v = 5e-324 needs ~330 digits to stay off -1
        return +(mp.sqrt(2) * mp.erfinv(2 * v - 1))
INVERSE_POINTS = [0.0, -0.0, 1e-300, 5e-324, 1e-30, 1e-17, 1e-8, 0.1, 0.3, 0.5, -0.5, 0.9, 0.99, 0.999999, 1 - 2 ** -52,
                  -(1 - 2 ** -52), 1.0, -1.0, 1.5, -2.0, np.inf, -np.inf, np.nan]
LIMITS = {  # the values at +inf and -inf
    "erfc": (0.0, 2.0), "erfcx": (0.0, np.inf), "ndtr": (1.0, 0.0), "log_ndtr": (0.0, -np.inf), "entr": (-np.inf, -np.inf),
    "erfinv": (np.nan, np.nan), "ndtri": (np.nan, np.nan), "lgamma": (np.inf, np.inf), "digamma": (np.inf, np.nan),
    **{name: limits for name, (_, _, limits) in BESSEL.items()},
}


def _reference(name, x):
    fn = REFERENCES[name][1]
    out = []
    for v in x.astype(np.float64):
        if np.isnan(v):
            out.append(np.nan)
        elif np.isinf(v):
            out.append(LIMITS[name][0 if v > 0 else 1])
        else:
            out.append(float(fn(mp.mpf(float(v)))))
    return np.array(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_special_function_exports_accurately(name, dtype):
    x = np.array(INVERSE_POINTS if name in ("erfinv", "ndtri") else GAMMA_POINTS if name in ("lgamma", "digamma")
                 else BESSEL_POINTS if name in BESSEL else POINTS, dtype=dtype)
    fn = REFERENCES[name][0]
    model = eonnx.export(fn, (ember.tensor(x),), None)
    (got,) = eonnx.run(model, [x])
    assert got.dtype == dtype
    want = _reference(name, x).astype(dtype)  # the exact value, rounded to the dtype
    tiny = np.finfo(dtype).tiny
    normal = np.isfinite(want) & (np.abs(want) >= tiny)
    tolerance = 2 * np.finfo(np.float32).eps if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got[normal], want[normal], rtol=tolerance, atol=0, err_msg=f"{name} {dtype.__name__}")
    # subnormal results (ndtr near -37.5, erfc near 26.6): within a few units of the smallest normal number
    np.testing.assert_allclose(got[~normal & np.isfinite(want)], want[~normal & np.isfinite(want)], rtol=0,
                               atol=4 * tiny * np.finfo(dtype).eps)
    np.testing.assert_array_equal(got[~np.isfinite(want)], want[~np.isfinite(want)])  # inf, -inf, NaN as they are


def test_erfc_keeps_the_upper_tail_that_one_minus_erf_loses():
    x = np.array([6.0, 10.0, 26.0], dtype=np.float64)
    (got,) = eonnx.run(eonnx.export(ember.special.erfc, (ember.tensor(x),), None), [x])
    assert (got > 0).all() and abs(got[0] / 2.1519736712498913e-17 - 1) < 1e-14


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_xlog1py_exports_with_zero_x_and_small_y(dtype):
    x = np.array([0.0, 0.0, 0.0, 2.0, -1.5, 3.0, 1.0, 0.0, 2.0], dtype=dtype)
    y = np.array([np.nan, -1.0, 3.0, 1e-20, 0.5, -1.0, np.inf, np.inf, -2.0], dtype=dtype)
    model = eonnx.export(ember.special.xlog1py, (ember.tensor(x), ember.tensor(y)), None)
    (got,) = eonnx.run(model, [x, y])
    want = ember.special.xlog1py(ember.tensor(x), ember.tensor(y)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-7 if dtype == np.float32 else 1e-15, atol=0)
    assert got[3] != 0  # 2 * log1p(1e-20) = 2e-20, not the 0 of Log(1 + y)


COMPOSITIONS = {  # torch.special names that export through existing records: onnxruntime against eager
    "xlogy": lambda a, b: ember.special.xlogy(a, b), "expit": lambda a, b: ember.special.expit(a),
    "logit": lambda a, b: ember.special.logit(a), "sinc": lambda a, b: ember.special.sinc(a * 4 - 2),
    "logsumexp": lambda a, b: ember.special.logsumexp(a, 1), "log1p": lambda a, b: ember.special.log1p(a),
    "softmax": lambda a, b: ember.special.softmax(a, 1), "log_softmax": lambda a, b: ember.special.log_softmax(a, 1),
    "exp2": lambda a, b: ember.special.exp2(a), "expm1": lambda a, b: ember.special.expm1(a),
    "gammaln": lambda a, b: ember.special.gammaln(a * 3), "psi": lambda a, b: ember.special.psi(a * 3 - 1),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_special_names_built_from_records_export(name):
    a = np.array([[0.0, 0.25, 0.5, 1.0], [1e-6, 0.75, 0.999, 0.1]], dtype=np.float32)
    c = np.array([[0.0, 2.0, 0.5, 1.0], [3.0, 1e-30, 0.25, np.inf]], dtype=np.float32)
    fn = COMPOSITIONS[name]
    (got,) = eonnx.run(eonnx.export(fn, (ember.tensor(a), ember.tensor(c)), None), [a, c])
    want = fn(ember.tensor(a), ember.tensor(c)).numpy()
    np.testing.assert_allclose(got, want, rtol=4e-7, atol=1e-7, equal_nan=True, err_msg=name)
