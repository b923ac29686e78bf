"""``torch.ops``: operator namespaces. ``torch.ops.<ns>.<name>`` finds custom operators registered with
``ember.library``; ``torch.ops.aten.<name>`` maps PyTorch's ATen operators onto ember's functions (the
forward operators programs call directly: ``aten.add.Tensor``, ``aten.mm.default``, ``aten._softmax``,
``aten.convolution``, ``aten.embedding``, ...); ``torch.ops.load_library`` is refused (ember runs no compiled
torch extension).

ember's ``ops`` package is also where its own op families live (``ember.ops.elementwise``, ...): a name that
is one of those modules is imported as usual; any other name is an operator namespace.

Example:
    >>> import ember as torch
    >>> torch.ops.aten.add.Tensor(torch.ones(2), torch.ones(2), alpha=3).tolist()
    [4.0, 4.0]
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

from ember import _aten_impls, _aten_overloads, _aten_present  # noqa: F401  (binds the record -> ATen table)
from ember.custom_ops.registry import OPS, OpOverloadPacket, packet
from ember.nn import functional as F
from ember.profiler.profiler import record_function
from ember.tensor import Tensor


def _ember() -> Any:
    """The ``ember`` package, read from ``sys.modules`` at call time (importing it here would make a cycle
    through the package's own ``__init__``, which installs this module)."""
    return sys.modules["ember"]


def _convolution(input: Tensor, weight: Tensor, bias: Any, stride: Any, padding: Any, dilation: Any,
                 transposed: bool, output_padding: Any, groups: int) -> Tensor:
    dims = weight.ndim - 2
    if transposed:
        fn = getattr(F, f"conv_transpose{dims}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{dims}d")(input, weight, bias, stride, padding, dilation, groups)


def _embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
               sparse: bool = False) -> Tensor:
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _to_copy(x: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
             non_blocking: bool = False, memory_format: Any = None) -> Tensor:
    return x.to(device=device or x.device, dtype=dtype or x.dtype, copy=True)


def _factory(name: str) -> Callable:
    def make(*args: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
             **kwargs: Any) -> Tensor:
        return getattr(_ember(), name)(*args, dtype=dtype, device=device, **kwargs)

    return make


# ATen operators whose arguments differ from ember's public functions of the same name.
SPECIAL: dict[str, Callable] = {
    "_softmax": lambda x, dim, half_to_float=False: F.softmax(x, dim),
    "_log_softmax": lambda x, dim, half_to_float=False: F.log_softmax(x, dim),
    "convolution": _convolution,
    "embedding": _embedding,
    "_to_copy": _to_copy,
    "_unsafe_view": lambda x, size: x.reshape(size),
    "view": lambda x, size: x.view(x.dtype) if not isinstance(size, (list, tuple)) and not isinstance(
        size, int) else x.view(size),
    "expand": lambda x, size, implicit=False: x.expand(size),
    "scalar_tensor": lambda s, dtype=None, layout=None, device=None, pin_memory=None: _ember().tensor(
        s, dtype=dtype or _ember().float32, device=device),
    "sym_size": lambda x, dim=None: x.size() if dim is None else x.size(dim),
    "sym_numel": lambda x: x.numel(),
    "threshold_backward": lambda grad, x, threshold: grad.masked_fill(x <= threshold, 0),
    "zeros": _factory("zeros"), "ones": _factory("ones"), "empty": _factory("empty"), "full": _factory("full"),
    "arange": _factory("arange"), "randn": _factory("randn"), "rand": _factory("rand"),
    "lift_fresh": lambda x: x, "alias": lambda x: x.view(x.shape),
    **_aten_impls.IMPLS,  # torch's internal operators that __torch_dispatch__ shows (nll_loss_forward, ...)
}


def _resolve_aten(name: str) -> Callable:
    if name in SPECIAL:
        return SPECIAL[name]
    fn = getattr(_ember(), name, None)
    if callable(fn) and not isinstance(fn, type):
        return fn
    method = getattr(Tensor, name, None)
    if callable(method):
        return lambda self, *args, **kwargs: getattr(self, name)(*args, **kwargs)
    fn = getattr(F, name, None)
    if callable(fn):
        return fn
    raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}': ember has no ATen operator "
                         f"aten::{name} (call the ember/torch function directly)")


def _record_function_enter(name: str, args: str | None = None) -> Any:
    """``profiler::_record_function_enter``: open a profiler range; the handle closes it (what
    ``record_function`` emits when traced by torch.fx)."""
    handle = record_function(name, args)
    handle.__enter__()
    return handle


def _record_function_exit(handle: Any) -> None:
    """``profiler::_record_function_exit``: close the range ``_record_function_enter`` opened."""
    handle.__exit__(None, None, None)


# Operators of torch's own namespaces besides aten (torch registers them in C++).
BUILTIN: dict[str, dict[str, Callable]] = {
    "profiler": {"_record_function_enter": _record_function_enter,
                 "_record_function_enter_new": _record_function_enter,
                 "_record_function_exit": _record_function_exit},
}


_aten_overloads.RESOLVE["aten"] = _resolve_aten
_aten_overloads.RESOLVE["ember"] = _aten_impls.ember_record  # records without an ATen twin (docs/pytorch-compat.md)


class OpNamespace:
    """``torch.ops.<name>``: the operators registered under one namespace."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, op: str) -> Any:
        if op.startswith("__"):
            raise AttributeError(op)
        if self.name == "aten":
            return _aten_overloads.packet("aten", op)  # one object per name (and per overload)
        qualname = f"{self.name}::{op}"
        if qualname not in OPS and op in BUILTIN.get(self.name, {}):
            return OpOverloadPacket(qualname, BUILTIN[self.name][op])
        if self.name == "ember" and qualname not in OPS:
            return _aten_overloads.packet("ember", op)
        if qualname not in OPS:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}' (no operator "
                                 f"{qualname} is registered; define it with ember.library.custom_op)")
        return packet(OPS[qualname])

    def __repr__(self) -> str:
        return f"<ember.ops namespace {self.name!r}>"


def load_library(path: str) -> None:
    """``torch.ops.load_library``: refused -- a compiled PyTorch extension runs against PyTorch's C++ ABI. The
    error is an OSError, as torch's when a library fails to load, so packages that try their extension and fall
    back to Python (torchvision does) keep working."""
    raise OSError(f"torch.ops.load_library({path!r}): ember cannot load compiled PyTorch extensions (.so "
                       "files built against libtorch); register the operator in Python with ember.library.custom_op")


def ops_getattr(ops_dir: str) -> Callable:
    """The ``__getattr__`` of the ``ember.ops`` package: its own modules import as usual; other names are
    operator namespaces."""
    modules = {f[:-3] for f in os.listdir(ops_dir) if f.endswith(".py")}

    def __getattr__(name: str) -> Any:  # noqa: N807
        if name.startswith("__") or name in modules:
            raise AttributeError(f"module 'ember.ops' has no attribute {name!r}")
        if name == "load_library":
            return load_library
        return OpNamespace(name)

    return __getattr__
