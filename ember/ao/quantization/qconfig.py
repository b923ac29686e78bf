"""QConfig: which observer (or fake quantize) watches a module's activations and its weight.

``get_default_qconfig('x86' | 'fbgemm' | 'qnnpack' | 'onednn')`` and ``get_default_qat_qconfig`` return PyTorch's
choices for each backend (x86/fbgemm: histogram activations with ``reduce_range=True``, per-channel weights).

Example:
    >>> from ember.ao.quantization import get_default_qconfig
    >>> type(get_default_qconfig("x86").weight()).__name__
    'PerChannelMinMaxObserver'
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ember.ao.qdtypes import per_channel_affine_float_qparams, quint8
from ember.ao.quantization import fake_quantize as fq
from ember.ao.quantization.histogram_observer import HistogramObserver
from ember.ao.quantization.observer import (MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
                                            PlaceholderObserver,
                                            default_dynamic_quant_observer, default_observer,
                                            default_per_channel_weight_observer, default_placeholder_observer,
                                            default_weight_observer)
from ember import dtypes

_BACKENDS = ("fbgemm", "x86", "qnnpack", "onednn")


class QConfig(NamedTuple):
    """Factories (``Observer.with_args(...)``) for the activation and the weight observers of a module."""

    activation: Any
    weight: Any


QConfigDynamic = QConfig  # PyTorch's deprecated alias


def _check_backend(backend: str, op: str) -> None:
    if backend not in _BACKENDS:
        raise AssertionError(f"{op}: backend: {backend} not supported. backend must be one of {list(_BACKENDS)}")


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer, weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer, weight=default_weight_observer)
float16_dynamic_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=dtypes.float16, is_dynamic=True),
                                  weight=PlaceholderObserver.with_args(dtype=dtypes.float16))
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float_qparams_weight_only_qconfig = QConfig(
    activation=default_placeholder_observer,
    weight=PerChannelMinMaxObserver.with_args(dtype=quint8, qscheme=per_channel_affine_float_qparams))
default_qat_qconfig = QConfig(activation=fq.default_fake_quant, weight=fq.default_weight_fake_quant)
default_qat_qconfig_v2 = QConfig(activation=fq.default_fused_act_fake_quant, weight=fq.default_fused_wt_fake_quant)
float16_static_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=dtypes.float16),
                                 weight=PlaceholderObserver.with_args(dtype=dtypes.float16))


def get_default_qconfig(backend: str = "x86", version: int = 0) -> QConfig:
    """PyTorch's post-training static quantization defaults per backend."""
    _check_backend(backend, "get_default_qconfig")
    if version != 0:
        raise AssertionError(f"Version number: {version} in get_default_qconfig is not supported. Version number "
                             "must be 0")
    if backend in ("fbgemm", "x86"):
        return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False), weight=default_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                   weight=default_per_channel_weight_observer)


def get_default_qat_qconfig(backend: str = "x86", version: int = 1) -> QConfig:
    """PyTorch's quantization-aware training defaults per backend (version 1: the fused fake quantize)."""
    _check_backend(backend, "get_default_qat_qconfig")
    if version == 0:
        act = fq.FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                        reduce_range=backend in ("fbgemm", "x86"))
        if backend == "qnnpack":
            return QConfig(activation=act, weight=fq.default_weight_fake_quant)
        return QConfig(activation=act, weight=fq.default_per_channel_weight_fake_quant)
    if version != 1:
        raise AssertionError(f"Version number: {version} in get_default_qat_qconfig is not supported. Version "
                             "number must be 0 or 1")
    act = fq.FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                                     quant_max=255, reduce_range=backend in ("fbgemm", "x86"))
    if backend == "qnnpack":
        return QConfig(activation=act, weight=fq.default_fused_wt_fake_quant)
    return QConfig(activation=act, weight=fq.default_fused_per_channel_wt_fake_quant)


def get_default_qconfig_dict(backend: str = "x86", version: int = 0) -> dict:
    return {"": get_default_qconfig(backend, version)}


def get_default_qat_qconfig_dict(backend: str = "x86", version: int = 1) -> dict:
    return {"": get_default_qat_qconfig(backend, version)}
