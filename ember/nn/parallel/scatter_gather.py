"""``torch.nn.parallel.scatter_gather``: split inputs over devices and gather outputs back (DataParallel's helpers).

``scatter`` chunks every tensor inside (nested tuples, lists, dicts, namedtuples) along ``dim``, one chunk per
target device, and repeats everything else; ``gather`` concatenates per-device outputs on one device. PyTorch
runs them on CUDA devices only; ember also accepts ``"cpu"`` (or CPU ``ember.device``) targets, which is how
they are tested on a machine without a GPU. Integer targets name CUDA devices, as in PyTorch.

Example:
    >>> import ember
    >>> from ember.nn.parallel.scatter_gather import gather, scatter
    >>> parts = scatter(ember.arange(6.0), ["cpu", "cpu"])
    >>> [p.tolist() for p in parts]
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    >>> gather(parts, "cpu").tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.device import device as _to_device
from ember.ops.views import cat
from ember.tensor import Tensor

__all__ = ["scatter", "scatter_kwargs", "gather", "is_namedtuple"]


def is_namedtuple(obj: Any) -> bool:
    """True for a ``collections.namedtuple`` (or ``typing.NamedTuple``) instance."""
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def _device(target: Any) -> Any:
    if isinstance(target, int):
        return _to_device("cuda", target)
    return _to_device(target)


def scatter(inputs: Any, target_gpus: Sequence[Any], dim: int = 0) -> Any:
    """Split ``inputs`` into ``len(target_gpus)`` parts: tensors are chunked along ``dim`` (``Tensor.chunk``, as
    PyTorch's ``comm.scatter``) and moved to each device; other objects are repeated."""
    devices = [_device(t) for t in target_gpus]
    if not devices:
        raise ValueError("scatter: target_gpus is empty; give the devices to split the inputs over")

    def scatter_map(obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return [part.to(dev) for part, dev in zip(obj.chunk(len(devices), dim), devices)]
        if is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in devices]

    return scatter_map(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_gpus: Sequence[Any],
                   dim: int = 0) -> tuple[tuple, tuple]:
    """``scatter`` for positional and keyword inputs together; the shorter side is padded with ``()``/``{}``."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(scattered_inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs: Any, target_device: Any, dim: int = 0) -> Any:
    """Concatenate per-device ``outputs`` (tensors, or equal structures of them) along ``dim`` on
    ``target_device`` (-1: the CPU, as PyTorch)."""
    device = _to_device("cpu") if target_device == -1 else _device(target_device)

    def gather_map(outs: list) -> Any:
        out = outs[0]
        if isinstance(out, Tensor):
            return cat([o.to(device) for o in outs], dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outs])) for k in out)
        if is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outs)))
        return type(out)(map(gather_map, zip(*outs)))

    return gather_map(list(outputs))
