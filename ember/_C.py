"""``torch._C``: the few entries of PyTorch's C extension that library code calls from Python.

torchvision calls ``torch._C._log_api_usage_once`` in every model's constructor and
``_get_tracing_state`` in its helpers; timm's ``set_jit_fuser`` switches TorchScript's fusers. ember has
no C extension, so this module holds the Python-visible behaviour of those calls: usage logging is off
(PyTorch's default logger ignores the events too), the tracing state is None unless ``torch.jit.trace``
records, and the TorchScript executor switches are accepted settings that return their previous value, as
PyTorch's do (ember's ``jit`` compiles through ember.compile, which they do not affect).

Example:
    >>> import ember
    >>> ember._C._log_api_usage_once("torchvision.models.resnet.ResNet")
    >>> ember._C._get_tracing_state() is None
    True
"""
from __future__ import annotations

from typing import Any

from ember.autograd import set_grad_enabled
from ember.jit.api import is_tracing

_JIT_FLAGS: dict[str, bool] = {"profiling_mode": True, "profiling_executor": True, "texpr_fuser": True,
                               "nvfuser": False, "can_fuse_on_cpu": True, "can_fuse_on_gpu": True}


def _log_api_usage_once(event: str) -> None:
    """Record a one-time API usage event (PyTorch's logger ignores it unless a handler is installed)."""
    if not isinstance(event, str):
        raise TypeError(f"_log_api_usage_once(): argument 'event' must be str, not {type(event).__name__}")


def _get_tracing_state() -> Any:
    """The current ``torch.jit.trace`` state: None when not tracing (a truthy marker while tracing)."""
    return True if is_tracing() else None


def _set_grad_enabled(mode: bool) -> None:
    """Switch gradient recording on or off for this thread (``torch._C._set_grad_enabled``)."""
    set_grad_enabled(bool(mode))


def _flag(name: str, value: bool) -> bool:
    old = _JIT_FLAGS[name]
    _JIT_FLAGS[name] = bool(value)
    return old


def _jit_set_profiling_mode(value: bool) -> bool:
    return _flag("profiling_mode", value)


def _jit_set_profiling_executor(value: bool) -> bool:
    return _flag("profiling_executor", value)


def _jit_set_texpr_fuser_enabled(value: bool) -> None:
    _flag("texpr_fuser", value)


def _jit_texpr_fuser_enabled() -> bool:
    return _JIT_FLAGS["texpr_fuser"]


def _jit_set_nvfuser_enabled(value: bool) -> bool:
    return _flag("nvfuser", value)


def _jit_override_can_fuse_on_cpu(value: bool) -> None:
    _flag("can_fuse_on_cpu", value)


def _jit_override_can_fuse_on_gpu(value: bool) -> None:
    _flag("can_fuse_on_gpu", value)


def _jit_can_fuse_on_cpu() -> bool:
    return _JIT_FLAGS["can_fuse_on_cpu"]


def _jit_can_fuse_on_gpu() -> bool:
    return _JIT_FLAGS["can_fuse_on_gpu"]


# ---- __torch_function__ (ember/_torch_function.py, ember.overrides) ---------------------------------------
from ember._torch_function import (  # noqa: E402
    DisableTorchFunction, DisableTorchFunctionSubclass, disabled_torch_function_impl as _disabled_torch_function_impl)
from ember import _torch_function as _tf  # noqa: E402
from ember.overrides import has_torch_function as _has_torch_function  # noqa: E402,F401


def _is_torch_function_enabled() -> bool:
    """False inside ``DisableTorchFunction`` (and, for subclasses, ``DisableTorchFunctionSubclass``)."""
    return not (_tf.STATE.no_torch_function or _tf.STATE.no_subclass)


def _is_torch_function_mode_enabled() -> bool:
    return bool(_tf.STATE.modes) and not _tf.STATE.no_torch_function

