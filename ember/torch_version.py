"""``torch.torch_version.TorchVersion``: a version string that compares as a version (with strings, tuples and
``packaging`` versions), and the PyTorch API level ember reports.

Programs gate features on the version of the library they imported as ``torch``:
``version.parse(torch.__version__) < version.parse("2.0.0")`` (denoising-diffusion-pytorch refuses flash
attention then), ``torch.__version__ >= "1.10"``, ``torch.__version__ >= (2, 1)``,
``int(torch.__version__.split(".")[0])``. ember implements PyTorch 2.13's API, so ``ember.__version__`` is
``2.13.0+ember.0.1.0``: PyTorch's release number, with ember's own version in the local part (PyTorch's CPU
wheel says ``2.13.0+cpu``). ember's own version alone is ``ember.version.ember_version``.

Example:
    >>> from ember.torch_version import TorchVersion
    >>> v = TorchVersion("2.13.0+ember.0.1.0")
    >>> v >= "2.0", v < (2, 14), v > "2.13.0rc1", v.split(".")[0]
    (True, True, True, '2')
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["TorchVersion", "TORCH_API_VERSION", "EMBER_VERSION", "internal_version"]

EMBER_VERSION = "0.1.0"
TORCH_API_VERSION = "2.13.0"  # the PyTorch release whose API ember follows (and is tested against)

_PATTERN = re.compile(r"^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|alpha|b|beta|rc|c)[-_.]?(\d*))?(?:[-_.]?post[-_.]?(\d*))?"
                      r"(?:[-_.]?dev[-_.]?(\d*))?(?:\+([a-z0-9.]+))?$", re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "rc": 2, "c": 2}


def _key(text: str) -> tuple:
    """A sort key in PEP 440's order: dev < alpha < beta < rc < release < post; local part last."""
    match = _PATTERN.match(text.strip())
    if match is None:
        raise ValueError(f"Invalid version: {text!r}")
    release, pre, pre_n, post, dev, local = match.groups()
    numbers = tuple(int(n) for n in release.split("."))
    while len(numbers) > 1 and numbers[-1] == 0:  # 2.0 == 2.0.0
        numbers = numbers[:-1]
    if pre is not None:
        phase = (_PRE_RANK[pre.lower()], int(pre_n or 0))
    elif dev is not None and post is None:
        phase = (-1, 0)  # 2.0.dev1 sorts before 2.0a1
    else:
        phase = (3, 0)
    post_key = -1 if post is None else int(post or 0)
    dev_key = float("inf") if dev is None else int(dev or 0)
    local_key = tuple((0, int(p)) if p.isdigit() else (1, p) for p in local.lower().split(".")) if local else ()
    return numbers, phase, post_key, dev_key, local_key


def _other_key(other: Any) -> tuple:
    if isinstance(other, str):
        return _key(other)
    if isinstance(other, (tuple, list)):
        return _key(".".join(str(int(p)) for p in other))
    if hasattr(other, "release"):  # packaging.version.Version
        return _key(str(other))
    raise TypeError(f"cannot compare a version with {type(other).__name__}")


class TorchVersion(str):
    """A ``str`` whose comparisons are version comparisons (against strings, tuples and ``Version`` objects)."""

    __slots__ = ()

    def _cmp(self, other: Any) -> int:
        mine, theirs = _key(str(self)), _other_key(other)
        return (mine > theirs) - (mine < theirs)

    def __eq__(self, other: Any) -> bool:
        try:
            return self._cmp(other) == 0
        except (TypeError, ValueError):
            return str.__eq__(self, other)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Any) -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: Any) -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: Any) -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: Any) -> bool:
        return self._cmp(other) >= 0

    __hash__ = str.__hash__


internal_version = f"{TORCH_API_VERSION}+ember.{EMBER_VERSION}"
__version__ = TorchVersion(internal_version)
