"""``ember.cuda``: what PyTorch scripts ask about the GPU (``torch.cuda.is_available()`` ...).

GPU execution itself comes with the CuPy backend (``ember/backends/cuda.py``). Until a GPU and CuPy
are present these answer truthfully: not available, zero devices; seeding is accepted (ember draws
random numbers on the host for every device), and calls that need a GPU raise a clear error.

Example:
    >>> import ember as torch
    >>> device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""
from __future__ import annotations

from typing import Any

from ember import _config


def _cupy() -> Any:
    try:
        import cupy

        return cupy
    except ImportError:
        return None


def device_count() -> int:
    """Number of visible CUDA devices (0 without CuPy or a GPU; the stand-in device counts)."""
    from ember.backends import _BACKENDS

    served = _BACKENDS.get("cuda")  # the stand-in device in tests (ember.testing.standin_cuda)
    if served is not None:
        return served.device_count() if served.is_available() else 0
    cupy = _cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no driver, no device: CuPy raises its own runtime errors
        return 0


def is_available() -> bool:
    """True when CuPy is installed, a GPU is visible and ember's CUDA backend module is present."""
    if device_count() == 0 and not _config.CUDA_STANDIN:
        return False
    try:
        from ember.backends import get_backend

        get_backend("cuda")
        return True
    except Exception:  # noqa: BLE001 - the backend module is not installed/importable
        return False


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"ember.cuda.{what}: no CUDA device is available (needs CuPy, a GPU and ember's CUDA "
                           "backend); check ember.cuda.is_available() first")


def synchronize(device: Any = None) -> None:
    _require("synchronize")
    _cupy().cuda.Device().synchronize()


def current_device() -> int:
    _require("current_device")
    return int(_cupy().cuda.runtime.getDevice())


def get_device_name(device: Any = None) -> str:
    _require("get_device_name")
    index = 0 if device is None else int(getattr(device, "index", device) or 0)
    return _cupy().cuda.runtime.getDeviceProperties(index)["name"].decode()


def manual_seed(seed: int) -> None:
    """Accepted for compatibility: ember samples on the host for every device (ember.manual_seed)."""


def manual_seed_all(seed: int) -> None:
    """Accepted for compatibility: see :func:`manual_seed`."""
from ember.amp import cuda_amp as amp  # noqa: E402,F401  (torch.cuda.amp)
