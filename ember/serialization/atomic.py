"""Atomic writes of files and directories, and cleanup of what interrupted writes left behind.

A file is written to a temporary file next to the target (``.NAME.PID.RANDOM.tmp``), flushed,
fsynced and renamed over the target, so a crash leaves the old file or the new one, never half of
one. A directory (a saved graph) is written to ``.NAME.PID.RANDOM.tmpdir``, fsynced, then swapped
with the old directory in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames).

A process killed mid-write cannot delete its temporary file, so every save first removes the
temporaries of the *same target* whose writer is gone: the PID in the name is not running (on this
machine), or the file is older than a day (a writer on another machine sharing the folder).

Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = atomic_write(os.path.join(d, "x.bin"), lambda f: f.write(b"hi"))
    >>> open(os.path.join(d, "x.bin"), "rb").read()
    b'hi'
"""
from __future__ import annotations

import ctypes
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Callable

STALE_AFTER_S = 24 * 3600  # a temp file this old is stale even if its PID is alive (PID reuse, other hosts)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but belongs to someone else, or we cannot tell: keep its file
    return True


def _temp_name(target: Path, suffix: str) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.{suffix}")


def clean_stale_temporaries(target: str | os.PathLike) -> list[Path]:
    """Remove temp files/dirs of ``target`` left by writers that died; return what was removed."""
    target = Path(target)
    folder = target.parent if str(target.parent) else Path(".")
    pattern = re.compile(re.escape(f".{target.name}.") + r"(?:(\d+)\.)?[0-9a-zA-Z_]+\.(tmp|tmpdir|old)$")
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None:
            continue
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if (pid is not None and _pid_alive(pid)) and age < STALE_AFTER_S:
            continue
        if pid is None and age < 3600:
            continue  # written by an older ember without a PID in the name: wait an hour
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    return removed


def _fsync_dir(folder: Path) -> None:
    try:  # make a rename durable (not possible on every OS/filesystem)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def atomic_write(path: str | os.PathLike, write: Callable[[Any], Any]) -> Path:
    """Call ``write(file)`` on a temp file next to ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    tmp = _temp_name(path, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        # Give the file the mode a plain open() would have (or the old file's), not 0600.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)
    return path


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux renameat2(RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


def atomic_directory(path: str | os.PathLike, fill: Callable[[Path], Any]) -> Path:
    """Call ``fill(temp_dir)``, fsync what it wrote, then put the directory in place of ``path``.

    An existing ``path`` is replaced as a whole: readers see the old directory or the new one.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"cannot save a directory to {path}: a file of that name exists")
    tmp = _temp_name(path, "tmpdir")
    tmp.mkdir(mode=0o777)
    try:
        fill(tmp)
        _fsync_tree(tmp)
        if not path.exists():
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            shutil.rmtree(tmp)  # tmp now holds the old directory
        else:  # two renames: a crash between them leaves the old copy as .old, cleaned next time
            old = _temp_name(path, "old")
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(folder)
    return path
