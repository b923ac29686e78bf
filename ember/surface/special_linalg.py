"""PyTorch's top-level special functions (``torch.lgamma``, ``digamma``, ``polygamma``, ``mvlgamma``,
``i0``, ``igamma``, ``igammac``): the op records of :mod:`ember.ops.special_ops` plus the one composite,
mvlgamma. No SciPy needed: the values come from the backend's special functions (ember's vectorized
NumPy versions on CPU, SciPy's where faster).

Example:
    >>> import ember
    >>> round(ember.lgamma(ember.tensor(5.0)).item(), 6)  # log(4!)
    3.178054
"""
from __future__ import annotations

import math
from ember.dtypes import get_default_dtype
from ember.ops import special_ops
from ember.ops.elementwise import real_only
from ember.ops.special_ops import digamma, i0, igamma, igammac, lgamma, polygamma  # noqa: F401  (re-exported)
from ember.ops.views import stack
from ember.tensor import Tensor

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac"]


def _float(x: Tensor) -> Tensor:
    return x if x.is_floating_point() else x.to(get_default_dtype())


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma: sum_j lgamma(x - j/2) + p(p-1)/4 log(pi) (``torch.special.multigammaln``).

    Example: ``ember.mvlgamma(ember.tensor([2.5]), 2)`` is ``tensor([1.4704])``."""
    real_only("multigammaln", input)
    x = _float(input)
    if p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1, got p={p}")
    # No check of x against (p - 1) / 2: PyTorch 2.13 dropped it (x <= (p - 1) / 2 gives the lgamma sum, inf at
    # the poles), and a check that reads the values could not be traced or exported.
    terms = stack([special_ops.lgamma(x - j / 2) for j in range(p)]).sum(dim=0)
    return terms + p * (p - 1) / 4 * math.log(math.pi)

