"""Floating-point exceptions are silent, as in PyTorch: NumPy's ``RuntimeWarning``s raised inside ember are muted.

``x / 0``, ``log(0)``, ``inf - inf`` and a float64 -> float32 cast of 1e300 give inf/NaN in PyTorch without a word;
NumPy computes the same values and warns ("divide by zero encountered in divide"), and the warning was
attributed to ember's op files (seen in denoising-diffusion-pytorch's min-SNR weights and x-transformers' masks).
A warnings filter, matched only when NumPy raises such a warning from a module of ember, costs nothing per op
(``np.errstate`` around each op would cost ~4 us). The user's own NumPy code keeps NumPy's behaviour.

Example:
    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     install()
    ...     ember.tensor([1.0, 0.0]) / 0
    tensor([inf, nan])
"""
from __future__ import annotations

import warnings

# NumPy's floating-point-error messages (np.errstate categories divide, over, under, invalid)
_MESSAGE = r"(divide by zero|overflow|underflow|invalid value) encountered in "


def install() -> None:
    """Add the filter (at the front of the filter list, so ``-W error`` does not turn these into errors)."""
    warnings.filterwarnings("ignore", message=_MESSAGE, category=RuntimeWarning, module=r"ember(\.|$)")
