"""``ember.save`` / ``ember.load``: checkpoints that never run code when loaded.

Formats (chosen when saving with ``format=``; recognized by their first bytes when loading):

* ``"safetensors"``: a standard safetensors file; the nesting, numbers and strings are JSON in its
  metadata (:mod:`ember.serialization.safetensors_format`). No pickle at all.

Every file read is checked before use (:mod:`ember.serialization.safetensors_header`,
:mod:`ember.serialization.structure`); a rejection raises :class:`CheckpointError` naming the file,
the entry and the problem. Writes to a path are atomic (:mod:`ember.serialization.atomic`): a
temporary file in the same folder, ``fsync``, then ``os.replace``; temporaries left by a killed
writer are removed by the next save of the same target.

Example:
    >>> import ember, io
    >>> buffer = io.BytesIO()
    >>> ember.save({"w": ember.ones(2), "step": 3, "betas": (0.9, 0.999)}, buffer)
    >>> _ = buffer.seek(0)
    >>> ember.load(buffer)
    {'w': tensor([1., 1.]), 'step': 3, 'betas': (0.9, 0.999)}
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

from ember.serialization import safetensors_format
from ember.serialization.atomic import atomic_directory, atomic_write, clean_stale_temporaries  # noqa: F401
from ember.serialization.errors import CheckpointError, UnsafeGlobalError  # noqa: F401

FORMATS = ("safetensors",)


def save(obj: Any, f: str | os.PathLike | BinaryIO, pickle_module: Any = None, pickle_protocol: int = 2,
         *, format: str = "safetensors", **kwargs: Any) -> None:
    """Save ``obj`` to ``f`` (a path, written atomically, or a binary file object).

    ``format="safetensors"`` stores tensors, arrays, numbers, strings, bytes, dtypes, devices and
    dicts/lists/tuples of those. torch.save's ``_use_new_zipfile_serialization`` is accepted and ignored.
    """
    if pickle_module is not None:
        raise ValueError("ember.save: a custom pickle_module is not supported; drop it")
    if format not in FORMATS:
        raise ValueError(f"ember.save: unknown format {format!r}; choose one of {FORMATS}")
    head, buffers = safetensors_format.serialize(obj)
    if hasattr(f, "write"):
        safetensors_format.write_all(f, head, buffers)  # type: ignore[arg-type]
    else:
        atomic_write(f, lambda handle: safetensors_format.write_all(handle, head, buffers))


def _read_bytes(f: Any) -> bytearray:
    if hasattr(f, "read"):
        return bytearray(f.read())
    path = Path(f)
    if not path.is_file():
        raise FileNotFoundError(f"ember.load: no such file: {path}")
    data = bytearray(path.stat().st_size)
    with open(path, "rb") as handle:
        handle.readinto(data)
    return data


def load(f: str | os.PathLike | BinaryIO, map_location: Any = None, weights_only: Any = None, mmap: Any = None,
         **kwargs: Any) -> Any:
    """Load what :func:`save` wrote, or a plain safetensors file (as a dict ``name -> tensor``).

    ``map_location`` ('cpu', 'cuda:0', a device, or a dict from saved to target device) moves tensors.
    """
    data = _read_bytes(f)
    where = getattr(f, "name", "<file object>") if hasattr(f, "read") else os.fspath(f)
    if data[:4] == b"PK\x03\x04" or data[:1] == b"\x80":
        raise CheckpointError(where, None, "is a PyTorch pickle/zip checkpoint, which this ember cannot read")
    return safetensors_format.read(data, where, map_location)
