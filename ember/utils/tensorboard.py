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
import io
import time
import wave
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.graph.ir import Graph
from ember.tensor import Tensor
from ember.viz.tensorboard_graph import graph_def, trace_module

try:
    from tensorboardX import SummaryWriter as _TensorBoardXWriter
    from tensorboardX.proto import event_pb2
    from tensorboardX.proto.summary_pb2 import Summary
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

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None,
                    run_name: str | None = None, global_step: Any = None, *, name: str | None = None) -> None:
        """torch's signature (``run_name``, ``hparam_domain_discrete``) over tensorboardX's writer (``name=``): the
        session is written to ``<log_dir>/<run_name or time>``. The discrete domains are checked as torch checks
        them; TensorBoard infers the domains from the logged values (tensorboardX writes none)."""
        if hparam_domain_discrete is not None:
            if not isinstance(hparam_domain_discrete, dict) or not all(
                    k in hparam_dict and isinstance(v, list) and all(isinstance(x, type(hparam_dict[k])) for x in v)
                    for k, v in hparam_domain_discrete.items()):
                raise TypeError("parameter: hparam_domain_discrete should be a dictionary, its keys should exist in "
                                "hparam_dict, and its values should be lists of the hparams' types")
        super().add_hparams(hparam_dict, _host(metric_dict), name=run_name or name, global_step=global_step)

    def add_audio(self, tag: str, snd_tensor: Any, global_step: Any = None, sample_rate: int = 44100,
                  walltime: float | None = None) -> None:
        """A mono clip in [-1, 1] as 16-bit WAV, encoded with the standard library as torch's writer does
        (tensorboardX's needs the soundfile package)."""
        self._get_file_writer().add_summary(audio_summary(tag, _host(snd_tensor), sample_rate), global_step,
                                            walltime if walltime is not None else time.time())


def audio_summary(tag: str, samples: Any, sample_rate: int = 44100) -> Any:
    """torch.utils.tensorboard.summary.audio: samples clipped to [-1, 1], scaled to int16, one channel."""
    array = np.asarray(samples, dtype=np.float64).squeeze()
    if array.ndim != 1:
        raise ValueError(f"add_audio: expected a 1-D clip (or one with size-1 dimensions), got shape {array.shape}")
    if array.size and np.abs(array).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        array = array.clip(-1, 1)
    pcm = (array * np.iinfo(np.int16).max).astype("<i2")
    encoded = io.BytesIO()
    with wave.open(encoded, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm.tobytes())
    clip = Summary.Audio(sample_rate=sample_rate, num_channels=1, length_frames=pcm.shape[-1],
                         encoded_audio_string=encoded.getvalue(), content_type="audio/wav")
    return Summary(value=[Summary.Value(tag=tag, audio=clip)])


# Every add_* method takes ember tensors where torch's takes torch tensors (tensorboardX knows only NumPy and
# torch); add_graph is ember's own.
for _name in dir(_TensorBoardXWriter):
    if _name.startswith("add_") and _name not in ("add_graph", "add_audio", "add_hparams") and callable(getattr(_TensorBoardXWriter, _name)):
        setattr(SummaryWriter, _name, _with_host_arrays(getattr(_TensorBoardXWriter, _name)))
