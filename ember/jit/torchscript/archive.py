"""Read a TorchScript archive written by ``torch.jit.save``: checked members, the pickled module tree, the code.

Layout (one folder ``<name>/`` inside a zip): ``data.pkl`` (the module objects, tensors as storage references into
``data/<key>``), ``constants.pkl`` (a tuple of the constants the code reads as ``CONSTANTS.c<i>``, tensors in
``constants/<key>``), ``code/__torch__/**.py`` (the TorchScript source of every class and function, one Python-syntax
file per qualified module), ``version``, ``byteorder`` and optional ``extra/<name>`` files. Debug pickles
(``*.debug_pkl``) and the traced inputs are never read. Newer archives hold their version in ``.data/version``. Members are read by fixed names only, sizes are bounded and
every pickle goes through the weights-only unpickler (:mod:`ember.jit.torchscript.unpickler`).

Example:
    >>> is_torchscript_members(["m/data.pkl", "m/constants.pkl", "m/code/__torch__.py", "m/version"])
    True
"""
from __future__ import annotations

import io
import os
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember import serialization
from ember.serialization.errors import CheckpointError
from ember.serialization.torch_reader import _MemmapFile, _placed, storage_loader
from ember.jit.torchscript.unpickler import TorchScriptUnpickler

_CODE_LIMIT = 32 << 20     # bytes of TorchScript source an archive may hold (torchvision's largest is ~1 MB)
_PICKLE_LIMIT = 256 << 20  # bytes of data.pkl / constants.pkl (tensor bytes live in their own members)
_CODE_PATH = re.compile(r"code/__torch__(/[A-Za-z_][A-Za-z0-9_]*)*\.py")
# file format versions torch.jit.save writes (3 since PyTorch 1.6 for most archives; later ones for newer ops)
_VERSIONS = range(1, 11)


def is_torchscript_members(names: list[str]) -> bool:
    """True when ``names`` (a zip's member names) look like ``torch.jit.save``'s archive."""
    return any(n.endswith("/constants.pkl") or n == "constants.pkl" for n in names) and \
        any("/code/" in n or n.startswith("code/") for n in names)


@dataclass
class Archive:
    """What a TorchScript archive holds, read and checked (nothing of it has run)."""

    where: str
    version: int
    data: Any                      # the unpickled module tree (PickledObject at its root)
    constants: tuple
    code: dict[str, str]           # qualified module name ('__torch__.torch.nn.modules.linear') -> source text
    extra: dict[str, bytes] = field(default_factory=dict)
    verbatim: dict[str, bytes] = field(default_factory=dict)  # members ``save`` copies: code, constants, version


def read(f: Any, extra_names: list[str] | None = None) -> Archive:
    """Read the archive at path (or binary file object) ``f``; ``extra_names`` are the extra files to return."""
    where = getattr(f, "name", "<file object>") if hasattr(f, "read") else os.fspath(f)
    buffer = serialization._read(f, mmap=False)  # writable: tensors view it, and forward may update buffers
    if not isinstance(buffer, np.ndarray):
        buffer = np.frombuffer(buffer, dtype=np.uint8)
    try:
        zf = zipfile.ZipFile(_MemmapFile(buffer))
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise CheckpointError(where, None, f"is not a readable zip archive ({error})") from None
    infos = {i.filename: i for i in zf.infolist()}
    roots = [n[: -len("constants.pkl")] for n in infos if n.endswith("constants.pkl") and n.count("/") <= 1]
    if len(roots) != 1:
        raise CheckpointError(where, None, "is not a TorchScript archive (no single <name>/constants.pkl)")
    prefix = roots[0]

    def member(name: str, limit: int) -> bytes:
        info = infos.get(prefix + name)
        if info is None:
            raise CheckpointError(where, f"member {prefix + name!r}", "is missing from the TorchScript archive")
        if info.file_size > limit:
            raise CheckpointError(where, f"member {info.filename!r}", f"declares {info.file_size} bytes, over the "
                                  f"{limit} it may hold")
        try:
            return zf.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
            raise CheckpointError(where, f"zip member {info.filename!r}", f"is damaged ({error})") from None

    def read_member(info: Any) -> bytes:
        return member(info.filename[len(prefix):], _PICKLE_LIMIT)

    # torch writes ``version``, or ``.data/version`` when the code needs a newer format (version 10 and up)
    version_text = member("version" if prefix + "version" in infos else ".data/version", 64).strip()
    if not version_text.isdigit() or int(version_text) not in _VERSIONS:
        raise CheckpointError(where, "version", f"is {version_text[:20]!r}; this ember reads TorchScript archive "
                              f"versions {_VERSIONS.start}-{_VERSIONS.stop - 1}")
    order = infos.get(prefix + "byteorder")
    if order is not None and member("byteorder", 64).strip() != b"little":
        raise CheckpointError(where, "byteorder", "only little-endian archives are read")
    code: dict[str, str] = {}
    verbatim: dict[str, bytes] = {"version" if prefix + "version" in infos else ".data/version": version_text + b"\n"}
    total = 0
    for name, info in infos.items():
        rel = name[len(prefix):] if name.startswith(prefix) else None
        if rel is None or not rel.startswith("code/") or rel.endswith(".debug_pkl") or info.is_dir():
            continue
        if not _CODE_PATH.fullmatch(rel):
            raise CheckpointError(where, f"member {name!r}", "is not a TorchScript source file name "
                                  "(code/__torch__/<identifiers>.py)")
        total += info.file_size
        if total > _CODE_LIMIT:
            raise CheckpointError(where, "code/", f"holds more than {_CODE_LIMIT} bytes of source")
        try:
            text = member(rel, _CODE_LIMIT).decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(where, f"member {name!r}", "is not UTF-8 text") from None
        code[rel[len("code/"):-len(".py")].replace("/", ".")] = text
        verbatim[rel] = text.encode("utf-8")
    data_storage = storage_loader(buffer, infos, f"{prefix}data/", where, read_member)
    constant_storage = storage_loader(buffer, infos, f"{prefix}constants/", where, read_member)
    with _placed("cpu"):
        constants = TorchScriptUnpickler(io.BytesIO(member("constants.pkl", _PICKLE_LIMIT)), f"{where}: constants.pkl",
                                         storage=constant_storage).load()
        data = TorchScriptUnpickler(io.BytesIO(member("data.pkl", _PICKLE_LIMIT)), f"{where}: data.pkl",
                                    storage=data_storage).load()
    for name, info in infos.items():
        rel = name[len(prefix):] if name.startswith(prefix) else ""
        if rel == "constants.pkl" or (rel.startswith("constants/") and rel[len("constants/"):].isdigit()):
            verbatim[rel] = read_member(info)
    if not isinstance(constants, tuple):
        raise CheckpointError(where, "constants.pkl", f"holds a {type(constants).__name__}, expected a tuple")
    extra = {}
    for name in extra_names or ():
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"torch.jit.load: extra file name {name!r} must be a plain file name")
        if prefix + "extra/" + name in infos:
            extra[name] = member("extra/" + name, _PICKLE_LIMIT)
    return Archive(where, int(version_text), data, constants, code, extra, verbatim)
