"""``ember.utils.tensorboard.SummaryWriter``: torch.utils.tensorboard's writer, with ``add_graph`` for ember.

Everything but ``add_graph`` is tensorboardX's writer (scalars, histograms, images, text...).
``add_graph(model, input_to_model)`` traces the ember module into a static graph and writes it as a
``GraphDef`` that TensorBoard's Graphs tab shows, modules folded into boxes; passing an
:class:`ember.graph.Graph` (define-then-run or traced) writes that graph as it is.

Example:
    >>> import ember, ember.nn as nn
    >>> from ember.utils.tensorboard import SummaryWriter      # doctest: +SKIP
    >>> with SummaryWriter("runs/demo") as writer:              # doctest: +SKIP
    ...     writer.add_graph(nn.Linear(4, 2), ember.randn(1, 4))
    ...     writer.add_scalar("loss", 0.5, 0)
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember import dtypes
from ember.graph.ir import Graph
from ember.tensor import Tensor
from ember.viz.tensorboard_graph import graph_def, trace_module

try:
    from tensorboardX import SummaryWriter as _TensorBoardXWriter
    from tensorboardX.proto import event_pb2
except ImportError:  # pragma: no cover - exercised only without the optional dependency
    raise ImportError("ember.utils.tensorboard needs tensorboardX: pip install tensorboardX (or "
                      "pip install 'ember[train]')") from None


def _host(value: Any) -> Any:
    """ember tensors (also inside dicts, lists and tuples) as NumPy arrays, which tensorboardX reads; half
    precision as float32 (NumPy has no bfloat16 of its own)."""
    if isinstance(value, Tensor):
        value = value.detach()
        if value.dtype in (dtypes.float16, dtypes.bfloat16):
            value = value.float()
        return value.cpu().numpy()
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Tensor, dict, list, tuple)) for v in value):
        return type(value)(_host(v) for v in value)
    return value


def _with_host_arrays(method: Callable) -> Callable:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return method(self, *[_host(a) for a in args], **{k: _host(v) for k, v in kwargs.items()})

    return call


class SummaryWriter(_TensorBoardXWriter):
    """tensorboardX's SummaryWriter whose ``add_graph`` understands ember modules and graphs."""

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: Any = None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = "", **kwargs: Any) -> None:
        super().__init__(logdir=log_dir, comment=comment, purge_step=purge_step, max_queue=max_queue,
                         flush_secs=flush_secs, filename_suffix=filename_suffix, **kwargs)

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """Write the graph of ``model(*input_to_model)`` (or of an ember Graph) for the Graphs tab."""

        if isinstance(model, Graph):
            proto = graph_def(model)
        else:
            if input_to_model is None:
                raise ValueError("add_graph: pass input_to_model (an example input) to trace the module with")
            inputs = input_to_model if isinstance(input_to_model, (list, tuple)) else (input_to_model,)
            graph, naming = trace_module(model, inputs)
            proto = graph_def(graph, naming)
        if verbose:
            print(proto)
        self._get_file_writer().add_event(event_pb2.Event(graph_def=proto.SerializeToString()))


# Every add_* method takes ember tensors where torch's takes torch tensors (tensorboardX knows only NumPy and
# torch); add_graph is ember's own.
for _name in dir(_TensorBoardXWriter):
    if _name.startswith("add_") and _name != "add_graph" and callable(getattr(_TensorBoardXWriter, _name)):
        setattr(SummaryWriter, _name, _with_host_arrays(getattr(_TensorBoardXWriter, _name)))
