"""``torch.special``: every public function of PyTorch 2.13's ``torch.special`` under its name.

Most are op records of :mod:`ember.ops.special_ops` (Bessel, Airy, gamma family, zeta, incomplete
gamma, normal CDF and its inverse, orthogonal polynomials); the rest are aliases of ember's ops
(``expit`` is sigmoid, ``log1p``, ``round``, ``softmax``, ...) and two composites (multigammaln,
sinc). Values are accurate without SciPy (docs/special.md has the coverage table and measured errors).

Example:
    >>> import ember
    >>> round(ember.special.expit(tensor(0.0)).item(), 3), round(ember.special.entr(tensor(0.5)).item(), 4)
    (0.5, 0.3466)
"""
from __future__ import annotations

from typing import Any

from ember.creation import tensor  # noqa: F401  (the docstring example)
from ember.ops import dispatch, elementwise, extra_math, nn_ops, reductions, special_ops
from ember.ops.elementwise import sigmoid
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
           "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma", "entr", "erf",
           "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e", "laguerre_polynomial_l",
           "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]

expit = sigmoid
logit = extra_math.logit
erf = elementwise.erf
erfc = _functions.erfc
erfinv = extra_math.erfinv
erfcx = extra_math.erfcx
gammaln = special_ops.lgamma
digamma = psi = special_ops.digamma
polygamma = special_ops.polygamma
multigammaln = _sl.mvlgamma
i0, i0e, i1, i1e = special_ops.i0, special_ops.i0e, special_ops.i1, special_ops.i1e
ndtr, log_ndtr, ndtri = special_ops.ndtr, special_ops.log_ndtr, special_ops.ndtri
entr = special_ops.entr
xlogy = extra_math.xlogy
xlog1py = special_ops.xlog1py
zeta = special_ops.zeta
gammainc, gammaincc = special_ops.igamma, special_ops.igammac
sinc = _functions.sinc
log1p = elementwise.log1p
expm1 = extra_math.expm1
exp2 = extra_math.exp2
round = elementwise.round  # noqa: A001
logsumexp = reductions.logsumexp


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return nn_ops.log_softmax(input, dim=dim, dtype=dtype)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # (dtype positional, as torch)
    return nn_ops.softmax(input, dim=dim, dtype=dtype)


# torch 2.13 names these functions' argument ``x`` (its other special functions say ``input``)
_NAMED_X = {"airy_ai", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"}


def _unary_function(name: str) -> Any:
    op = special_ops.NO_GRAD_UNARY[name]

    def fn(input: Tensor) -> Tensor:
        return dispatch.unary(op, input)

    if name in _NAMED_X:
        def fn(x: Tensor) -> Tensor:  # noqa: F811
            return dispatch.unary(op, x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.special.{name}`` elementwise (no gradient, as in PyTorch)."
    return fn


def _polynomial(name: str) -> Any:
    op = special_ops.POLYNOMIALS[name]

    def fn(x: Any, n: Any) -> Tensor:  # (torch's name for the point)
        return dispatch.binary(op, x, n)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``torch.special.{name}(input, n)``: the polynomial of degree n (truncated to an integer; "
                  f"negative n gives 0) at input, broadcast; no gradient, as in PyTorch.")
    return fn


airy_ai = _unary_function("airy_ai")
bessel_j0, bessel_j1 = _unary_function("bessel_j0"), _unary_function("bessel_j1")
bessel_y0, bessel_y1 = _unary_function("bessel_y0"), _unary_function("bessel_y1")
modified_bessel_i0, modified_bessel_i1 = _unary_function("modified_bessel_i0"), _unary_function("modified_bessel_i1")
modified_bessel_k0, modified_bessel_k1 = _unary_function("modified_bessel_k0"), _unary_function("modified_bessel_k1")
scaled_modified_bessel_k0 = _unary_function("scaled_modified_bessel_k0")
scaled_modified_bessel_k1 = _unary_function("scaled_modified_bessel_k1")
spherical_bessel_j0 = _unary_function("spherical_bessel_j0")
chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w")
hermite_polynomial_h = _polynomial("hermite_polynomial_h")
hermite_polynomial_he = _polynomial("hermite_polynomial_he")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l")
legendre_polynomial_p = _polynomial("legendre_polynomial_p")
