"""``torch.version``: what this build is (``ember.version.__version__``, ``.cuda``, ``.git_version``, ...).

Programs print these in their environment reports and branch on ``torch.version.cuda is None``. ember has
no CUDA toolkit of its own (the GPU backend is CuPy's), so ``cuda`` and ``hip`` are ``None``, as in PyTorch's
CPU wheels.

Example:
    >>> import ember as torch
    >>> torch.version.cuda is None, torch.version.__version__ == torch.__version__
    (True, True)
"""
from __future__ import annotations

__all__ = ["__version__", "ember_version", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]

from ember.torch_version import EMBER_VERSION as ember_version
from ember.torch_version import __version__  # noqa: F401  (the PyTorch API level, with ember's version as the local part)
debug = False
cuda: str | None = None
git_version = "unknown"
hip: str | None = None
rocm: str | None = None
xpu: str | None = None
