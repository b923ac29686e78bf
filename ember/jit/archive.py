"""One-file jit archives: ``ember.jit.save(m, buffer_or_file)`` zips the saved graph directory (graph.json,
weights, jit.json) so it can go into a ``BytesIO`` or a single file, as ``torch.jit.save`` does; ``load``
unpacks it into a temporary directory and reads it there. Members are checked before extraction: only plain
file names (no folders, no '..', no absolute paths, no links), and the unpacked size is bounded.

Example:
    >>> import io, ember
    >>> traced = ember.jit.trace(ember.nn.Linear(2, 2), ember.randn(1, 2))
    >>> buffer = io.BytesIO()
    >>> ember.jit.save(traced, buffer)
    >>> _ = buffer.seek(0)
    >>> ember.jit.load(buffer)(ember.ones(1, 2)).shape
    ember.Size([1, 2])
"""
from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from typing import Any, Callable

_MAX_BYTES = 1 << 34  # 16 GiB unpacked: far above any model here, far below filling a disk by accident


def is_file_like(f: Any) -> bool:
    return hasattr(f, "write") or hasattr(f, "read")


def write_archive(save_directory: Callable[[str], None], f: Any) -> None:
    """Save into a fresh temporary directory with ``save_directory(path)``, then zip its files into ``f`` (a
    writable file object or a path, written atomically)."""
    with tempfile.TemporaryDirectory(prefix="ember-jit-") as tmp:
        folder = os.path.join(tmp, "graph")
        save_directory(folder)
        if is_file_like(f):
            _zip_into(folder, f)
            return
        path = os.fspath(f)
        partial = path + ".tmp"
        with open(partial, "wb") as out:
            _zip_into(folder, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)


def _zip_into(folder: str, out: Any) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(os.listdir(folder)):
            archive.write(os.path.join(folder, name), arcname=name)


def is_archive(f: Any) -> bool:
    if is_file_like(f):
        return True
    path = os.fspath(f)
    return os.path.isfile(path) and zipfile.is_zipfile(path)


def read_archive(f: Any, load_directory: Callable[[str], Any]) -> Any:
    """Unpack a checked archive into a temporary directory and return ``load_directory(path)``'s result."""
    source = f if is_file_like(f) else os.fspath(f)
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile:
        raise ValueError("ember.jit.load: not a readable archive of ember.jit.save or torch.jit.save (not a zip "
                         "file, or a truncated or damaged one)") from None
    with archive, tempfile.TemporaryDirectory(prefix="ember-jit-") as tmp:
        if any(name.endswith(("data.pkl", "constants.pkl")) or "/code/" in name for name in archive.namelist()):
            raise ValueError("ember.jit.load: this archive has a data.pkl or code/ but not the members of a "
                             "torch.jit.save archive (<name>/constants.pkl and <name>/code/); it is damaged")
        total = 0
        for info in archive.infolist():
            name = info.filename
            if (not name or "/" in name or "\\" in name or name in (".", "..") or info.is_dir()
                    or (info.external_attr >> 16) & 0o170000 == 0o120000):
                raise ValueError(f"ember.jit.load: refusing archive member {name!r}: only plain file names are "
                                 "allowed (no folders, links or paths)")
            total += info.file_size
            if total > _MAX_BYTES:
                raise ValueError("ember.jit.load: the archive unpacks to more than 16 GiB; refusing it")
        for info in archive.infolist():
            with archive.open(info) as member, open(os.path.join(tmp, info.filename), "wb") as out:
                shutil.copyfileobj(member, out)
        return load_directory(tmp)
