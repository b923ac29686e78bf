"""``torch.onnx.symbolic_opset7`` ... ``symbolic_opset20``: the TorchScript exporter's per-opset symbolics.

Custom-op symbolics (torchvision's ``nms``, ``roi_align``) call these from inside their bodies, which only
PyTorch's TorchScript exporter runs. ember's exporter exports from op records and never calls a symbolic
(see :mod:`ember.onnx.symbolic_registry`), so every opset path is this one module: importing it and reading
a name work (the import of such a library succeeds), and calling one raises, saying why.

Example:
    >>> from ember.onnx import symbolic_opset11 as opset11
    >>> callable(opset11.unsqueeze)
    True
"""
from __future__ import annotations

import sys
from typing import Any, Callable

OPSETS = tuple(range(7, 21))  # the symbolic_opsetN modules PyTorch 2.13 has


def install_opset_paths() -> None:
    """Make ``ember.onnx.symbolic_opsetN`` importable and an attribute of ember.onnx (this very module)."""
    this = sys.modules[__name__]
    parent = sys.modules["ember.onnx"]
    for version in OPSETS:
        sys.modules.setdefault(f"ember.onnx.symbolic_opset{version}", this)
        setattr(parent, f"symbolic_opset{version}", this)


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("_"):
        raise AttributeError(name)

    def symbolic(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"torch.onnx.symbolic_opsetN.{name} is a TorchScript-exporter symbolic; ember's ONNX exporter "
            "builds the graph from ember's op records and never runs symbolic functions. Export the model "
            "with ember.onnx.export (custom ops need an ember op record with an onnx mapping).")

    symbolic.__name__ = symbolic.__qualname__ = name
    return symbolic
