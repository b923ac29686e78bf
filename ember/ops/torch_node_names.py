"""PyTorch's names of backward nodes where ember's record covers several of torch's ops.

ember records one ``getitem`` where torch records ``select``, ``slice``, ``index`` or ``unsqueeze``; one ``matmul``
for ``mm``, ``mv``, ``dot`` and batched products; one ``reshape`` for every view. A record's
``torch_backward_name`` rule (set here, one table for all of them, as the ONNX emitters are one library) names the
node from its attrs and input shapes when the name is read, so recording costs nothing. Names that depend on which
public function made the node (``x.t()`` vs ``x.permute(1, 0)``, a loss whose last node is a mean) are given by
that function through :func:`ember.autograd.node.torch_named`.

Example:
    >>> import ember
    >>> x = ember.ones(2, 3, requires_grad=True)
    >>> x[0].grad_fn.name(), x[1:].grad_fn.name(), x.sum(1).grad_fn.name()
    ('SelectBackward0', 'SliceBackward0', 'SumBackward1')
"""
from __future__ import annotations

from typing import Any

from ember.ops.registry import OPS


def _getitem(node: Any) -> str:
    """torch applies an index left to right; the node is the last op applied (full slices apply nothing)."""
    index = node.attrs.get("index", ())
    last = "SliceBackward0"  # x[:] and x[...]: torch's alias-like slice
    for item in index:  # (one pass: this runs for every recorded getitem)
        kind = item.__class__
        if kind is slice:
            if item != _FULL:
                last = "SliceBackward0"
        elif item is None:
            last = "UnsqueezeBackward0"
        elif kind is list or kind is tuple and item[:1] == ("__tensor__",):
            return "IndexBackward0"
        elif kind is int or isinstance(item, int):
            last = "SelectBackward0"
    return last


_FULL = slice(None)
_MATMUL = {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0", (1, 2): "SqueezeBackward4"}


def _matmul(node: Any) -> str:
    shapes = node.input_meta
    if len(shapes) != 2 or shapes[0] is None or shapes[1] is None:
        return "MatmulBackward0"
    return _MATMUL.get((len(shapes[0]), len(shapes[1])), "UnsafeViewBackward0")


def _linear(node: Any) -> str:
    shapes = node.input_meta
    rank = len(shapes[0]) if shapes and shapes[0] is not None else 2
    if rank == 2:
        return "AddmmBackward0" if len(shapes) > 2 and shapes[2] is not None else "MmBackward0"
    return "SqueezeBackward4" if rank == 1 else "ViewBackward0"


def _with_dims(base: str) -> Any:
    return lambda node: f"{base}Backward1" if node.attrs.get("dims") is not None else f"{base}Backward0"


def _pow(node: Any) -> str:
    base, exponent = node.input_meta[0], node.input_meta[1] if len(node.input_meta) > 1 else None
    if base is None:
        return "PowBackward2"  # a number to a tensor power
    return "PowBackward1" if exponent is not None else "PowBackward0"


RULES = {
    "getitem": _getitem,
    "matmul": _matmul,
    "linear": _linear,
    "reshape": lambda node: "ViewBackward0",
    "sum": _with_dims("Sum"),
    "mean": _with_dims("Mean"),
    "max_dim": lambda node: "MaxBackward0",
    "min_dim": lambda node: "MinBackward0",
    "clamp": lambda node: "ClampBackward1",  # number bounds (tensor bounds are another record)
    "pow": _pow,
    "contiguous": lambda node: "CloneBackward0",  # torch's contiguous() copies by clone
    "to_dtype": lambda node: "ToCopyBackward0",
    "sub": lambda node: "RsubBackward1" if node.input_meta[0] is None else "SubBackward0",  # 1 - x
    "max_pool2d": lambda node: "MaxPool2DWithIndicesBackward0",
}

for _name, _rule in RULES.items():
    OPS[_name].torch_backward_name = _rule
del _name, _rule
