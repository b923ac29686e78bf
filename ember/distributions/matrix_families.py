"""Distributions over matrices: ``LKJCholesky`` (Cholesky factors of correlation matrices) and ``Wishart``
(positive-definite matrices).

LKJCholesky(d, eta) gives L with L L^T a correlation matrix of density ∝ det(L L^T)^(eta - 1); it
is sampled by the onion method (Lewandowski, Kurowicka & Joe 2009): row i is sqrt(y_i) times a
uniform direction in its first i coordinates, y_i ~ Beta(i/2, eta + (d - 2)/2 - (i - 1)/2), and the
diagonal completes the unit row norm. Wishart(df, Sigma) is sampled by the Bartlett decomposition
(chi-squared diagonal, standard normal below it), so ``rsample`` carries gradients to Sigma and df.

Example:
    >>> import ember
    >>> from ember.distributions import LKJCholesky, Wishart
    >>> L = LKJCholesky(3, 0.5).sample()
    >>> bool(((L @ L.T).diagonal() - 1).abs().max() < 1e-5)
    True
    >>> Wishart(df=4.0, covariance_matrix=ember.eye(2)).mean.tolist()
    [[4.0, 0.0], [0.0, 4.0]]
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from ember import creation
from ember.linalg import slogdet
from ember.ops.elementwise import where
from ember.ops.extra_math import diag_embed
from ember.ops.special_ops import digamma, lgamma
from ember.surface.special_linalg import mvlgamma
from ember.distributions import constraints
from ember.distributions._linalg import cholesky, solve_triangular
from ember.distributions.continuous import _noise
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.gamma_family import Beta
from ember.distributions.more_families import Chi2
from ember.distributions.multivariate_normal import _precision_to_scale_tril
from ember.distributions.utils import broadcast_all, finfo_eps, finfo_tiny, lazy_property
from ember.tensor import Size, Tensor

__all__ = ["LKJCholesky", "Wishart"]

_LOG_2 = math.log(2.0)


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


class LKJCholesky(Distribution):
    """LKJ distribution over lower Cholesky factors of ``dim`` x ``dim`` correlation matrices.

    Example:
        >>> import ember
        >>> tuple(LKJCholesky(3, ember.ones(2)).sample((4,)).shape)
        (4, 2, 3, 3)
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration: Any = 1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        self._beta = self._row_betas(self.concentration)
        super().__init__(self.concentration.shape, Size((dim, dim)), validate_args=validate_args)

    def _row_betas(self, concentration: Tensor) -> Beta:
        """Beta laws of the squared off-diagonal norms of the rows: row i (i off-diagonal entries) has
        Beta(i/2, eta + (d - 2)/2 - (i - 1)/2). Row 0 has no entries (its Beta is a placeholder).

        PyTorch 2.13 uses (i - 1/2) for the first parameter, which is right for row 1 only: its samples'
        marginal correlations are not the LKJ ones from row 2 on (tests/distributions check ember's against
        the Beta(eta - 1 + d/2, eta - 1 + d/2) marginal law)."""
        rows = creation.arange(self.dim, dtype=concentration.dtype, device=concentration.device)
        conc1 = (rows * 0.5).clamp(min=0.5)
        marginal = concentration + 0.5 * (self.dim - 2)
        conc0 = marginal.unsqueeze(-1) - 0.5 * (rows - 1).clamp(min=0)
        return Beta(conc1, conc0, validate_args=False)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        shape = self._extended_shape(sample_shape)
        normal = _noise("normal", shape, y).tril(-1)
        norm = normal.pow(2).sum(-1, keepdim=True).sqrt()
        # row 0 has no off-diagonal entries: its direction is 0 (not 0/0)
        direction = normal / where(norm > 0, norm, creation.ones_like(norm))
        w = y.sqrt() * direction
        diag = (1 - w.pow(2).sum(-1)).clamp(min=finfo_tiny(w.dtype)).sqrt()
        return w + diag_embed(diag)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = creation.arange(2, self.dim + 1, dtype=value.dtype, device=value.device)
        exponents = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (exponents * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        log_normalizer = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - lgamma(alpha) * dm1
        return unnormalized - log_normalizer


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """sum_{i < p} digamma(x - i/2): the derivative of the multivariate lgamma."""
    shifts = creation.arange(p, dtype=x.dtype, device=x.device) * 0.5
    return digamma(x.unsqueeze(-1) - shifts).sum(-1)


class Wishart(ExponentialFamily):
    """Wishart with ``df`` > dim - 1 and one of covariance_matrix / precision_matrix / scale_tril.

    Example:
        >>> import ember
        >>> tuple(Wishart(5.0, scale_tril=ember.eye(3)).rsample((2,)).shape)
        (2, 3, 3)
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict:  # type: ignore[override]
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df: Any, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None) -> None:
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = creation.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = np.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        name = "scale_tril" if scale_tril is not None else \
            "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
        setattr(self, name, param.expand(batch_shape + (-1, -1)))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                          stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._bartlett_chi2(self.df, batch_shape)

    def _bartlett_chi2(self, df: Tensor, batch_shape: tuple) -> Chi2:
        """Chi2(df - i) for i = 0..p-1: the squared diagonal of the Bartlett factor."""
        p = self._event_shape[-1]
        steps = creation.arange(p, dtype=self._unbroadcasted_scale_tril.dtype, device=df.device)
        return Chi2((df.unsqueeze(-1) - steps).expand(tuple(batch_shape) + (p,)), validate_args=False)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(tuple(batch_shape))
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._bartlett_chi2(new.df, tuple(batch_shape))
        new._validate_args = self._validate_args
        return new

    def _full(self, x: Tensor) -> Tensor:
        return x.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._full(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        return self._full(lower @ _mT(lower))

    @lazy_property
    def precision_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        eye = creation.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand(lower.shape)
        lower_inv = solve_triangular(lower, eye, upper=False)
        return self._full(_mT(lower_inv) @ lower_inv)

    def _df_matrix(self) -> Tensor:
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._event_shape[-1] - 1
        factor = where(factor <= 0, creation.full_like(factor, math.nan), factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        v = self.covariance_matrix
        diag = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sample(self, sample_shape: tuple) -> Tensor:
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        chi = chi.clamp(min=finfo_eps(chi.dtype))  # a zero diagonal would make the sample singular
        shape = tuple(sample_shape) + tuple(self._batch_shape) + (p, p)
        below = _noise("normal", Size(shape), chi).tril(-1)
        factor = self._unbroadcasted_scale_tril @ (below + diag_embed(chi))
        return factor @ _mT(factor)

    def rsample(self, sample_shape: Any = Size(), max_try_correction: int | None = None) -> Tensor:
        """Bartlett samples; a singular draw (possible for df near dim - 1) is redrawn up to
        ``max_try_correction`` (default 10) times, with a warning, as PyTorch does."""
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample_shape = tuple(sample_shape) if isinstance(sample_shape, (tuple, list, Size)) else (sample_shape,)
        sample = self._bartlett_sample(sample_shape)
        singular = ~self.support.check(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sample(sample_shape)
                sample = where(singular.unsqueeze(-1).unsqueeze(-1), redraw, sample)
                singular = ~self.support.check(sample)
                if not bool(singular.any()):
                    break
        return sample

    def _half_log_det_scale(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        lower = self._unbroadcasted_scale_tril
        batch = np.broadcast_shapes(tuple(lower.shape[:-2]), tuple(value.shape[:-2]))
        lower = lower.expand(batch + (p, p))
        # tr(Sigma^-1 X) = tr(L^-T L^-1 X)
        solved = solve_triangular(_mT(lower), solve_triangular(lower, value.expand(batch + (p, p)), upper=False),
                                  upper=True)
        trace = solved.diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + self._half_log_det_scale()) - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * slogdet(value).logabsdet - trace / 2)

    def entropy(self) -> Tensor:
        nu, p = self.df, self._event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._half_log_det_scale()) + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self) -> tuple:
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p)
