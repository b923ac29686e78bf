"""``ember.signal.windows``: every window of ``torch.signal.windows`` equal to torch's (float32) and to SciPy's
float64 definitions, symmetric and periodic, at the edge lengths 0, 1, 2, and with torch's errors."""
import numpy as np
import pytest

import ember
from ember.signal import windows

torch = pytest.importorskip("torch")

WINDOWS = [("hann", {}), ("hamming", {}), ("blackman", {}), ("nuttall", {}), ("bartlett", {}), ("cosine", {}),
           ("gaussian", {"std": 2.5}), ("exponential", {"tau": 3.0}), ("kaiser", {"beta": 8.0}),
           ("general_cosine", {"a": [0.5, 0.3, 0.2]}), ("general_hamming", {"alpha": 0.6})]


@pytest.mark.parametrize("name,kwargs", WINDOWS, ids=[w[0] for w in WINDOWS])
@pytest.mark.parametrize("M", [0, 1, 2, 5, 8, 33])
@pytest.mark.parametrize("sym", [True, False])
def test_window_matches_torch(name, kwargs, M, sym):
    got = getattr(windows, name)(M, sym=sym, **kwargs)
    want = getattr(torch.signal.windows, name)(M, sym=sym, **kwargs)
    assert got.dtype == ember.float32 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=3e-6, rtol=1e-5)


SCIPY = [("hann", {}, "hann"), ("hamming", {}, "hamming"), ("blackman", {}, "blackman"), ("nuttall", {}, "nuttall"),
         ("bartlett", {}, "bartlett"), ("cosine", {}, "cosine"), ("kaiser", {"beta": 8.0}, ("kaiser", 8.0)),
         ("gaussian", {"std": 2.5}, ("gaussian", 2.5)), ("exponential", {"tau": 3.0}, ("exponential", None, 3.0))]


@pytest.mark.parametrize("name,kwargs,spec", SCIPY, ids=[s[0] for s in SCIPY])
@pytest.mark.parametrize("sym", [True, False])
def test_window_matches_scipy_in_float64(name, kwargs, spec, sym):
    signal = pytest.importorskip("scipy.signal")
    got = getattr(windows, name)(17, sym=sym, dtype=ember.float64, **kwargs).numpy()
    np.testing.assert_allclose(got, signal.get_window(spec, 17, fftbins=not sym), rtol=1e-13, atol=1e-15)


def test_window_options_and_errors():
    w = windows.hann(4, dtype=ember.float64, requires_grad=True)
    assert w.dtype == ember.float64 and w.requires_grad
    with pytest.raises(ValueError, match="non-negative"):
        windows.hann(-1)
    with pytest.raises(ValueError, match="floating point"):
        windows.hann(4, dtype=ember.int64)
    with pytest.raises(ValueError, match="center must be None"):
        windows.exponential(4, center=1.0)
    np.testing.assert_allclose(windows.exponential(6, sym=False, center=1.5).numpy(),
                               torch.signal.windows.exponential(6, sym=False, center=1.5).numpy(), rtol=1e-6)
    assert ember.signal.windows.hann is windows.hann
