"""``ember.distributions``: probability distributions with PyTorch's API (``torch.distributions``).

Every public name of torch 2.13's ``torch.distributions``: the families (Normal ... Wishart), ``constraints``,
``transforms``, ``biject_to``/``transform_to``, ``kl_divergence``/``register_kl`` with all of torch's KL
pairs. See docs/math.md (what differs from torch and why).

Example:
    >>> import ember
    >>> from ember.distributions import Normal, kl_divergence
    >>> p, q = Normal(ember.zeros(2), 1.0), Normal(ember.ones(2), 1.0)
    >>> p.sample((4,)).shape, kl_divergence(p, q).tolist()
    (ember.Size([4, 2]), [0.5, 0.5])
"""
from __future__ import annotations

from ember.distributions import constraints, relaxed, transforms  # noqa: F401
from ember.distributions.continuous import Exponential, Laplace, Normal, Uniform
from ember.distributions.discrete import Bernoulli, Categorical, OneHotCategorical
from ember.distributions.distribution import Distribution
from ember.distributions.gamma_family import Beta, Dirichlet, Gamma, Poisson
from ember.distributions.derived_families import (HalfCauchy, InverseGamma, NegativeBinomial,
                                                  OneHotCategoricalStraightThrough, Pareto, Weibull)
from ember.distributions.independent import Independent
from ember.distributions.kl import kl_divergence, register_kl
from ember.distributions.more_families import Binomial, Cauchy, Chi2, Geometric, Gumbel, HalfNormal, StudentT
from ember.distributions.multivariate_normal import MultivariateNormal
from ember.distributions.mixtures import MixtureSameFamily, Multinomial
from ember.distributions.relaxed import RelaxedBernoulli, RelaxedOneHotCategorical  # logit-space bases: .relaxed
from ember.distributions.transformed_distribution import LogNormal, TransformedDistribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.unit_interval_families import ContinuousBernoulli, Kumaraswamy, LogisticNormal
from ember.distributions.tail_families import FisherSnedecor, GeneralizedPareto
from ember.distributions.von_mises import VonMises
from ember.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from ember.distributions.matrix_families import LKJCholesky, Wishart
from ember.distributions import kl_cross_families  # noqa: F401  (registers the cross-family KL pairs)
from ember.distributions.constraint_registry import biject_to, transform_to
from ember.distributions.transforms import (CatTransform, CorrCholeskyTransform, CumulativeDistributionTransform,
                                            LowerCholeskyTransform, PositiveDefiniteTransform, ReshapeTransform,
                                            StackTransform)
from ember.distributions.transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                                            IndependentTransform, PowerTransform, SigmoidTransform, SoftmaxTransform,
                                            SoftplusTransform, StickBreakingTransform, TanhTransform, Transform,
                                            identity_transform)

__all__ = ["HalfCauchy", "InverseGamma", "NegativeBinomial", "OneHotCategoricalStraightThrough", "Pareto", "Weibull",
           "AbsTransform", "IndependentTransform", "PowerTransform", "SoftmaxTransform", "SoftplusTransform",
           "StickBreakingTransform", "TanhTransform", "identity_transform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ComposeTransform",
           "Dirichlet", "Distribution", "Geometric", "Gumbel", "HalfNormal", "StudentT",
           "ExpTransform", "Exponential", "Gamma", "Independent", "Laplace", "LogNormal", "MixtureSameFamily", "Multinomial",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "MultivariateNormal", "Normal",
           "OneHotCategorical", "Poisson", "SigmoidTransform", "Transform", "TransformedDistribution", "Uniform",
           "constraints", "kl_divergence", "register_kl", "transforms"]
__all__ += ["ExponentialFamily", "ContinuousBernoulli", "Kumaraswamy", "LogisticNormal", "FisherSnedecor",
            "GeneralizedPareto", "VonMises", "LowRankMultivariateNormal", "LKJCholesky", "Wishart", "biject_to",
            "transform_to", "CatTransform", "CorrCholeskyTransform", "CumulativeDistributionTransform",
            "LowerCholeskyTransform", "PositiveDefiniteTransform", "ReshapeTransform", "StackTransform"]
