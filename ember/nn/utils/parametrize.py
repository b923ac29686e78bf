"""``torch.nn.utils.parametrize``: a parameter computed from an ``original`` by modules on every access.

``register_parametrization(m, "weight", P)`` moves ``m.weight`` to ``m.parametrizations.weight.original``
(state-dict key ``parametrizations.weight.original``, as PyTorch) and makes ``m.weight`` a property that
returns ``P(original)``, so gradients reach ``original``.

Example:
    >>> import ember
    >>> class Symmetric(ember.nn.Module):
    ...     def forward(self, X):
    ...         return X.triu() + X.triu(1).transpose(0, 1)
    >>> m = ember.nn.Linear(3, 3)
    >>> _ = ember.nn.utils.parametrize.register_parametrization(m, "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all())
    True
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.modules.module import HOOK_CHANGES, Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor
from ember.autograd import no_grad

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "transfer_parametrizations_and_params", "type_before_parametrizations"]

_CACHE: dict | None = None


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Compute each parametrized tensor once inside the block (for weights read many times per step)."""
    global _CACHE
    outer = _CACHE
    _CACHE = {} if outer is None else outer
    try:
        yield
    finally:
        _CACHE = outer


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to ``original``."""

    def __init__(self, modules: Any, original: Tensor, unsafe: bool = False) -> None:
        super().__init__(modules)
        self.unsafe = unsafe
        right_inverse = getattr(modules[0], "right_inverse", None)
        value: Any = original
        if right_inverse is not None:
            with no_grad():
                try:
                    value = right_inverse(original)
                except NotImplementedError:  # as PyTorch: a right_inverse that cannot run is taken as the identity
                    value = original
        # A right_inverse returning several tensors stores them as original0, original1, ... (as PyTorch).
        self.is_tensor = isinstance(value, Tensor)
        values = [value] if self.is_tensor else list(value)
        self.ntensors = len(values)
        for k, v in enumerate(values):
            param = original if v is original and isinstance(original, Parameter) else \
                Parameter(v.detach().clone(), original.requires_grad)
            setattr(self, "original" if self.is_tensor else f"original{k}", param)

    def _originals(self) -> list:
        return [self.original] if self.is_tensor else [getattr(self, f"original{k}") for k in range(self.ntensors)]

    def right_inverse(self, value: Tensor) -> None:
        with no_grad():
            for module in reversed(list(self)):
                inverse = getattr(module, "right_inverse", None)
                if inverse is None:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = inverse(value)
            values = [value] if self.is_tensor else list(value)
            for target, v in zip(self._originals(), values):
                target.copy_(v)

    def forward(self) -> Tensor:
        modules = list(self)
        x = modules[0](*self._originals())
        for module in modules[1:]:
            x = module(x)
        return x


def _make_property(name: str) -> property:
    def getter(self: Module) -> Tensor:
        plist = self.parametrizations[name]
        if _CACHE is not None:
            key = (id(self), name)
            if key not in _CACHE:
                _CACHE[key] = plist()
            return _CACHE[key]
        return plist()

    def setter(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    return property(getter, setter)


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    if is_parametrized(module, tensor_name):
        module.parametrizations[tensor_name].append(parametrization)
        return module
    original = module._parameters.get(tensor_name, module._buffers.get(tensor_name))
    if original is None:
        raise ValueError(f"Module '{type(module).__name__}' does not have a parameter, a buffer, or a parametrized "
                         f"element with name '{tensor_name}'")
    if not unsafe and getattr(parametrization, "right_inverse", None) is None:
        with __import__("ember").no_grad():
            probe = parametrization(original)
        if not isinstance(probe, Tensor):
            raise ValueError(f"A parametrization must return a tensor. Got {type(probe).__name__}.")
        if tuple(probe.shape) != tuple(original.shape) or probe.dtype != original.dtype:
            raise ValueError("Registering a parametrization may not change the shape or dtype of the tensor, "
                             f"unless `unsafe` flag is enabled. original: {tuple(original.shape)} "
                             f"{original.dtype}, parametrized: {tuple(probe.shape)} {probe.dtype}")
    plist = ParametrizationList([parametrization], original, unsafe)
    if tensor_name in module._parameters:
        del module._parameters[tensor_name]
    else:
        del module._buffers[tensor_name]
    if "parametrizations" not in module._modules:
        module.parametrizations = ModuleDict()
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"_orig_class": cls,
                                                                        "__module__": cls.__module__})
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _make_property(tensor_name))
    HOOK_CHANGES[0] += 1  # ember.compile re-reads the modules it reaches (their classes and submodules changed)
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    plists = module._modules.get("parametrizations")
    if plists is None:
        return False
    return tensor_name is None or tensor_name in plists._modules


def type_before_parametrizations(module: Module) -> type:
    return getattr(type(module), "_orig_class", type(module))


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]

    with no_grad():
        value = plist() if leave_parametrized else plist._originals()[0]
    delattr(type(module), tensor_name)
    del module.parametrizations._modules[tensor_name]
    module.register_parameter(tensor_name, Parameter(value.detach().clone(), plist._originals()[0].requires_grad))
    HOOK_CHANGES[0] += 1
    if not module.parametrizations._modules:
        del module._modules["parametrizations"]
        module.__class__ = type_before_parametrizations(module)
    return module


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations._modules)
    for name in names:
        plist = from_module.parametrizations[name]
        if not hasattr(to_module, name) or name not in to_module._parameters:
            to_module.register_parameter(name, Parameter(plist.original.detach().clone()))
        for p in plist:
            register_parametrization(to_module, name, p)
        with __import__("ember").no_grad():
            to_module.parametrizations[name].original.copy_(plist.original)
    return to_module
