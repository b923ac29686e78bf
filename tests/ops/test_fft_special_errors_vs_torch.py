"""Bad input to ember.fft and ember.special raises what PyTorch 2.13 raises: the same exception type, a message
that names the op and carries torch's own words; and every fft function at special values (0, +-inf, NaN, huge)
in float32 and float64, gradients included, against torch.fft.

Found by this file (fixed): torch.special's functions on complex tensors computed silently (erf of the real
part, xlogy 0, a float32 sinc of a complex input) where torch refuses (or, for sinc, computes the complex sinc);
``fftshift`` with a bad dim raised "tuple index out of range"; ``fftfreq(-1)`` an arange message.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _raises(lib, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call(lib)
        except Exception as error:  # noqa: BLE001 - the exception itself is compared
            return error
    return None


# (id, call with lib = torch or ember, exception type, words in both messages, op name in ember's message)
ERRORS = [
    ("fft-norm", lambda L: L.fft.fft(L.ones(4), norm="bogus"), RuntimeError, 'Invalid normalization mode: "bogus"', "fft_fft"),
    ("rfft-complex", lambda L: L.fft.rfft(L.ones(4, dtype=L.complex64)), RuntimeError, "expects a real input tensor", "rfft"),
    ("fft-n0", lambda L: L.fft.fft(L.ones(4), n=0), RuntimeError, "Invalid number of data points (0)", "fft_fft"),
    ("fft-dim", lambda L: L.fft.fft(L.ones(4), dim=2), IndexError, "Dimension out of range", "fft_fft"),
    ("fft2-1d", lambda L: L.fft.fft2(L.ones(4)), IndexError, "Dimension out of range", "fft_fft2"),
    ("fftn-s", lambda L: L.fft.fftn(L.ones(4, 4), s=(2, 2, 2)), RuntimeError, "Got shape with 3 values", "fft_fftn"),
    ("fftn-s-dim", lambda L: L.fft.fftn(L.ones(4, 4), s=(2,), dim=(0, 1)), RuntimeError,
     "dim and shape arguments must have the same length", "fft_fftn"),
    ("fftn-dup", lambda L: L.fft.fftn(L.ones(4, 4), dim=(0, 0)), RuntimeError, "FFT dims must be unique", "fft_fftn"),
    ("irfft-1", lambda L: L.fft.irfft(L.ones(1)), RuntimeError, "Invalid number of data points (0)", "fft_irfft"),
    ("fft-half", lambda L: L.fft.fft(L.ones(4, dtype=L.float16)), RuntimeError, "Unsupported dtype", "fft_fft"),
    ("fftshift-dim", lambda L: L.fft.fftshift(L.ones(4), dim=3), IndexError, "Dimension out of range", "fftshift"),
    ("ifftshift-dim", lambda L: L.fft.ifftshift(L.ones(2, 3), dim=(0, -3)), IndexError, "Dimension out of range",
     "ifftshift"),
    ("fftfreq-negative", lambda L: L.fft.fftfreq(-1), RuntimeError, "negative dimension -1", "fftfreq"),
    ("rfftfreq-negative", lambda L: L.fft.rfftfreq(-4), RuntimeError, "negative dimension -1", "rfftfreq"),
    ("polygamma-n", lambda L: L.special.polygamma(-1, L.ones(3)), RuntimeError, "does not support negative n", "polygamma"),
    ("multigammaln-p", lambda L: L.special.multigammaln(L.ones(3) * 5, 0), RuntimeError,
     "p has to be greater than or equal to 1", "p has"),
]
# torch.special's functions refuse complex tensors ("erf_vml_cpu" not implemented for 'ComplexFloat')
_UNARY = ["erf", "erfc", "erfcx", "erfinv", "log_ndtr", "ndtr", "ndtri", "i0", "i0e", "i1", "i1e", "gammaln", "digamma",
          "entr", "logit", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "airy_ai", "spherical_bessel_j0"]
_BINARY = ["xlogy", "xlog1py", "zeta", "gammainc", "gammaincc", "chebyshev_polynomial_t", "hermite_polynomial_h",
           "laguerre_polynomial_l", "legendre_polynomial_p"]
ERRORS += [(f"special.{name}-complex", (lambda n: lambda L: getattr(L.special, n)(L.ones(3, dtype=L.complex64)))(name),
            NotImplementedError, "not implemented for 'ComplexFloat'", name.replace("gammaln", "lgamma")) for name in _UNARY]
ERRORS += [(f"special.{name}-complex", (lambda n: lambda L: getattr(L.special, n)(L.ones(3, dtype=L.complex128),
                                                                                  L.ones(3, dtype=L.complex128)))(name),
            NotImplementedError, "not implemented for 'ComplexDouble'", name.replace("gammainc", "igamma"))
           for name in _BINARY]
ERRORS += [("special.polygamma-complex", lambda L: L.special.polygamma(1, L.ones(2, dtype=L.complex64)),
            NotImplementedError, "not implemented for 'ComplexFloat'", "polygamma"),
           ("lgamma-complex", lambda L: L.lgamma(L.ones(2, dtype=L.complex64)), NotImplementedError,
            "not implemented for 'ComplexFloat'", "lgamma")]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_and_messages_as_torch(case):
    _, call, kind, words, op = case
    theirs, ours = _raises(torch, call), _raises(ember, call)
    assert type(theirs) is kind, f"torch raised {type(theirs).__name__}: {theirs}"
    assert type(ours) is kind, f"ember raised {type(ours).__name__}: {ours} (torch: {theirs})"
    assert words in str(theirs), f"torch's message changed: {theirs}"
    assert words in str(ours) and op in str(ours), f"ember's message {str(ours)!r} lacks {words!r} or {op!r}"


@pytest.mark.parametrize("n", [-1, -2, -3, 0, 1, 5])
def test_rfftfreq_of_small_and_negative_n_as_torch(n):
    np.testing.assert_array_equal(ember.fft.rfftfreq(n).numpy(), torch.fft.rfftfreq(n).numpy())


# torch.special's names that do take complex input: the same values and gradients as torch
@pytest.mark.parametrize("name", ["sinc", "expit", "exp2", "expm1", "log1p"])
def test_special_functions_defined_on_complex_match_torch(name):
    a = np.array([0, 1e-6, 0.5 + 0.5j, 1 + 1j, -2.5j, 3, 1e-5j, 4 - 1j], dtype=np.complex128)
    weights = np.arange(8) + 1j
    results = []
    for L in (torch, ember):
        z = L.tensor(a, requires_grad=True)
        y = getattr(L.special, name)(z)
        (y * L.tensor(weights)).real.sum().backward()
        results.append((np.asarray(y.detach().resolve_conj() if L is torch else y.detach()),
                        np.asarray(z.grad.resolve_conj() if L is torch else z.grad)))
    (ty, tg), (ey, eg) = results
    np.testing.assert_allclose(ey, ty, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(eg, tg, rtol=1e-9, atol=1e-9)  # torch's sinc' near 0 is ~1e-6 off (ember's is exact)


# ---- every fft function at special values, values and gradients ---------------------------------------------------
_SIGNAL = np.array([0.0, np.inf, 1.0, np.nan, -np.inf, 2.0, 0.0, 1e30, -0.0, 3.0])
_CALLS = [("fft", {}), ("ifft", {"norm": "ortho"}), ("rfft", {}), ("irfft", {"n": 10}), ("hfft", {"n": 9}),
          ("ihfft", {}), ("fft2", {}), ("rfftn", {}), ("irfftn", {"s": (2, 6)}), ("ifftn", {"norm": "forward"})]


def _input(name, dtype):
    real = np.stack([_SIGNAL, _SIGNAL[::-1]]).astype(dtype)
    if name in ("rfft", "ihfft", "rfftn"):
        return real
    cplx = (real + 1j * np.roll(real, 3, axis=1)).astype(np.complex64 if dtype == "float32" else np.complex128)
    return cplx[:, :6] if name.startswith("irfft") or name == "hfft" else cplx


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", _CALLS, ids=[c[0] for c in _CALLS])
def test_fft_at_special_values_matches_torch(name, kw, dtype):
    """inf and NaN spread through the transform as in torch (NaN where torch has NaN, the same infinities), a
    finite row stays exact, and the gradient of a finite loss of the result is as torch's."""
    a = _input(name, dtype)
    results = []
    with np.errstate(all="ignore"):
        for L in (torch, ember):
            y = getattr(L.fft, name)(L.tensor(a), **kw)
            results.append(y.resolve_conj().numpy() if L is torch else y.numpy())
    want, got = results
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    finite = np.isfinite(want)
    scale = float(np.abs(want[finite]).max(initial=1.0))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol * scale, err_msg=name)
    # gradients at a finite signal holding zeros, -0 and a huge entry (the infinities would make them all NaN)
    finite_input = np.nan_to_num(a, nan=0.5, posinf=2.0, neginf=-2.0)
    grads = []
    for L in (torch, ember):
        x = L.tensor(finite_input, requires_grad=True)
        y = getattr(L.fft, name)(x, **kw)
        w = L.tensor(np.cos(np.arange(np.prod(y.shape))).reshape(tuple(y.shape))).to(y.dtype)
        ((y * w).real if y.dtype.is_complex else y * w).sum().backward()
        grads.append(x.grad.resolve_conj().numpy() if L is torch else x.grad.numpy())
    scale = float(np.abs(grads[0]).max())
    np.testing.assert_allclose(grads[1], grads[0], rtol=0, atol=(1e-5 if dtype == "float32" else 1e-12) * scale,
                               err_msg=f"{name} gradient")
