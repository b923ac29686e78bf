"""Observers against torch 2.13: running statistics and (scale, zero_point) equal bit for bit after each batch,
on random batches and on special ones (all zeros, one value, negative only, huge ranges)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
tq = pytest.importorskip("torch.ao.quantization")
warnings.filterwarnings("ignore", message=".*reduce_range will be deprecated.*")
warnings.filterwarnings("ignore", message=".*must run observer.*")


def _batches(seed: int, shape: tuple, count: int = 5) -> list:
    rng = np.random.default_rng(seed)
    out = [(rng.standard_normal(shape) * rng.uniform(0.01, 10) + rng.uniform(-2, 2)).astype(np.float32)
           for _ in range(count)]
    out.append(np.zeros(shape, np.float32))
    out.append(np.full(shape, -3.5, np.float32))
    return out


def _same_qparams(e: tuple, t: tuple) -> None:
    np.testing.assert_array_equal(e[0].numpy().view(np.int32), t[0].numpy().view(np.int32))
    np.testing.assert_array_equal(e[1].numpy(), t[1].numpy())
    assert str(e[1].dtype).split(".")[-1] == str(t[1].dtype).split(".")[-1]


def _kwargs(lib: object, spec: dict) -> dict:
    return {k: getattr(lib, v) if isinstance(v, str) and v.startswith(("q", "per_")) else v for k, v in spec.items()}


SPECS = [
    ("MinMaxObserver", {}),
    ("MinMaxObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"reduce_range": True}),
    ("MinMaxObserver", {"quant_min": 0, "quant_max": 127}),
    ("MinMaxObserver", {"dtype": "quint8", "qscheme": "per_tensor_symmetric"}),
    ("MovingAverageMinMaxObserver", {}),
    ("MovingAverageMinMaxObserver", {"averaging_constant": 0.3, "dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
    ("PerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric"}),
    ("PerChannelMinMaxObserver", {"ch_axis": 1}),
    ("MovingAveragePerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric"}),
    ("HistogramObserver", {}),
    ("HistogramObserver", {"reduce_range": True}),
    ("HistogramObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
]


@pytest.mark.parametrize("name,spec", SPECS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SPECS)])
def test_observer_qparams_equal_torch_after_every_batch(name: str, spec: dict) -> None:
    e_obs = getattr(eq, name)(**_kwargs(ember, spec))
    t_obs = getattr(tq, name)(**_kwargs(torch, spec))
    assert (e_obs.quant_min, e_obs.quant_max) == (t_obs.quant_min, t_obs.quant_max)
    _same_qparams(e_obs.calculate_qparams(), t_obs.calculate_qparams())  # nothing observed: the defaults
    for batch in _batches(len(name) + len(spec), (6, 50)):
        e_obs(ember.tensor(batch))
        t_obs(torch.from_numpy(batch))
        np.testing.assert_array_equal(e_obs.min_val.numpy(), t_obs.min_val.numpy())
        np.testing.assert_array_equal(e_obs.max_val.numpy(), t_obs.max_val.numpy())
        _same_qparams(e_obs.calculate_qparams(), t_obs.calculate_qparams())


def test_histogram_observer_state_matches_torch() -> None:
    """The histograms agree up to upsampled sub-bins (1/16 of a bin's mass) that torch's vectorized linspace puts
    one bin over (a midpoint an ulp away from an edge; docs/quantization.md); the total and the qparams agree."""
    e_obs, t_obs = eq.HistogramObserver(), tq.HistogramObserver()
    for batch in _batches(3, (4, 300), count=6):
        e_obs(ember.tensor(batch))
        t_obs(torch.from_numpy(batch))
        ours, theirs = e_obs.histogram.numpy(), t_obs.histogram.numpy()
        assert ours.sum() == theirs.sum()
        moved = np.abs(ours - theirs)
        assert np.count_nonzero(moved) <= 6 and moved.max(initial=0) <= 2 / 16
        _same_qparams(e_obs.calculate_qparams(), t_obs.calculate_qparams())


def test_observer_state_dicts_load_across_libraries() -> None:
    e_obs = eq.PerChannelMinMaxObserver(dtype=ember.qint8, qscheme=ember.per_channel_symmetric)
    e_obs(ember.randn(3, 5))
    t_obs = tq.PerChannelMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    t_obs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in e_obs.state_dict().items()})
    _same_qparams(e_obs.calculate_qparams(), t_obs.calculate_qparams())


def test_default_qconfigs_name_torchs_observers() -> None:
    for backend in ("x86", "fbgemm", "qnnpack", "onednn"):
        e, t = eq.get_default_qconfig(backend), tq.get_default_qconfig(backend)
        for part in ("activation", "weight"):
            eo, to = getattr(e, part)(), getattr(t, part)()
            assert type(eo).__name__ == type(to).__name__
            assert (eo.quant_min, eo.quant_max, eo.qscheme.name) == (to.quant_min, to.quant_max,
                                                                    str(to.qscheme).split(".")[-1])
        e, t = eq.get_default_qat_qconfig(backend), tq.get_default_qat_qconfig(backend)
        for part in ("activation", "weight"):
            eo, to = getattr(e, part)(), getattr(t, part)()
            assert type(eo).__name__ == type(to).__name__
            assert (eo.quant_min, eo.quant_max) == (to.quant_min, to.quant_max)
    with pytest.raises(AssertionError, match="not supported"):
        eq.get_default_qconfig("tpu")
