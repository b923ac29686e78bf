"""``torch.fx.passes.shape_prop``: run a GraphModule on example inputs and record each node's result
shape, dtype, strides and memory format in ``node.meta["tensor_meta"]`` (and its type in ``meta["type"]``).

Example:
    >>> import ember, ember.fx as fx
    >>> gm = fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(3, 4)))
    >>> _ = ShapeProp(gm).propagate(ember.randn(2, 3))
    >>> [tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes]
    [(2, 3), (2, 4), (2, 4)]
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ember.fx.interpreter import Interpreter
from ember.fx.node import Node, map_aggregate
from ember.tensor import Tensor
from ember.surface.constants import channels_last, channels_last_3d, contiguous_format


class TensorMetadata(NamedTuple):
    """What ShapeProp records of a tensor (torch's fields; ember has no quantized tensors)."""
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _memory_format_of(tensor: Tensor) -> Any:
    """The first layout the tensor is contiguous in (contiguous, channels-last, channels-last-3d) or None."""
    for memory_format in (contiguous_format, channels_last, channels_last_3d):
        try:
            if tensor.is_contiguous(memory_format=memory_format):
                return memory_format
        except (RuntimeError, ValueError):  # channels-last asked of a tensor of another rank
            continue
    return None


def extract_tensor_metadata(result: Tensor) -> TensorMetadata:
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, tuple(result.stride()),
                          _memory_format_of(result), False, {})


class ShapeProp(Interpreter):
    """``ShapeProp(gm).propagate(*example_inputs)`` runs ``gm`` and annotates every node."""

    def run_node(self, n: Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception as error:
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={n.meta}") from error
        found_tensor = False

        def tensor_meta(value: Any) -> Any:
            nonlocal found_tensor
            if isinstance(value, Tensor):
                found_tensor = True
                return extract_tensor_metadata(value)
            return value

        meta = map_aggregate(result, tensor_meta)
        if found_tensor:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Run the module on ``args`` (recording as it goes) and return its result."""
        return super().run(*args)


__all__ = ["ShapeProp", "TensorMetadata", "extract_tensor_metadata"]
