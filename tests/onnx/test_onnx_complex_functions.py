"""Complex exp/log/sqrt/sin/cos/tan/sinh/cosh/tanh/pow exported to ONNX as formulas on (..., 2) real pairs and
run in onnxruntime, against ember's eager results (NumPy's complex functions) element by element, at random
points and at special ones (signed zeros, +-1, large real and imaginary parts, inf/NaN finiteness)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import ember.onnx as eonnx  # noqa: E402

FUNCTIONS = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh"]
RNG = np.random.default_rng(11)
RANDOM = RNG.standard_normal((4, 6)) * 2 + 1j * RNG.standard_normal((4, 6)) * 2
_EDGE = np.array([0.0, -0.0, 1e-9, -1e-9, 0.3, 1.0, -1.0, 2.5, -7.0, 30.0, -30.0])
SPECIAL = (_EDGE[:, None] + 0j).repeat(len(_EDGE), 1)
SPECIAL.imag = _EDGE[None, :]


def _run(fn, x):
    model = eonnx.export(fn, (ember.tensor(x),), None)
    return eonnx.run(model, [x])[0], fn(ember.tensor(x)).numpy()


def _close(got, want, tol, where):
    assert got.dtype == want.dtype and got.shape == want.shape, where
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=where)
    error = np.abs(got[finite] - want[finite]) / np.maximum(np.abs(want[finite]), 1.0)
    assert error.max(initial=0) <= tol, f"{where}: worst relative error {error.max():.2e}"


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("points", ["random", "special"])
def test_complex_functions_export(name, dtype, points):
    x = (RANDOM if points == "random" else SPECIAL).astype(dtype)
    got, want = _run(lambda t: getattr(ember, name)(t), x)
    tol = 4e-15 if dtype == "complex128" else 2e-6
    if name in ("tan", "tanh") and dtype == "complex64":
        tol = 5e-6  # a ratio of two rounded sums
    _close(got, want, tol, f"{name} {dtype} {points}")


def test_small_arguments_keep_their_relative_precision():
    """sinh of small values comes from its series (e^v - e^-v loses every digit near 0)."""
    x = np.array([1e-12 + 1e-12j, 3e-9 - 2e-10j, 1e-300 + 1e-300j])
    for name in ("sin", "sinh", "tan", "tanh", "sqrt", "exp"):
        got, want = _run(lambda t, n=name: getattr(ember, n)(t), x)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=name)


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_powers_export(dtype):
    x = RANDOM.astype(dtype)
    real = np.abs(RANDOM.real).astype(np.float32 if dtype == "complex64" else np.float64) + 0.5
    tol = 4e-15 if dtype == "complex128" else 2e-6
    for fn in (lambda t: t ** 2.5, lambda t: t ** 3, lambda t: ember.pow(t, t), lambda t: t ** (0.5 - 1j),
               lambda t: 1.5 ** t):
        got, want = _run(fn, x)
        _close(got, want, tol * 10, f"pow {dtype}")
    model = eonnx.export(lambda r, z: r ** z, (ember.tensor(real), ember.tensor(x)), None)
    got = eonnx.run(model, [real, x])[0]
    _close(got, (ember.tensor(real) ** ember.tensor(x)).numpy(), tol * 10, "real ** complex")


def test_real_inputs_still_export_the_plain_onnx_ops():
    """Real inputs take the 1:1 ONNX ops (float64 tan as sin / cos: ONNX Runtime has no float64 Tan)."""
    x = RNG.standard_normal((3, 4))
    for dtype in (np.float32, np.float64):
        for name in FUNCTIONS + ["pow"]:
            fn = (lambda t: t ** 3) if name == "pow" else (lambda t, n=name: getattr(ember, n)(t.abs() + 0.1))
            got = eonnx.run(eonnx.export(fn, (ember.tensor(x.astype(dtype)),), None), [x.astype(dtype)])[0]
            np.testing.assert_allclose(got, fn(ember.tensor(x.astype(dtype))).numpy(),
                                       rtol=1e-6 if dtype == np.float32 else 1e-14, err_msg=name)
