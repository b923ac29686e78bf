"""``torch.backends.cuda`` (ember's ``ember.backends.cuda`` is the CUDA backend module, hence this name).

The matmul/attention flags scripts set. The CUDA backend (``ember/backends/cuda.py``, which
re-exports these names) listens to ``matmul``: ``allow_tf32 = True`` switches CuPy's float32 GEMMs
to TF32 at once; off by default, as in PyTorch.

Example:
    >>> import ember as torch
    >>> torch.backends.cuda.matmul.allow_tf32 = True
    >>> torch.backends.cuda.matmul.allow_tf32 = False
"""
from __future__ import annotations

import contextlib
import importlib.util
import warnings
from typing import Any, Callable, Iterator

_LISTENERS: list[Callable[[], None]] = []


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after any flag of ``matmul`` changes (the CUDA backend applies TF32)."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


class _Flags:
    def __init__(self, **flags: Any) -> None:
        self.__dict__.update(flags)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value
        for listener in _LISTENERS:
            listener()

    def __repr__(self) -> str:
        return f"flags({', '.join(f'{k}={v}' for k, v in self.__dict__.items())})"


matmul = _Flags(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                allow_bf16_reduced_precision_reduction=True, fp32_precision="none")
cufft_plan_cache = _Flags(size=0, max_size=0)
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether ember's GPU backend can be used on a machine with a GPU: CuPy is installed (PyTorch: built
    with CUDA). ``ember.cuda.is_available()`` says whether a GPU is there."""
    return importlib.util.find_spec("cupy") is not None


def enable_flash_sdp(enabled: bool) -> None:
    _SDP["flash"] = bool(enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _SDP["mem_efficient"] = bool(enabled)


def enable_math_sdp(enabled: bool) -> None:
    _SDP["math"] = bool(enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    _SDP["cudnn"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _SDP["flash"]


def mem_efficient_sdp_enabled() -> bool:
    return _SDP["mem_efficient"]


def math_sdp_enabled() -> bool:
    return _SDP["math"]


def cudnn_sdp_enabled() -> bool:
    return _SDP["cudnn"]


def preferred_linalg_library(backend: Any = None) -> str:
    return "default"


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True) -> Iterator[None]:
    """Deprecated in PyTorch (use ``torch.nn.attention.sdpa_kernel``): set the four attention-backend flags
    for the block and restore them after, with PyTorch's FutureWarning."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with updated "
                  "signature.", FutureWarning, stacklevel=3)
    previous = dict(_SDP)
    _SDP.update(flash=bool(enable_flash), math=bool(enable_math), mem_efficient=bool(enable_mem_efficient),
                cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _SDP.update(previous)
