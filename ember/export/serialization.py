"""``torch.export.save`` / ``torch.export.load`` for ember's ExportedPrograms.

The file is one zip archive (written atomically) holding ember's static-graph format, as ``ember.jit.save``
writes it (``graph.json`` + ``weights.safetensors``: no pickle, no code), the program's signature and any
``extra_files``. The graph is traced at save time from the program's example inputs, so a loaded program
accepts inputs of those shapes only (a clear error names the expected shape), as a program torch.export
specialized would; ``load`` runs it without the Python code that built it.

Example:
    >>> import io, ember
    >>> m = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU())
    >>> x = ember.randn(4, 3)
    >>> buffer = io.BytesIO()
    >>> ember.export.save(ember.export.export(m, (x,)), buffer)
    >>> loaded = ember.export.load(io.BytesIO(buffer.getvalue()))
    >>> bool(ember.allclose(loaded.module()(x), m(x)))
    True
"""
from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from typing import Any

from ember import jit

_FORMAT = "ember.export/1"
_GRAPH_FILES = ("graph.json", "weights.safetensors", "jit.json")  # what ember.jit.save writes
_META = "export.json"
_EXTRA = "extra/"


def save(ep: Any, f: Any, *, extra_files: dict | None = None, opset_version: dict | None = None,
         pickle_protocol: int = 2) -> None:
    """Write ``ep`` (from ``ember.export.export``) to the path or binary file ``f``."""
    from ember.export import ExportedProgram  # the package imports this module: a real cycle
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"export.save: expected an ExportedProgram from ember.export.export, got {type(ep).__name__}")
    args, kwargs = ep.example_inputs
    if kwargs:
        raise NotImplementedError("export.save: programs exported with keyword example inputs cannot be saved yet; "
                                  "pass every example input positionally to export")
    archive_bytes = getattr(ep, "_archive", None)
    if archive_bytes is not None and not extra_files:  # a loaded program: its archive is its saved form
        _write_atomically(f, archive_bytes)
        return
    if archive_bytes is not None:
        raise NotImplementedError("export.save: a program read by export.load is saved again unchanged; "
                                  "extra_files cannot be added to it")
    traced = jit.trace(ep.module(), args)
    signature = ep.graph_signature
    meta = {"format": _FORMAT,
            "inputs": [list(s) for s in signature.input_specs],
            "outputs": [list(s) for s in signature.output_specs],
            "extra_files": sorted(extra_files or {})}
    payload = io.BytesIO()
    with tempfile.TemporaryDirectory() as folder, zipfile.ZipFile(payload, "w", zipfile.ZIP_DEFLATED) as archive:
        jit.save(traced, os.path.join(folder, "graph"))
        for name in _GRAPH_FILES:
            archive.write(os.path.join(folder, "graph", name), name)
        archive.writestr(_META, json.dumps(meta))
        for name, content in (extra_files or {}).items():
            archive.writestr(_EXTRA + _checked_extra_name(name), content)
    _write_atomically(f, payload.getvalue())


def load(f: Any, *, extra_files: dict | None = None, expected_opset_version: dict | None = None) -> Any:
    """Read what :func:`save` wrote; fills ``extra_files``' keys with the saved contents, as torch does."""
    from ember.export import ExportedProgram, ExportGraphSignature, InputSpec, OutputSpec
    data = _read(f)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise ValueError("export.load: not a program written by ember.export.save (not a zip archive); "
                         "archives from torch.export.save hold PyTorch's own format and cannot be read") from error
    with archive:
        names = set(archive.namelist())
        if _META not in names or any(name not in names for name in _GRAPH_FILES):
            raise ValueError("export.load: the archive lacks ember's program files (export.json, graph.json, "
                             "weights.safetensors); was it written by ember.export.save?")
        meta = json.loads(archive.read(_META))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"export.load: unknown format {meta.get('format')!r}; this ember reads {_FORMAT!r}")
        with tempfile.TemporaryDirectory() as folder:
            for name in _GRAPH_FILES:  # fixed names only: nothing in the archive chooses a path
                with open(os.path.join(folder, name), "wb") as out:
                    out.write(archive.read(name))
            module = jit.load(folder)
        for key in list(extra_files or {}):
            member = _EXTRA + _checked_extra_name(key)
            extra_files[key] = archive.read(member).decode() if member in names else ""
    signature = ExportGraphSignature([InputSpec(*spec) for spec in meta["inputs"]],
                                     [OutputSpec(*spec) for spec in meta["outputs"]])
    program = ExportedProgram(module, ((), {}), signature)
    program._archive = data
    return program


def _checked_extra_name(name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"export: extra file name {name!r} must be a plain file name")
    return name


def _read(f: Any) -> bytes:
    if hasattr(f, "read"):
        return f.read()
    with open(os.fspath(f), "rb") as source:
        return source.read()


def _write_atomically(f: Any, data: bytes) -> None:
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
