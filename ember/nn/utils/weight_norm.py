"""Weight normalization and spectral normalization: the hook-based ``torch.nn.utils.weight_norm`` /
``spectral_norm`` (parameters ``weight_g``/``weight_v``, ``weight_orig`` with ``weight_u``/``weight_v``
buffers), and the parametrization versions in :mod:`ember.nn.utils.parametrizations`.

Example:
    >>> import ember
    >>> m = ember.nn.utils.weight_norm(ember.nn.Linear(4, 2))
    >>> sorted(n for n, _ in m.named_parameters())
    ['bias', 'weight_g', 'weight_v']
"""
from __future__ import annotations

from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.creation import randn
from ember.ops.elementwise import clamp, sqrt
from ember.ops.linalg import dot
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _norm_except_dim(v: Tensor, dim: int | None) -> Tensor:
    if dim is None or dim == -1 and v.ndim == 0:
        return v.norm()
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return sqrt((v * v).sum(dim=others, keepdim=True)) if others else v.abs()


def _weight_from(g: Tensor, v: Tensor, dim: int | None) -> Tensor:
    return v * (g / _norm_except_dim(v, dim))


class _WeightNormHook:
    def __init__(self, name: str, dim: int | None) -> None:
        self.name, self.dim = name, dim

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, _weight_from(getattr(module, self.name + "_g"),
                                                           getattr(module, self.name + "_v"), self.dim))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every dim but ``dim``)."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = module._parameters[name]
    if dim is None:
        dim = -1
    real_dim = None if dim == -1 else dim
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, real_dim).detach().clone()))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    hook = _WeightNormHook(name, real_dim)
    hook(module, None)
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            weight = _weight_from(getattr(module, name + "_g"), getattr(module, name + "_v"), hook.dim)
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight.detach().clone()))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


def _l2_normalize(x: Tensor, eps: float) -> Tensor:
    return x / clamp(x.norm(), min=eps)


class _SpectralNormHook:
    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def matrix(self, weight: Tensor) -> Tensor:
        w = weight
        if self.dim != 0:
            w = w.permute(self.dim, *[d for d in range(w.ndim) if d != self.dim])
        return w.reshape(w.shape[0], -1)

    def compute(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(_l2_normalize(mat.t().detach() @ u, self.eps))
                    u.copy_(_l2_normalize(mat.detach() @ v, self.eps))
        sigma = dot(u.clone(), mat @ v.clone())
        return weight / sigma

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute(module, module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration each forward."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                         f"{n_power_iterations}")
    weight = module._parameters[name]
    hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
    with no_grad():
        mat = hook.matrix(weight)
        h, w = mat.shape
        u = _l2_normalize(randn(h, dtype=weight.dtype), eps)
        v = _l2_normalize(randn(w, dtype=weight.dtype), eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            with no_grad():
                weight = hook.compute(module, False)
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight.detach()))
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
