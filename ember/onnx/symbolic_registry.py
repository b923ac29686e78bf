"""PyTorch's TorchScript-era ONNX registration surface: ``register_custom_op_symbolic`` and friends.

Libraries register ONNX "symbolic" functions for their custom ops at import time (torchvision's
``ops/__init__.py`` registers ``torchvision::nms``, ``roi_align`` and ``roi_pool``). ember's exporter
builds ONNX from its own graph IR (each op record's ``onnx`` mapping) and never runs a TorchScript
symbolic, so these functions check and record the registration as PyTorch does (same name rule, same
errors) and the registry is only read back by ``registered_symbolic``. Importing such a library works;
exporting one of its custom ops needs an ember op record with an ``onnx`` mapping.

Example:
    >>> import ember
    >>> ember.onnx.register_custom_op_symbolic("mylib::double", lambda g, x: g.op("Add", x, x), 11)
    >>> ember.onnx.symbolic_registry.registered_symbolic("mylib::double", 11) is not None
    True
"""
from __future__ import annotations

import enum
import re
from typing import Callable

__all__ = ["OnnxExporterError", "TensorProtoDataType", "is_in_onnx_export", "register_custom_op_symbolic",
           "unregister_custom_op_symbolic", "registered_symbolic"]

_REGISTRY: dict[tuple[str, int], Callable] = {}
_NAME = re.compile(r"^[a-zA-Z0-9-_]+::[a-zA-Z-_]+[a-zA-Z0-9-_]*$")  # PyTorch's rule for "domain::name"


class OnnxExporterError(RuntimeError):
    """Errors raised by the ONNX exporter (``torch.onnx.OnnxExporterError``)."""


class TensorProtoDataType(enum.IntEnum):
    """ONNX's element type numbers (``torch.onnx.TensorProtoDataType``)."""
    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20


def is_in_onnx_export() -> bool:
    """Whether an export is tracing right now (ember's exporter traces with ember.graph, never a module's
    own forward in an export mode, so this is False as in PyTorch outside ``torch.onnx.export``)."""
    return False


def _check_name(symbolic_name: str) -> str:
    if symbolic_name.startswith("::"):
        symbolic_name = f"aten{symbolic_name}"
    if not isinstance(symbolic_name, str) or not _NAME.match(symbolic_name):
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name}. The symbolic name must match the format domain::name, "
            "and should start with a letter and contain only alphanumeric characters")
    if symbolic_name.split("::", 1)[0] == "onnx":
        raise ValueError(f"Failed to register operator {symbolic_name}. onnx domain cannot be modified.")
    return symbolic_name


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable, opset_version: int) -> None:
    """Record ``symbolic_fn`` for the custom op ``"domain::name"`` from ``opset_version`` on (PyTorch's checks)."""
    _REGISTRY[(_check_name(symbolic_name), int(opset_version))] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Forget a registration (a name never registered is ignored, as in PyTorch)."""
    _REGISTRY.pop((_check_name(symbolic_name), int(opset_version)), None)


def registered_symbolic(symbolic_name: str, opset_version: int) -> Callable | None:
    """The function registered for ``symbolic_name`` at the highest opset <= ``opset_version``, else None."""
    name = _check_name(symbolic_name)
    found = [(v, fn) for (n, v), fn in _REGISTRY.items() if n == name and v <= opset_version]
    return max(found, key=lambda item: item[0])[1] if found else None
