"""fit's MFU: a cached peak measured on a busy machine must be corrected, never shown above 100%."""
from ember import hardware
from ember.train.perf import StepStats


def test_a_run_faster_than_the_cached_peak_re_measures_instead_of_reporting_over_100(monkeypatch):
    calls = []

    def fake_observed(achieved_flops, achieved_bandwidth, dtype="float32", device="cpu"):
        calls.append((achieved_flops, dtype))
        return hardware.Peak("cpu", "test", {"float32": 4e9}, 1e10, "now", 0.0)

    monkeypatch.setattr(hardware, "observed", fake_observed)
    stats = StepStats(flops_per_sample=1e6, peak_flops=1e9)
    for _ in range(30):
        stats.add(wait=0.0, transfer=0.0, total=0.01, samples=20)  # 2e9 FLOP/s against a 1e9 peak
    assert abs(stats.mfu - 0.5) < 1e-12  # 2e9 over the re-measured 4e9
    assert len(calls) == 1 and abs(calls[0][0] - 2e9) < 1 and calls[0][1] == "float32"
    assert abs(stats.mfu - 0.5) < 1e-12 and len(calls) == 1  # corrected once, then kept


def test_a_few_noisy_steps_do_not_trigger_a_measurement(monkeypatch):
    monkeypatch.setattr(hardware, "observed", lambda *a, **k: (_ for _ in ()).throw(AssertionError("measured")))
    stats = StepStats(flops_per_sample=1e6, peak_flops=1e9)
    stats.add(wait=0.0, transfer=0.0, total=0.001, samples=10)
    assert stats.mfu == 1.0  # capped, not 10.0
