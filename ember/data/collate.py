"""Collation: turning a list of samples into one batch, as ``torch.utils.data.default_collate``.

Example:
    >>> import ember
    >>> from ember.data import default_collate
    >>> xs, ys = default_collate([(ember.ones(2), 0), (ember.zeros(2), 1)])
    >>> xs.shape, ys
    (ember.Size([2, 2]), tensor([0, 1]))
"""
from __future__ import annotations

import collections.abc
from typing import Any, Sequence

import numpy as np
from ember.creation import _wrap_array, as_tensor, tensor
from ember.ops.views import stack
from ember.tensor import Tensor


def _stack_tensors(batch: list) -> Any:
    first = batch[0]
    shapes = {tuple(t.shape) for t in batch}
    if len(shapes) != 1:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but got shapes "
                           f"{sorted(shapes)}; pad the samples or pass a collate_fn")
    if all(t.device.type == "cpu" for t in batch):
        # Stacking the raw arrays skips per-tensor dispatch: one NumPy call for the whole batch.
        return _wrap_array(np.stack([t.detach()._data for t in batch]), first.device)

    return stack([t.detach() for t in batch])


def default_collate(batch: Sequence) -> Any:
    """Stack tensors/arrays, tensorize numbers, and recurse into tuples, lists, dicts and namedtuples.

    As torch's: tuple samples come back as lists, other sequences keep their type (when it can be built from a
    list); strings are returned as given (a tuple inside a tuple/list sample, the list at the top); floats become
    float64 and ints int64 tensors.
    """

    if not batch:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SUO":
            raise TypeError(f"default_collate: NumPy arrays of dtype {elem.dtype} cannot become tensors")
        return as_tensor(np.stack(batch))
    if isinstance(elem, np.generic):
        return as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype="float64")
    if isinstance(elem, int):
        return tensor(batch, dtype="int64")
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)  # keep OrderedDict and friends
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        collated = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return collated
        try:
            return type(elem)(collated)  # torch keeps the sequence type (a list stays a list)
        except TypeError:
            return collated
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem).__name__}. Pass a collate_fn to the DataLoader for other types.")


def default_convert(data: Any) -> Any:
    """What the loader applies when automatic batching is off: arrays become tensors, the rest recurses."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SUO":
        return as_tensor(data)
    if isinstance(data, np.generic):
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
