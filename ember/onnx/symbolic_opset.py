"""``torch.onnx.symbolic_opset7`` ... ``symbolic_opset20``: the TorchScript exporter's per-opset symbolics.

Custom-op symbolics (torchvision's ``nms``, ``roi_align``) call these from inside their bodies, which only
PyTorch's TorchScript exporter runs. ember's exporter exports from op records and never calls a symbolic
(see :mod:`ember.onnx.symbolic_registry`), so every opset path is this one module: importing it works (the
import of such a library succeeds; the symbolic bodies that read its names never run), and reading a name
raises an AttributeError saying why.

Example:
    >>> from ember.onnx import symbolic_opset11 as opset11
    >>> hasattr(opset11, "unsqueeze")
    False
"""
from __future__ import annotations

import sys
from typing import Any

OPSETS = tuple(range(7, 21))  # the symbolic_opsetN modules PyTorch 2.13 has


def install_opset_paths() -> None:
    """Make ``ember.onnx.symbolic_opsetN`` importable and an attribute of ember.onnx (this very module)."""
    this = sys.modules[__name__]
    parent = sys.modules["ember.onnx"]
    for version in OPSETS:
        sys.modules.setdefault(f"ember.onnx.symbolic_opset{version}", this)
        setattr(parent, f"symbolic_opset{version}", this)


def __getattr__(name: str) -> Any:
    # No symbolic exists here: say why (an AttributeError, so hasattr() and tools probing attributes see none).
    raise AttributeError(
        f"torch.onnx.symbolic_opsetN.{name}: TorchScript-exporter symbolics are not in ember; its ONNX exporter "
        "builds the graph from ember's op records and never runs symbolic functions. Export with "
        "ember.onnx.export (a custom op needs an ember op record with an onnx mapping).")
