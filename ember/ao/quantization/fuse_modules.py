"""``fuse_modules``: replace runs such as ``[conv, bn, relu]`` of a model by one fused module (the others by
``nn.Identity``), as PyTorch's. For inference (``fuse_modules``) BatchNorm is folded into the conv's weight and
bias; for QAT (``fuse_modules_qat``) it is kept (``nni.ConvBn2d``...), to be folded during training.

Example:
    >>> import ember.nn as nn
    >>> from ember.ao.quantization import fuse_modules
    >>> m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()).eval()
    >>> type(fuse_modules(m, [["0", "1"]])[0]).__name__
    'ConvReLU2d'
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from ember import nn
from ember.ao.nn import intrinsic as nni
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval


def _conv_bn(is_qat: bool, conv: Any, bn: Any) -> Any:
    if is_qat:
        if not conv.training:
            raise AssertionError("qat fusion only works in training mode (model.train())")
        return nni.ConvBn2d(conv, bn)
    return fuse_conv_bn_eval(conv, bn)


def _conv_bn_relu(is_qat: bool, conv: Any, bn: Any, relu: Any) -> Any:
    if is_qat:
        if not conv.training:
            raise AssertionError("qat fusion only works in training mode (model.train())")
        return nni.ConvBnReLU2d(conv, bn, relu)
    return nni.ConvReLU2d(fuse_conv_bn_eval(conv, bn), relu)


def _linear_bn(is_qat: bool, linear: Any, bn: Any) -> Any:
    if is_qat:
        return nni.LinearBn1d(linear, bn)
    return fuse_linear_bn_eval(linear, bn)


DEFAULT_OP_LIST_TO_FUSER_METHOD: dict[tuple, Callable] = {
    (nn.Conv2d, nn.BatchNorm2d): _conv_bn,
    (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): _conv_bn_relu,
    (nn.Conv2d, nn.ReLU): lambda is_qat, conv, relu: nni.ConvReLU2d(conv, relu),
    (nn.Linear, nn.ReLU): lambda is_qat, linear, relu: nni.LinearReLU(linear, relu),
    (nn.Linear, nn.BatchNorm1d): _linear_bn,
    (nn.BatchNorm2d, nn.ReLU): lambda is_qat, bn, relu: nni.BNReLU2d(bn, relu),
}


def get_fuser_method(op_list: tuple, additional_fuser_method_mapping: dict | None = None) -> Callable:
    mapping = {**DEFAULT_OP_LIST_TO_FUSER_METHOD, **(additional_fuser_method_mapping or {})}
    method = mapping.get(op_list)
    if method is None:
        raise AssertionError(f"did not find fuser method for: {op_list} (ember fuses {sorted(map(_names, mapping))})")
    return method


def _names(ops: tuple) -> str:
    return ", ".join(op.__name__ for op in ops)


def _get_module(model: Any, name: str) -> Any:
    for part in name.split("."):
        model = getattr(model, part)
    return model


def _set_module(model: Any, name: str, module: Any) -> None:
    *parents, last = name.split(".")
    for part in parents:
        model = getattr(model, part)
    setattr(model, last, module)


def fuse_known_modules(mod_list: list, is_qat: bool, additional_fuser_method_mapping: dict | None = None) -> list:
    """The fused module first, then ``nn.Identity`` for each other module of the run."""
    types = tuple(type(m) for m in mod_list)
    fused = get_fuser_method(types, additional_fuser_method_mapping)(is_qat, *mod_list)
    for hook in list(mod_list[0]._forward_pre_hooks.values()):
        fused.register_forward_pre_hook(hook)
    for hook in list(mod_list[-1]._forward_hooks.values()):
        fused.register_forward_hook(hook)
    return [fused] + [nn.Identity() for _ in mod_list[1:]]


def _fuse_modules(model: Any, modules_to_fuse: list, is_qat: bool, inplace: bool, fuser_func: Callable,
                  fuse_custom_config_dict: dict | None) -> Any:
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse if modules_to_fuse and isinstance(modules_to_fuse[0], (list, tuple)) else [modules_to_fuse]
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", {})
    for names in groups:
        new_modules = fuser_func([_get_module(model, n) for n in names], is_qat, extra)
        for name, module in zip(names, new_modules):
            _set_module(model, name, module)
    return model


def fuse_modules(model: Any, modules_to_fuse: list, inplace: bool = False, fuser_func: Callable = fuse_known_modules,
                 fuse_custom_config_dict: dict | None = None) -> Any:
    """Fuse runs of modules for inference (the model in eval mode): BatchNorm folded into the conv."""
    return _fuse_modules(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model: Any, modules_to_fuse: list, inplace: bool = False,
                     fuser_func: Callable = fuse_known_modules, fuse_custom_config_dict: dict | None = None) -> Any:
    """Fuse runs of modules for quantization-aware training (the model in train mode): BatchNorm kept."""
    return _fuse_modules(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
