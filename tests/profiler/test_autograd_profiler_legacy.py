"""``torch.autograd.profiler``'s older spelling of the profiler, as scripts use it, against torch's own."""
from __future__ import annotations

import pytest

import ember
from ember.profiler import _recorder

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _script(lib):
    """The same legacy-profiler script for torch and ember: ranges, shapes, FLOPs, the table."""
    x, w = lib.ones(4, 3), lib.ones(3, 2)
    with lib.autograd.profiler.profile(record_shapes=True, with_flops=True) as prof:
        with lib.autograd.profiler.record_function("block"):
            y = lib.mm(x, w)
    names = [e.name for e in prof.function_events]
    block = [e for e in prof.function_events if e.name == "block"][0]
    table = prof.key_averages().table(sort_by="self_cpu_time_total")
    return names, block, table, prof


def test_legacy_profile_records_ranges_shapes_and_flops_as_torch():
    t_names, t_block, t_table, _ = _script(torch)
    e_names, e_block, e_table, prof = _script(ember)
    assert e_names[0] == t_names[0] == "block"  # the range comes first, ops nest inside it
    mm = [e for e in prof.function_events if e.name == "mm" or e.name == "matmul"][0]
    assert mm.cpu_parent is e_block and mm.input_shapes == [[4, 3], [3, 2]] and mm.flops == 2 * 4 * 3 * 2
    assert "block" in e_table and "block" in t_table and "Self CPU" in e_table
    assert prof.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in prof.function_events))
    assert prof.table().splitlines()[1] == prof.key_averages().table().splitlines()[1]


def test_legacy_profile_disabled_records_nothing():
    with ember.autograd.profiler.profile(enabled=False) as prof:
        assert _recorder.active() is None
        ember.ones(2) + 1
    with torch.autograd.profiler.profile(enabled=False) as tprof:
        torch.ones(2) + 1
    assert prof is None and tprof is None  # torch binds None too
    legacy = ember.autograd.profiler.profile(enabled=False)
    with legacy:
        ember.ones(2) + 1
    with pytest.raises(RuntimeError, match="no trace"):
        legacy.key_averages()
