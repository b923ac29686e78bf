"""``Distribution``: the base class of ember's probability distributions, with PyTorch's semantics.

Shapes: a sample has shape ``sample_shape + batch_shape + event_shape``; ``log_prob`` reduces the
event dimensions. ``validate_args`` (on by default, as in PyTorch outside ``python -O``) checks the
parameters against ``arg_constraints`` at construction and values against ``support`` in
``log_prob``/``cdf``, raising PyTorch's ``ValueError`` messages.

Example:
    >>> import ember
    >>> from ember.distributions import Normal
    >>> d = Normal(ember.zeros(3), 1.0)
    >>> tuple(d.sample((5,)).shape), tuple(d.batch_shape), tuple(d.event_shape)
    ((5, 3), (3,), ())
"""
from __future__ import annotations

import warnings
from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.ops.elementwise import exp
from ember.distributions import constraints
from ember.distributions.utils import lazy_property
from ember.tensor import Size, Tensor

__all__ = ["Distribution"]


def _shown(value: Any) -> Any:
    """What PyTorch's f-strings print for ``value``: a 0-d tensor shows as its number (torch.Tensor.__format__)."""
    return value.item() if isinstance(value, Tensor) and value.dim() == 0 else value


class Distribution:
    """Base class: subclasses define ``arg_constraints``, ``support`` and the methods they can compute."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn validation on or off for distributions created afterwards without ``validate_args=``."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = Size(), event_shape: Any = Size(), validate_args: bool | None = None) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                              "or initialize the distribution with `validate_args=False` to turn off validation.")
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # skip checking lazily-constructed args
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                     f"of distribution {self!r} to satisfy the constraint {constraint!r}, "
                                     f"but found invalid values:\n{_shown(value)}")

    # ---- shapes -------------------------------------------------------------------------------------
    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = Size()) -> Size:
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (sample_shape,)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape: Any, _instance: Any = None) -> "Distribution":
        raise NotImplementedError(f"{self.__class__.__name__} does not implement expand")

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    # ---- what subclasses provide --------------------------------------------------------------------
    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError

    @property
    def support(self) -> Any:
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        """Draw without gradients; shape ``sample_shape + batch_shape + event_shape``."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        """Draw with gradients to the parameters (reparameterization), where ``has_rsample``."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return exp(self.entropy())

    # ---- validation ---------------------------------------------------------------------------------
    def _validate_sample(self, value: Any) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs {self._event_shape}.")
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(actual_shape)} vs "
                                 f"{Size(expected_shape)}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.")
            return
        if support is None:
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{_shown(value)}")

    _repr_hidden: tuple = ()

    def __repr__(self) -> str:
        try:
            # torch prints the parameters an instance stores itself; Beta (an inner Dirichlet) and HalfNormal (a
            # transformed Normal) keep theirs elsewhere in torch and print as Beta(), HalfNormal()
            names = [k for k in self.arg_constraints if k in self.__dict__ and k not in self._repr_hidden]
        except NotImplementedError:
            names = []
        parts = []
        for name in names:
            value = self.__dict__[name]
            parts.append(f"{name}: {_shown(value) if value.numel() == 1 else value.shape}")
        return f"{self.__class__.__name__}({', '.join(parts)})"
