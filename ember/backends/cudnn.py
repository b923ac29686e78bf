"""``torch.backends.cudnn``: the flags scripts set (``benchmark``, ``deterministic``...).

The CUDA backend runs convolutions (forward, data and weight gradients), inference attention and layer norm
through cuDNN's frontend (ember/backends/cuda_cudnn.py) while ``enabled`` is True, falling back to CuPy per
signature; ``allow_tf32`` (True, as PyTorch) lets float32 convolutions use TF32 tensor cores.
``is_available()`` is True when a CUDA device and the frontend package (``nvidia-cudnn-frontend``) are there.

Example:
    >>> import ember.backends.cudnn as cudnn
    >>> cudnn.benchmark = True
    >>> cudnn.is_available()
    False
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import ember.backends as _backends  # (the package: get_backend is read at call time)

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """Whether ember's CUDA backend can call cuDNN (a GPU, CuPy and the cuDNN frontend)."""
    return _frontend() is not None


def version() -> int | None:
    """cuDNN's version number (e.g. 91000), None without it."""
    fe = _frontend()
    return None if fe is None else int(fe.backend_version())


def is_acceptable(tensor: Any) -> bool:
    """Whether cuDNN may take this tensor: on a CUDA device, a float type, cuDNN available."""
    device = getattr(tensor, "device", None)
    return (getattr(device, "type", None) == "cuda" and tensor.dtype.is_floating_point and is_available())


def _frontend() -> Any:
    """The frontend module as the backend serving ``cuda`` loads it (None: no GPU, the stand-in, no package)."""
    try:
        backend = _backends.get_backend("cuda")
    except RuntimeError:
        return None
    load = getattr(backend, "cudnn_frontend", None)
    return None if load is None else load()


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10, deterministic: bool = False,
          allow_tf32: bool = True) -> Iterator[None]:
    """Set the flags inside the block and restore them after."""
    module = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: module[n] for n in names}
    module.update(dict(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32))))
    try:
        yield
    finally:
        module.update(saved)
