"""Download-once checkpoint cache (PyTorch's ``torch.hub``): ``load_state_dict_from_url``, ``download_url_to_file``.

Files land in ``<hub dir>/checkpoints/<file name>``. The hub dir is ``$EMBER_HOME/hub``; without
``EMBER_HOME`` it is ``$TORCH_HOME/hub`` when ``TORCH_HOME`` is set (so a cache PyTorch already
filled is reused: the same published ``.pth`` files), else ``~/.cache/ember/hub``
(``$XDG_CACHE_HOME/ember/hub`` when that is set). ``set_dir`` overrides all of them.

A file name like ``resnet18-f37072fd.pth`` carries the first hex digits of the file's SHA-256;
with ``check_hash=True`` (what ``weights=`` uses) the download is checked against it. Downloads go
to a temporary file in the same folder and are renamed into place only when complete and checked,
so an interrupted download never leaves a half file under the final name. ``file://`` URLs and
plain local paths are read directly (offline use).

Example:
    >>> import ember
    >>> ember.hub.get_dir().endswith("hub")
    True
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from typing import Any

from urllib.error import HTTPError, URLError  # noqa: E402,F401  (re-exported by torch.hub; timm imports them)
from urllib.parse import urlparse  # noqa: E402,F401
from urllib.request import Request, urlopen  # noqa: E402,F401

ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"

try:  # torch.hub re-exports tqdm (torchvision's datasets import it from torch.utils.model_zoo)
    from tqdm import tqdm
except ImportError:  # PyTorch's fallback when tqdm is missing: a quiet bar with the same methods
    class tqdm:  # type: ignore[no-redef]  # noqa: N801
        """A progress bar that counts and prints nothing (tqdm is not installed)."""

        def __init__(self, total: Any = None, disable: bool = False, unit: str | None = None, *args: Any,
                     **kwargs: Any) -> None:
            self.total, self.n = total, 0

        def update(self, n: int = 1) -> None:
            self.n += n

        def close(self) -> None:
            pass

        def set_description(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> "tqdm":
            return self

        def __exit__(self, *exc: Any) -> None:
            self.close()

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # torch.hub's rule: the hex digits after the last '-' of the name
_hub_dir: str | None = None


def _default_home() -> str:
    if os.environ.get("EMBER_HOME"):
        return os.path.expanduser(os.environ["EMBER_HOME"])
    if os.environ.get("TORCH_HOME"):
        return os.path.expanduser(os.environ["TORCH_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(cache), "ember")


def _get_torch_home() -> str:
    """The cache root (``torch.hub._get_torch_home``; torchvision reads it for its dataset folder)."""
    return _default_home()


def get_dir() -> str:
    """The hub directory (checkpoints live in its ``checkpoints`` sub-folder)."""
    return _hub_dir if _hub_dir is not None else os.path.join(_default_home(), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Use ``d`` as the hub directory from now on (overrides ``EMBER_HOME``/``TORCH_HOME``)."""
    global _hub_dir
    _hub_dir = os.path.expanduser(str(d))


class DownloadError(RuntimeError):
    """A download failed (no network, HTTP error); the message says where to put the file by hand."""


def _local_path(url: str) -> str | None:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        return urllib.request.url2pathname(parsed.path)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return url
    return None


def _progress_bar(total: int | None, enabled: bool, name: str) -> Any:
    if not enabled:
        return None
    if tqdm.__module__ == __name__:  # no tqdm installed: no bar
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=name, file=sys.stderr)


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True,
                         timeout: float = 60.0) -> None:
    """Download ``url`` to ``dst`` atomically; with ``hash_prefix``, the SHA-256 must start with it.

    Shows a tqdm progress bar (stderr) when ``progress`` and tqdm is installed. A failed download
    raises :class:`DownloadError` naming ``dst``, the place to put the file by hand.
    """
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=".partial-", dir=folder)
    bar = None
    try:
        with os.fdopen(fd, "wb") as out:
            local = _local_path(url)
            if local is not None:
                source: Any = open(local, "rb")
                total: int | None = os.path.getsize(local)
            else:
                request = urllib.request.Request(url, headers={"User-Agent": "ember.hub"})
                try:
                    source = urllib.request.urlopen(request, timeout=timeout)
                except OSError as error:  # URLError, HTTPError and socket errors are all OSErrors
                    raise DownloadError(
                        f"could not download {url} ({error}). Without network access, download the file elsewhere "
                        f"and put it at {dst} (or set EMBER_HOME so <EMBER_HOME>/hub/checkpoints holds it)"
                    ) from error
                length = source.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
            bar = _progress_bar(total, progress, os.path.basename(dst))
            with source:
                while True:
                    chunk = source.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
                    digest.update(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}") for '
                               f"{url}; the download is corrupt or the file was replaced")
        os.replace(tmp, dst)
    finally:
        if bar is not None:
            bar.close()
        if os.path.exists(tmp):
            os.remove(tmp)


def _check_file_hash(path: str, hash_prefix: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if not digest.hexdigest().startswith(hash_prefix):
        raise RuntimeError(f'{path}: invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}"); '
                           "delete the file to download it again")


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location: Any = None,
                             progress: bool = True, check_hash: bool = False, file_name: str | None = None,
                             weights_only: bool = True) -> dict[str, Any]:
    """The checkpoint at ``url``, downloaded into ``<hub dir>/checkpoints`` on first use, then loaded with
    ``ember.load`` (restricted unpickling unless ``weights_only=False``).

    ``url`` may be ``https://...``, ``file://...`` or a local path. A cached file is used without
    network access. ``check_hash`` checks the SHA-256 prefix in the file name (``name-<hex>.ext``).
    """
    import ember

    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    match = HASH_REGEX.search(filename) if check_hash else None
    hash_prefix = match.group(1) if match else None
    if not os.path.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    zipped = _zipped_checkpoint(cached)
    if zipped is not None:  # torch.hub's "legacy zip": one checkpoint zipped (read in memory, never extracted)
        return ember.load(zipped, map_location=map_location, weights_only=weights_only)
    return ember.load(cached, map_location=map_location, weights_only=weights_only)


def _zipped_checkpoint(path: str) -> io.BytesIO | None:
    """A zip holding exactly one file (how old checkpoints were published; torch.hub unzips them): that file's
    bytes. A PyTorch zip checkpoint has several members, so it is never taken for one. Nothing is written to disk,
    so a member name with ``../`` reaches no folder."""
    if not zipfile.is_zipfile(path):
        return None
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if len(infos) != 1 or infos[0].is_dir():
            return None
        try:
            return io.BytesIO(archive.read(infos[0]))
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as error:
            raise ValueError(f"{path}: the checkpoint zipped inside ({infos[0].filename!r}) is damaged ({error})") \
                from None



load_url = load_state_dict_from_url  # torch.utils.model_zoo.load_url

from ember.hub_repos import help, list, load  # noqa: E402,A004  (hubconf.py repositories; they import this module)

__all__ = ["DownloadError", "download_url_to_file", "get_dir", "load_state_dict_from_url", "load_url", "set_dir",
           "load", "list", "help"]
