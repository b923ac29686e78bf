"""Removable hook handles, and hooks on every Module (``torch.nn.modules.module.register_module_*_hook``): profilers and FLOP counters
register them once instead of walking a model. Module.__call__ reads these dicts (empty: one truth test).

Example:
    >>> seen = []
    >>> h = register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
    >>> _ = ember.nn.ReLU()(ember.ones(1)); h.remove(); seen
    ['ReLU']
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any, Callable

_HANDLE_IDS = itertools.count()
# Bumped whenever a hook is added or removed or a parametrization changes a module's class: ember.compile re-reads
# the hooks of the modules it reaches only when this moved (a trace bakes the hooks in; ember/graph/compile.py).
HOOK_CHANGES = [0]


class RemovableHandle:
    """Returned by ``register_*_hook``; ``handle.remove()`` unregisters the hook (also usable as ``with``)."""

    def __init__(self, *hook_dicts: dict) -> None:
        self.id = next(_HANDLE_IDS)
        self._dicts = hook_dicts

    def remove(self) -> None:
        HOOK_CHANGES[0] += 1
        for hooks in self._dicts:
            hooks.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
    """Register ``hook`` in ``hooks`` (first when ``prepend``); the handle removes it."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    HOOK_CHANGES[0] += 1
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: set = set()
_global_forward_hooks_always_called: set = set()
_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
_global_buffer_registration_hooks: OrderedDict = OrderedDict()
_global_module_registration_hooks: OrderedDict = OrderedDict()
_global_parameter_registration_hooks: OrderedDict = OrderedDict()


def _register(hooks: OrderedDict, hook: Callable) -> RemovableHandle:
    return _add_hook(hooks, hook, False)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, args)`` before every module's forward (before the module's own pre-hooks)."""
    return _register(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """``hook(module, args, output)`` after every module's forward (before the module's own hooks)."""
    handle = _register(_global_forward_hooks, hook)
    if with_kwargs:
        _global_forward_hooks_with_kwargs.add(handle.id)
    if always_call:
        _global_forward_hooks_always_called.add(handle.id)
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_output)`` for every module's backward."""
    return _register(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_input, grad_output)`` for every module's backward."""
    return _register(_global_backward_hooks, hook)


register_module_backward_hook = register_module_full_backward_hook  # (torch's deprecated name; run as full)


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, name, buffer) -> Tensor | None`` when any module registers a buffer."""
    return _register(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, name, submodule) -> Module | None`` when any module registers a submodule."""
    return _register(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, name, param) -> Parameter | None`` when any module registers a parameter."""
    return _register(_global_parameter_registration_hooks, hook)
