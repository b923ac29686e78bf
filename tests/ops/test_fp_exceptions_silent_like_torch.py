"""inf/NaN arithmetic is silent, as in PyTorch: no NumPy RuntimeWarning escapes from ember's ops.

denoising-diffusion-pytorch (min-SNR weights: ``snr / (1 - alphas_cumprod)`` at the last step) and x-transformers
(masks filled with ``-finfo.max`` cast between dtypes) printed "divide by zero encountered in divide" and
"overflow encountered in cast" under ember; torch prints nothing and gives the same infinities.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import _fp_warnings

torch = pytest.importorskip("torch")

CASES = {
    "div by zero": lambda L: L.tensor([1.0, 0.0, -1.0]) / 0,
    "log of zero": lambda L: L.log(L.tensor([0.0, 1.0])),
    "inf - inf": lambda L: L.tensor([float("inf")]) - float("inf"),
    "0 * inf": lambda L: L.tensor([0.0]) * float("inf"),
    "sqrt of negative": lambda L: L.sqrt(L.tensor([-1.0])),
    "exp overflow": lambda L: L.exp(L.tensor([1000.0])),
    "float64 to float32 overflow": lambda L: L.tensor([1e300, -1e300], dtype=L.float64).float(),
    "nan to int": lambda L: L.tensor([float("nan"), 1.0]).long()[1:],
    "division backward": lambda L: _grad(L),
}


def _grad(L):
    x = L.tensor([0.0, 2.0], requires_grad=True)
    (L.tensor([1.0, 1.0]) / x).sum().backward()
    return x.grad


@pytest.mark.parametrize("name", list(CASES))
def test_no_warning_and_torchs_values(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning would raise here
        _fp_warnings.install()  # the filter ember installs at import, in front of "error"
        got = CASES[name](ember)
    expected = CASES[name](torch)
    np.testing.assert_array_equal(got.numpy(), expected.detach().numpy())


def test_numpy_code_outside_ember_still_warns() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fp_warnings.install()
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            np.array([1.0]) / 0
