"""``Multinomial`` (counts over K categories) and ``MixtureSameFamily`` (a Categorical mixture of one
batched component family), with PyTorch's semantics.

Example:
    >>> import ember
    >>> from ember.distributions import Categorical, MixtureSameFamily, Normal
    >>> mix = MixtureSameFamily(Categorical(probs=ember.tensor([0.5, 0.5])), Normal(ember.tensor([-1.0, 1.0]), 1.0))
    >>> round(mix.mean.item(), 4), tuple(mix.sample((3,)).shape)
    (0.0, (3,))
"""
from __future__ import annotations

from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.creation import tensor, zeros_like
from ember.ops.elementwise import isinf, where
from ember.ops.nn_ops import log_softmax, one_hot
from ember.ops.reductions import logsumexp
from ember.ops.views import gather
from ember.distributions import constraints
from ember.distributions._special import lgamma
from ember.distributions.discrete import Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.more_families import Binomial
from ember.tensor import Size, Tensor

__all__ = ["MixtureSameFamily", "Multinomial"]


class Multinomial(Distribution):
    """Counts of ``total_count`` draws from Categorical(probs/logits); event_shape (K,)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count: int = 1, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        param = self._categorical._param
        super().__init__(self._categorical.batch_shape, param.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs, validate_args=False)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        return constraints.multinomial(self.total_count)  # (torch's: counts >= 0 summing to at most total_count)

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (sample_shape,)
        k = self._categorical._num_events
        draws = self._categorical.sample((self.total_count,) + tuple(sample_shape))  # (n, *sample, *batch)
        counts = one_hot(draws, k).to(self.probs.dtype).sum(0)
        return counts.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.to(self.logits.dtype)
        logits = self.logits.expand(tuple(value.shape)) if value.dim() >= self.logits.dim() else self.logits
        value = value.expand(tuple(logits.shape))
        # 0 * -inf is 0 here: a category of probability 0 observed 0 times costs nothing
        logits = where((value == 0) & isinf(logits), zeros_like(logits), logits)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self) -> Tensor:
        n = self.total_count
        support = self._binomial.enumerate_support()
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = lgamma(support + 1)
        return n * self._categorical.entropy() - lgamma(tensor(float(n + 1), dtype=self.probs.dtype)) \
            + (binomial_probs * weights).sum((0, -1))


class MixtureSameFamily(Distribution):
    """A mixture: pick a component with ``mixture_distribution`` (Categorical over the rightmost batch
    dim of ``component_distribution``), then draw from it."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical, component_distribution: Distribution,
                 validate_args: bool | None = None) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                                 f"`component_distribution.batch_shape`({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km is not None and kc is not None and km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        batch_shape = tuple(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self) -> constraints.Constraint:
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self) -> Categorical:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        return self._component_distribution

    def _weights(self) -> Tensor:
        probs = self.mixture_distribution.probs
        for _ in range(self._event_ndims):
            probs = probs.unsqueeze(-1)
        return probs

    @property
    def mean(self) -> Tensor:
        return (self._weights() * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._weights()
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(dim)
        var_cond_mean = (probs * (self.component_distribution.mean - self.mean.unsqueeze(dim)).pow(2)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x: Tensor) -> Tensor:
        x = self._pad(x)
        return (self.component_distribution.cdf(x) * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)
        log_mix_prob = log_softmax(self.mixture_distribution.logits, dim=-1)
        return logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (sample_shape,)
        with no_grad():
            sample_len = len(sample_shape)
            batch_len = len(self.batch_shape)
            gather_dim = sample_len + batch_len
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            index = index.expand(mix_shape + (1,) + es)
            samples = gather(comp_samples, gather_dim, index)
            return samples.squeeze(gather_dim)

    def _pad(self, x: Tensor) -> Tensor:
        return x.unsqueeze(-1 - self._event_ndims)

    def __repr__(self) -> str:
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})")
