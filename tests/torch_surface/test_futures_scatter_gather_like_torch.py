"""``torch.futures`` and ``torch.nn.parallel.scatter_gather`` (found by importing captum, which imports both at
module level: ``from torch.futures import Future, collect_all``, ``from torch.nn.parallel.scatter_gather import
scatter``). Future semantics and messages are compared with torch 2.13's; scatter/gather, which torch's CPU build
cannot run (they need CUDA), are compared with ``Tensor.chunk``/``torch.cat`` on CPU targets."""
from __future__ import annotations

import threading
from collections import namedtuple

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as error:  # noqa: BLE001 - the type and words are what is compared
        return (type(error).__name__, str(error).split("\n")[0])


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
def test_future_semantics_equal_torch(lib):
    # The same script in both libraries; the record is compared between them below.
    record = []
    f = lib.futures.Future()
    seen = []
    f.add_done_callback(lambda fut: seen.append(("cb", fut.value())))
    chained = f.then(lambda fut: fut.value() * 2)
    failing = f.then(lambda fut: 1 / 0)
    record.append(f.done())
    f.set_result(21)
    record += [f.done(), f.wait(), f.value(), chained.wait(), seen]
    record.append(_outcome(failing.wait))
    record.append(_outcome(lambda: f.set_result(1)))
    late = []
    f.add_done_callback(lambda fut: late.append(fut.wait()))  # already complete: runs at once
    record.append(late)
    g = lib.futures.Future()
    g.set_exception(ValueError("boom"))
    record += [g.done(), _outcome(g.wait), _outcome(g.value)]
    record.append(_outcome(lambda: lib.futures.Future().set_exception(3)))
    a, b = lib.futures.Future(), lib.futures.Future()
    both = lib.futures.collect_all([a, b])
    a.set_result(1)
    record.append(both.done())
    b.set_result(2)
    record += [both.done(), [x.wait() for x in both.wait()], lib.futures.wait_all([a, b])]
    empty = lib.futures.collect_all([])
    record += [empty.done(), empty.wait()]
    record.append(lib.jit.fork(lambda x: x + 1, 4).wait())
    record.append(isinstance(lib.jit.fork(lambda: 0), lib.Future))
    test_future_semantics_equal_torch.records[lib.__name__] = record
    if len(test_future_semantics_equal_torch.records) == 2:
        e, t = (test_future_semantics_equal_torch.records[k] for k in ("ember", "torch"))
        assert e == t


test_future_semantics_equal_torch.records = {}


def test_future_wait_blocks_until_another_thread_sets_it():
    f = ember.futures.Future()
    timer = threading.Timer(0.05, lambda: f.set_result(ember.ones(2) * 3))
    timer.start()
    assert f.wait().tolist() == [3.0, 3.0]
    timer.join()


def test_scatter_chunks_tensors_and_repeats_other_objects():
    x = ember.arange(10.0).reshape(5, 2)
    Pair = namedtuple("Pair", "a b")
    parts = ember.nn.parallel.scatter_gather.scatter((x, {"k": x, "s": "tag"}, Pair(x, 7)), ["cpu", "cpu"], 0)
    ref = torch.arange(10.0).reshape(5, 2).chunk(2, 0)
    assert len(parts) == 2
    for part, r in zip(parts, ref):
        t, d, p = part
        assert np.array_equal(t.numpy(), r.numpy()) and np.array_equal(d["k"].numpy(), r.numpy())
        assert d["s"] == "tag" and type(p) is Pair and p.b == 7
    inputs, kwargs = ember.nn.parallel.scatter_gather.scatter_kwargs((x,), {}, ["cpu", "cpu"], 1)
    assert [i[0].shape for i in inputs] == [(5, 1), (5, 1)] and kwargs == ({}, {})


def test_gather_concatenates_on_the_target_device():
    from ember.nn.parallel import gather

    outs = [{"y": ember.ones(2, 3), "n": None}, {"y": ember.zeros(1, 3), "n": None}]
    got = gather(outs, -1, 0)
    ref = torch.cat([torch.ones(2, 3), torch.zeros(1, 3)], 0)
    assert np.array_equal(got["y"].numpy(), ref.numpy()) and got["n"] is None
    assert gather([ember.ones(2), ember.ones(3)], "cpu").shape == (5,)


def test_module_paths_import_under_torch_names():
    import importlib

    from ember.run.alias import module_for

    assert module_for("torch.futures") is importlib.import_module("ember.futures")
    assert module_for("torch.nn.parallel.scatter_gather").scatter is ember.nn.parallel.scatter
    assert ember.Future is ember.futures.Future
