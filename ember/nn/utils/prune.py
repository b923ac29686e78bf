"""``torch.nn.utils.prune``: masks on parameters, applied by a forward pre-hook.

Pruning ``module.weight`` keeps the values in the parameter ``weight_orig`` and the mask in the buffer
``weight_mask``; ``module.weight = weight_orig * weight_mask`` is recomputed before every forward.
Pruning again combines masks (the new amount counts the still-unpruned entries), as in PyTorch.

Example:
    >>> import ember
    >>> m = ember.nn.Linear(4, 3)
    >>> _ = ember.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5)
    >>> int((m.weight == 0).sum()), sorted(n for n, _ in m.named_buffers())
    (6, ['weight_mask'])
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any, Iterable, Iterator

from ember.autograd.grad_mode import no_grad
from ember.creation import ones_like, rand, zeros_like
from ember.ops import elementwise
from ember.ops.reductions import norm
from ember.ops.sorting import topk
from ember.ops.views import cat
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


def _validate_amount(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _amount_to_count(amount: Any, total: int) -> int:
    if isinstance(amount, numbers.Integral):
        if amount > total:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={total}")
        return int(amount)
    return round(amount * total)


class BasePruningMethod(ABC):
    PRUNING_TYPE: str = "unstructured"

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        ...

    def apply_mask(self, module: Module) -> Tensor:
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(orig.dtype) * orig

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Tensor | None = None,
              **kwargs: Any) -> "BasePruningMethod":
        old_method = None
        found = 0
        for key, hook in list(module._forward_pre_hooks.items()):
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old_method = hook
                del module._forward_pre_hooks[key]
                found += 1
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old_method is not None:
            container = old_method if isinstance(old_method, PruningContainer) else PruningContainer(old_method)
            container.add_pruning_method(method)
            method = container
        orig = getattr(module, name)
        scores = importance_scores if importance_scores is not None else orig
        if not found:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        with no_grad():
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
        module.register_buffer(name + "_mask", mask)
        object.__setattr__(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Tensor | None = None) -> Tensor:
        scores = importance_scores if importance_scores is not None else t
        default_mask = default_mask if default_mask is not None else ones_like(t)
        return t * self.compute_mask(scores, default_mask=default_mask)

    def remove(self, module: Module) -> None:
        weight = self.apply_mask(module)
        name = self._tensor_name
        module.__dict__.pop(name, None)
        orig = module._parameters[name + "_orig"]
        with no_grad():
            orig.copy_(weight)
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        module.register_parameter(name, orig)


class PruningContainer(BasePruningMethod):
    """Successive pruning of one tensor: each new method prunes among the entries still unpruned."""

    def __init__(self, *args: Any) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], BasePruningMethod):
            args = tuple(args[0])
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if self._pruning_methods:
            self._tensor_name = self._pruning_methods[0]._tensor_name
        else:
            self._tensor_name = method._tensor_name
        if method._tensor_name != self._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[BasePruningMethod]:
        """The pruning history, oldest first (``list(container)``, as PyTorch's)."""
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int) -> BasePruningMethod:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        method = self._pruning_methods[-1]
        new_mask = default_mask.clone()
        if method.PRUNING_TYPE == "unstructured":
            keep = default_mask == 1
            partial = method.compute_mask(t[keep], default_mask=default_mask[keep])
            new_mask[keep] = partial.to(new_mask.dtype)
        elif method.PRUNING_TYPE == "structured":
            dim = method.dim % t.ndim
            others = tuple(d for d in range(t.ndim) if d != dim)
            keep_channel = default_mask.sum(dim=others) != 0
            key = (slice(None),) * dim + (keep_channel,)
            partial = method.compute_mask(t[key], default_mask=default_mask[key])
            new_mask[key] = partial.to(new_mask.dtype)
        else:
            new_mask = method.compute_mask(t, default_mask=new_mask)
        return new_mask


class Identity(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> "BasePruningMethod":  # type: ignore[override]
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Any) -> None:
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        k = _amount_to_count(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            prob = rand(t.shape)
            idx = topk(prob.reshape(-1), k).indices
            flat = mask.reshape(-1)
            flat[idx] = 0
            mask = flat.reshape(t.shape)
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any) -> "BasePruningMethod":  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Any) -> None:
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        k = _amount_to_count(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            idx = topk(elementwise.abs(t).reshape(-1), k, largest=False).indices
            flat = mask.reshape(-1)
            flat[idx] = 0
            mask = flat.reshape(t.shape)
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> "BasePruningMethod":
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    PRUNING_TYPE = "structured"

    def _channels_to_keep(self, t: Tensor, k: int) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        dim = self.dim % t.ndim
        channels = t.shape[dim]
        k = _amount_to_count(self.amount, channels)
        keep = channels - k
        mask = zeros_like(default_mask)
        if keep:
            chosen = self._channels_to_keep(t, keep)
            key = (slice(None),) * dim + (chosen,)
            mask[key] = 1
        return mask * default_mask


class RandomStructured(_Structured):
    def __init__(self, amount: Any, dim: int = -1) -> None:
        _validate_amount(amount)
        self.amount, self.dim = amount, dim

    def _channels_to_keep(self, t: Tensor, keep: int) -> Tensor:
        dim = self.dim % t.ndim
        return topk(rand(t.shape[dim]), keep).indices

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any, dim: int = -1) -> "BasePruningMethod":  # type: ignore[override]
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    def __init__(self, amount: Any, n: Any, dim: int = -1) -> None:
        _validate_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def _channels_to_keep(self, t: Tensor, keep: int) -> Tensor:
        dim = self.dim % t.ndim
        others = tuple(d for d in range(t.ndim) if d != dim)
        norms = norm(t, p=self.n, dim=others)
        return topk(norms, keep).indices

    @classmethod
    def apply(cls, module: Module, name: str, amount: Any, n: Any, dim: int,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> "BasePruningMethod":
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask * self.mask.to(default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> "BasePruningMethod":  # type: ignore[override]
        return super().apply(module, name, mask=mask)


def identity(module: Module, name: str) -> Module:
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: Any) -> Module:
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: Any, importance_scores: Tensor | None = None) -> Module:
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: Any, dim: int) -> Module:
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: Any, n: Any, dim: int,
                  importance_scores: Tensor | None = None) -> Module:
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores: dict | None = None,
                        **kwargs: Any) -> None:
    """Prune across several tensors at once: ``amount`` counts over their concatenation."""
    parameters = list(parameters)
    scores = importance_scores or {}
    flat_scores = cat([scores.get((m, n), getattr(m, n)).detach().reshape(-1) for m, n in parameters])
    default_masks = cat([getattr(m, n + "_mask", ones_like(getattr(m, n))).detach().reshape(-1)
                               for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final = container.compute_mask(flat_scores, default_masks)
    offset = 0
    for module, name in parameters:
        n = getattr(module, name).numel()
        custom_from_mask(module, name, final[offset:offset + n].reshape(getattr(module, name).shape))
        offset += n


def remove(module: Module, name: str) -> Module:
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    return any(isinstance(hook, BasePruningMethod) for m in module.modules()
               for hook in m._forward_pre_hooks.values())
