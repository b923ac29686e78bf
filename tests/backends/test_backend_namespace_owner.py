"""A second device type on NumPy must not take NumPy's arrays over from the CPU backend.

``register_backend`` maps an array namespace to the backend that serves it (``backend_for``: fused kernels,
special functions, native kernels). A custom device on NumPy (tests/profiler's fake GPU) used to take that
mapping for the whole process: every compiled CPU graph then asked the fake device's fuse hook and lost the
promotion of short fused kernels to Numba loops, silently. Two pytest workers found it (the profiler file
ran before tests/graph/test_fuse_later.py in one worker).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import backends
from ember.backends import backend_for, get_backend, register_backend
from ember.backends.cpu import CPUBackend
from ember.graph.passes import fuse_later


@pytest.fixture()
def registry():
    """The backend tables as they were, restored in place (other modules hold the same dict objects)."""
    saved = dict(backends._BACKENDS), dict(backends._BY_NAMESPACE)
    yield
    for table, old in zip((backends._BACKENDS, backends._BY_NAMESPACE), saved):
        table.clear()
        table.update(old)


def _fake(name: str) -> CPUBackend:
    return type("FakeDevice", (CPUBackend,), {"name": name})()


def test_a_second_device_on_numpy_leaves_numpy_to_the_cpu(registry):
    cpu = get_backend("cpu")
    fake = _fake("fakedev")
    register_backend("fakedev", fake)
    assert get_backend("fakedev") is fake
    assert backend_for(np) is cpu
    assert backends.native_kernel(np, "no_such_kernel") is None  # still asks the CPU backend (no error)


def test_compiled_cpu_graphs_still_promote_short_kernels_after_it(registry):
    pytest.importorskip("numba")
    register_backend("fakedev", _fake("fakedev"))
    fn = ember.compile(lambda a, b: (a + b) * 0.5 - a, measure=False)
    a, b = ember.ones(8), ember.full((8,), 2.0)
    for _ in range(fuse_later.RUNS + 2):
        out = fn(a, b)
    np.testing.assert_array_equal(out.numpy(), np.full(8, 0.5, np.float32))
    kernels = [n.op.impl for n in fn.last.executable.nodes if n.op.name == "fused"]
    assert kernels and all(getattr(k, "later", False) and k.loop is not None for k in kernels), kernels


def test_replacing_a_device_types_backend_moves_its_namespace(registry):
    new_cpu = _fake("cpu")
    register_backend("cpu", new_cpu)  # the same device type: the new backend serves NumPy (as the stand-in's swap)
    assert backend_for(np) is new_cpu and get_backend("cpu") is new_cpu
