"""``torch.backends.cuda`` (ember's ``ember.backends.cuda`` is the CUDA backend module, hence this name).

The matmul/attention flags scripts set; ember has no CUDA backend built, so they are recorded only.

Example:
    >>> import ember as torch
    >>> torch.backends.cuda.matmul.allow_tf32 = True
    >>> torch.backends.cuda.is_built()
    False
"""
from __future__ import annotations

from typing import Any


class _Flags:
    def __init__(self, **flags: Any) -> None:
        self.__dict__.update(flags)

    def __repr__(self) -> str:
        return f"flags({', '.join(f'{k}={v}' for k, v in self.__dict__.items())})"


matmul = _Flags(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                allow_bf16_reduced_precision_reduction=True, fp32_precision="none")
cufft_plan_cache = _Flags(size=0, max_size=0)
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    return False


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
