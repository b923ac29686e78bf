"""``get_unsafe_globals_in_checkpoint``: which globals a checkpoint names that ``weights_only`` refuses.

The pickle is only scanned opcode by opcode (``pickletools.genops``), never run, so this is safe on
any file: use it to decide what to pass to :func:`ember.serialization.add_safe_globals`.

Example:
    >>> import io, ember
    >>> buffer = io.BytesIO(); ember.save({"w": ember.ones(1)}, buffer); _ = buffer.seek(0)
    >>> get_unsafe_globals_in_checkpoint(buffer)
    []
"""
from __future__ import annotations

import _compat_pickle
import io
import os
import pickletools
import zipfile
from typing import Any, BinaryIO

from ember.serialization import safe_globals, torch_names, torch_reader
from ember.serialization.errors import CheckpointError

_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING", "SHORT_BINSTRING"}


def _names(data: bytes) -> list[str]:
    names, recent = [], []
    for opcode, arg, _ in pickletools.genops(io.BytesIO(data)):
        if opcode.name in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            # protocol-2 files name Python 2's modules (__builtin__ set), which unpickling maps to Python 3's
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            names.append(f"{_compat_pickle.IMPORT_MAPPING.get(module, module)}.{name}")
        elif opcode.name == "STACK_GLOBAL" and len(recent) >= 2:
            names.append(f"{recent[-2]}.{recent[-1]}")
        if opcode.name in _STRINGS:
            recent.append(arg)
        elif opcode.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
            recent.clear()  # STACK_GLOBAL's two strings are the ones pushed right before it
    return names


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | BinaryIO) -> list[str]:
    """Sorted ``module.name`` of every global in ``f`` outside the weights-only allow-list."""
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(f, "rb") as handle:
            data = handle.read()
    where = getattr(f, "name", "<file object>") if hasattr(f, "read") else os.fspath(f)
    if torch_reader.is_zip(data[:4]):
        archive = zipfile.ZipFile(io.BytesIO(data))
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if not pickles:
            raise CheckpointError(where, None, "is a zip file but not a PyTorch checkpoint")
        names = _names(archive.read(pickles[0]))
    elif torch_reader.is_legacy(bytes(data[:32])):
        stream = io.BytesIO(data)
        names = []
        for _ in range(5):  # magic, protocol, sys info, the object, the storage keys
            start = stream.tell()
            for _ in pickletools.genops(stream):
                pass
            names += _names(data[start:stream.tell()])
    else:
        return []  # safetensors: no pickle at all
    allowed = torch_names.allowed()
    return sorted({n for n in names if n not in allowed and not safe_globals.lookup(n)[0]})
