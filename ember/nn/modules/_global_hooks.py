"""Hooks on every Module (``torch.nn.modules.module.register_module_*_hook``): profilers and FLOP counters
register them once instead of walking a model. Module.__call__ reads these dicts (empty: one truth test).

Example:
    >>> seen = []
    >>> h = register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
    >>> _ = ember.nn.ReLU()(ember.ones(1)); h.remove(); seen
    ['ReLU']
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable

_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: set = set()
_global_forward_hooks_always_called: set = set()
_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
_global_buffer_registration_hooks: OrderedDict = OrderedDict()
_global_module_registration_hooks: OrderedDict = OrderedDict()
_global_parameter_registration_hooks: OrderedDict = OrderedDict()


def _register(hooks: OrderedDict, hook: Callable) -> "RemovableHandle":  # noqa: F821
    from ember.nn.modules.module import RemovableHandle

    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_module_forward_pre_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, args)`` before every module's forward (before the module's own pre-hooks)."""
    return _register(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> "RemovableHandle":  # noqa: F821
    """``hook(module, args, output)`` after every module's forward (before the module's own hooks)."""
    handle = _register(_global_forward_hooks, hook)
    if with_kwargs:
        _global_forward_hooks_with_kwargs.add(handle.id)
    if always_call:
        _global_forward_hooks_always_called.add(handle.id)
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, grad_output)`` for every module's backward."""
    return _register(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, grad_input, grad_output)`` for every module's backward."""
    return _register(_global_backward_hooks, hook)


register_module_backward_hook = register_module_full_backward_hook  # (torch's deprecated name; run as full)


def register_module_buffer_registration_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, name, buffer) -> Tensor | None`` when any module registers a buffer."""
    return _register(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, name, submodule) -> Module | None`` when any module registers a submodule."""
    return _register(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable) -> "RemovableHandle":  # noqa: F821
    """``hook(module, name, param) -> Parameter | None`` when any module registers a parameter."""
    return _register(_global_parameter_registration_hooks, hook)
