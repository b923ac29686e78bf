"""The standalone ``functorch`` package's API, which ``ember run`` maps ``import functorch`` to.

PyTorch folded functorch into ``torch.func`` and keeps the ``functorch`` package as a deprecated alias:
``functorch.vmap``/``grad``/``jvp``/... are ``torch.func``'s transforms, and three functions have no
``torch.func`` counterpart and still appear in tutorials and older programs:

* :func:`make_functional` - ``(fmodel, params)`` with ``fmodel(params, *inputs)`` calling the module with
  ``params`` in place of its parameters;
* :func:`make_functional_with_buffers` - the same with ``(fmodel, params, buffers)`` and
  ``fmodel(params, buffers, *inputs)``;
* :func:`combine_state_for_ensemble` - ``(fmodel, params, buffers)`` of several models of one architecture,
  each parameter stacked along a new first dimension (for ``vmap(fmodel)(params, buffers, x)``).

As functorch, each works on a deep copy of the module, and the returned parameters are the copy's
(``disable_autograd_tracking=True`` returns them detached). PyTorch warns that these are deprecated; ember
does not (it has no newer spelling to point at beyond ``torch.func.functional_call``).

Example:
    >>> import ember
    >>> from ember.func.functorch import make_functional
    >>> fmodel, params = make_functional(ember.nn.Linear(2, 1))
    >>> fmodel(tuple(ember.zeros_like(p) for p in params), ember.ones(3, 2)).tolist()
    [[0.0], [0.0], [0.0]]
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

from ember.func.module_state import functional_call
from ember.func.transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp  # noqa: F401
from ember.func.vmap import vmap  # noqa: F401
from ember.func.functionalize import functionalize  # noqa: F401
from ember.ops.views import stack
from ember.nn.modules.module import Module

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize",
           "make_functional", "make_functional_with_buffers", "combine_state_for_ensemble", "FunctionalModule",
           "FunctionalModuleWithBuffers"]


def _unique_named(pairs: Any) -> tuple[list[str], list[Any]]:
    names, values = [], []
    for name, value in pairs:
        names.append(name)
        values.append(value)
    return names, values


class FunctionalModule(Module):
    """``fmodel(params, *args, **kwargs)``: the wrapped module run with ``params`` (a sequence in the order of
    ``named_parameters()``) in place of its own parameters."""

    def __init__(self, stateless_model: Module, param_names: Sequence[str]) -> None:
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = tuple(param_names)

    def forward(self, params: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        if len(params) != len(self.param_names):
            raise ValueError(f"FunctionalModule: expected {len(self.param_names)} parameters "
                             f"({', '.join(self.param_names)}), got {len(params)}")
        return functional_call(self.stateless_model, dict(zip(self.param_names, params)), args, kwargs)


class FunctionalModuleWithBuffers(Module):
    """``fmodel(params, buffers, *args, **kwargs)``: as :class:`FunctionalModule`, buffers given too."""

    def __init__(self, stateless_model: Module, param_names: Sequence[str], buffer_names: Sequence[str]) -> None:
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = tuple(param_names)
        self.buffer_names = tuple(buffer_names)

    def forward(self, params: Sequence[Any], buffers: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        if len(params) != len(self.param_names) or len(buffers) != len(self.buffer_names):
            raise ValueError(f"FunctionalModuleWithBuffers: expected {len(self.param_names)} parameters and "
                             f"{len(self.buffer_names)} buffers, got {len(params)} and {len(buffers)}")
        state = dict(zip(self.param_names, params))
        state.update(zip(self.buffer_names, buffers))
        return functional_call(self.stateless_model, state, args, kwargs)


def _copy_params(model: Module, disable_autograd_tracking: bool) -> tuple[Module, list[str], tuple]:
    if not isinstance(model, Module):
        raise TypeError(f"make_functional: expected an nn.Module, got {type(model).__name__}")
    model_copy = copy.deepcopy(model)
    names, params = _unique_named(model_copy.named_parameters())
    if disable_autograd_tracking:
        params = [p.detach() for p in params]
    return model_copy, names, tuple(params)


def make_functional(model: Module, disable_autograd_tracking: bool = False) -> tuple[FunctionalModule, tuple]:
    """``(fmodel, params)`` for a module without buffers (functorch's ``make_functional``).

    Example:
        >>> fmodel, params = make_functional(ember.nn.Linear(3, 2))
        >>> [tuple(p.shape) for p in params]
        [(2, 3), (2,)]
    """
    if len(list(model.buffers())) > 0:
        raise RuntimeError("make_functional(model): `model` has buffers. Please use "
                           "make_functional_with_buffers(model) instead.")
    model_copy, names, params = _copy_params(model, disable_autograd_tracking)
    return FunctionalModule(model_copy, names), params


def make_functional_with_buffers(model: Module, disable_autograd_tracking: bool = False
                                 ) -> tuple[FunctionalModuleWithBuffers, tuple, tuple]:
    """``(fmodel, params, buffers)`` (functorch's ``make_functional_with_buffers``).

    Example:
        >>> fmodel, params, buffers = make_functional_with_buffers(ember.nn.BatchNorm1d(2))
        >>> len(params), len(buffers)
        (2, 3)
    """
    model_copy, names, params = _copy_params(model, disable_autograd_tracking)
    buffer_names, buffers = _unique_named(model_copy.named_buffers())
    return FunctionalModuleWithBuffers(model_copy, names, buffer_names), params, tuple(buffers)


def combine_state_for_ensemble(models: Sequence[Module]) -> tuple[FunctionalModuleWithBuffers, tuple, tuple]:
    """``(fmodel, params, buffers)`` with every parameter and buffer stacked over ``models`` (dimension 0).

    Example:
        >>> fmodel, params, buffers = combine_state_for_ensemble([ember.nn.Linear(3, 2) for _ in range(4)])
        >>> tuple(params[0].shape)
        (4, 2, 3)
    """
    models = list(models)
    if not models:
        raise RuntimeError("combine_state_for_ensemble: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to have the same training/eval mode.")
    first = type(models[0])
    if any(type(m) is not first for m in models):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to be of the same class.")
    funcs, params, buffers = zip(*(make_functional_with_buffers(m) for m in models))
    stacked_params = tuple(stack(group).detach() for group in zip(*params))
    stacked_buffers = tuple(stack(group).detach() for group in zip(*buffers))
    return funcs[0], stacked_params, stacked_buffers
