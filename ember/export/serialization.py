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
import zlib
from typing import Any

from ember.jit import api as jit_api
from ember.export import pt2

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
    traced = jit_api._trace(ep.module(), args)  # (the private forms: torch.export warns no deprecation)
    signature = ep.graph_signature
    meta = {"format": _FORMAT,
            "inputs": [list(s) for s in signature.input_specs],
            "outputs": [list(s) for s in signature.output_specs],
            "extra_files": sorted(extra_files or {})}
    payload = io.BytesIO()
    with tempfile.TemporaryDirectory() as folder, zipfile.ZipFile(payload, "w", zipfile.ZIP_DEFLATED) as archive:
        jit_api._save(traced, os.path.join(folder, "graph"))
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
        raise ValueError("export.load: not a program written by ember.export.save or torch.export.save (not a zip "
                         "archive)") from error
    with archive:
        names = set(archive.namelist())
        if pt2.is_pt2_members(list(names)):
            return _program_from_pt2(*pt2.load(archive, getattr(f, "name", None) or str(f)), ExportedProgram,
                                     ExportGraphSignature, InputSpec, OutputSpec)
        if _META not in names or any(name not in names for name in _GRAPH_FILES):
            raise ValueError("export.load: the archive lacks ember's program files (export.json, graph.json, "
                             "weights.safetensors); was it written by ember.export.save?")
        meta = _checked_meta(_member(archive, _META, _JSON_LIMIT))
        with tempfile.TemporaryDirectory() as folder:
            for name in _GRAPH_FILES:  # fixed names only: nothing in the archive chooses a path
                limit = None if name == "weights.safetensors" else _JSON_LIMIT
                with open(os.path.join(folder, name), "wb") as out:
                    _copy_member(archive, name, out, limit)
            module = jit_api._load(folder)
        for key in list(extra_files or {}):
            member = _EXTRA + _checked_extra_name(key)
            extra_files[key] = _member(archive, member, None).decode() if member in names else ""
    signature = ExportGraphSignature([InputSpec(*spec) for spec in meta["inputs"]],
                                     [OutputSpec(*spec) for spec in meta["outputs"]])
    program = ExportedProgram(module, ((), {}), signature)
    program._archive = data
    return program


def _program_from_pt2(module: Any, program: dict, ExportedProgram: type, ExportGraphSignature: type,  # noqa: N803
                      InputSpec: type, OutputSpec: type) -> Any:
    """An ExportedProgram around a ``.pt2`` file's graph (:mod:`ember.export.pt2`), its signature in ember's terms
    (the classes come from the caller, which imports them from the package that imports this module)."""
    names = {"parameter": ("PARAMETER", "parameter_name"), "buffer": ("BUFFER", "buffer_name"),
             "tensor_constant": ("CONSTANT_TENSOR", "tensor_constant_name")}
    signature = program["graph_module"]["signature"]
    inputs, outputs = [], []
    for spec in signature["input_specs"]:
        (kind, body), = spec.items()
        if kind in names:
            inputs.append(InputSpec(names[kind][0], body["arg"]["name"], body.get(names[kind][1])))
        elif kind == "user_input":
            inputs.append(InputSpec("USER_INPUT", next(iter(body["arg"].values())).get("name", ""), None))
    for spec in signature["output_specs"]:
        (kind, body), = spec.items()
        if kind == "user_output":
            outputs.append(OutputSpec("USER_OUTPUT", next(iter(body["arg"].values())).get("name", "")))
    return ExportedProgram(module, ((), {}), ExportGraphSignature(inputs, outputs))


_JSON_LIMIT = 64 << 20  # bytes a JSON member may declare (a deflated member cannot inflate past it)
_SPEC_FIELDS = {"inputs": (3, "(kind, name, target)"), "outputs": (2, "(kind, name)")}


def _copy_member(archive: zipfile.ZipFile, name: str, out: Any, limit: int | None) -> None:
    """Stream member ``name`` into ``out`` (memory stays bounded), refusing a declared size over ``limit``; a
    damaged member (CRC, header, truncated stream) is a ValueError naming it."""
    info = archive.getinfo(name)
    if limit is not None and info.file_size > limit:
        raise ValueError(f"export.load: member {name} declares {info.file_size} bytes, over the {limit} a program's "
                         f"{name} may hold; the archive is damaged or hostile")
    try:
        with archive.open(info) as source:
            while True:
                chunk = source.read(1 << 20)
                if not chunk:
                    return
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as error:
        raise ValueError(f"export.load: member {name} of the archive is damaged ({error})") from None


def _member(archive: zipfile.ZipFile, name: str, limit: int | None) -> bytes:
    buffer = io.BytesIO()
    _copy_member(archive, name, buffer, limit)
    return buffer.getvalue()


def _checked_meta(raw: bytes) -> dict:
    """export.json as save wrote it: an object with the format and lists of string spec records."""
    try:
        meta = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"export.load: export.json is not valid JSON ({error})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"export.load: export.json must be an object, got {type(meta).__name__}")
    if meta.get("format") != _FORMAT:
        raise ValueError(f"export.load: unknown format {meta.get('format')!r}; this ember reads {_FORMAT!r}")
    for key, (width, fields) in _SPEC_FIELDS.items():
        specs = meta.get(key)
        if not isinstance(specs, list) or not all(
                isinstance(spec, list) and len(spec) == width and all(v is None or isinstance(v, str) for v in spec)
                for spec in specs):
            raise ValueError(f"export.load: export.json's {key!r} must be a list of {fields} string records")
    return meta


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
