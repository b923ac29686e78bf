"""``ember.cuda`` and the pinned-memory / device-RNG plumbing on the stand-in device (no GPU needed).

The stand-in serves device type ``cuda`` with arrays that refuse silent host conversion, so the
code paths a GPU run takes (events and streams through the backend, pin -> non_blocking copy,
DataLoader pinning, per-device default generators drawing on the device, their states) run here for
real; only the backend's own implementation (CuPy's events, pinned pool, Philox kernels) differs.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

standin_cuda = getattr(ember.testing, "standin_cuda", None)
pytestmark = pytest.mark.skipif(standin_cuda is None, reason="the stand-in device is not on this branch")


@pytest.fixture()
def cuda():
    with standin_cuda():
        yield


def test_availability_and_devices(cuda):
    assert ember.cuda.is_available() and ember.cuda.device_count() >= 1
    assert ember.cuda.current_device() == 0
    ember.cuda.set_device(0)
    with ember.cuda.device(0):
        assert ember.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ember.cuda.set_device(ember.cuda.device_count())
    props = ember.cuda.get_device_properties(0)
    assert props.name == ember.cuda.get_device_name() and props.multi_processor_count >= 1
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    assert ember.cuda.memory_allocated() >= 0 and ember.cuda.max_memory_allocated() >= ember.cuda.memory_allocated()


def test_events_time_work_and_streams_scope_it(cuda):
    a = ember.randn(200, 200, device="cuda")
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        a = a @ a / 200
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0.0 and end.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        ember.cuda.Event().elapsed_time(ember.cuda.Event())
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        b = a * 2
    s.synchronize()
    s.wait_stream(ember.cuda.current_stream())
    assert s.record_event().query()
    np.testing.assert_array_equal(b.cpu().numpy(), a.cpu().numpy() * 2)


def test_pin_memory_then_non_blocking_copy(cuda):
    x = ember.arange(12.0).reshape(3, 4)
    p = x.pin_memory()
    assert p.is_pinned() and p[1:].is_pinned() and not x.is_pinned()
    assert p.pin_memory() is p
    np.testing.assert_array_equal(p.numpy(), x.numpy())
    y = p.to("cuda", non_blocking=True)
    z = x.cuda(non_blocking=True)
    ember.cuda.synchronize()
    assert y.device.type == "cuda" and z.device.type == "cuda"
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="only dense CPU tensors"):
        y.pin_memory()
    w = ember.ones(3, requires_grad=True).pin_memory()
    assert w.requires_grad and w.is_pinned()


def test_dataloader_pins_batches(cuda):
    data = ember.data.TensorDataset(ember.arange(10.0), ember.arange(10))
    batches = list(ember.data.DataLoader(data, batch_size=4, pin_memory=True))
    assert all(t.is_pinned() for batch in batches for t in batch)
    assert [b[0].tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    unpinned = list(ember.data.DataLoader(data, batch_size=4))
    assert not any(t.is_pinned() for batch in unpinned for t in batch)


def test_random_numbers_on_the_device_follow_the_seeds(cuda):
    ember.manual_seed(0)
    a = ember.rand(100, device="cuda")
    c = ember.rand(100)
    ember.manual_seed(0)
    b = ember.rand(100, device="cuda")
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    np.testing.assert_array_equal(c.numpy(), ember.rand(100).numpy())  # the CPU stream is its own
    gen = ember.random.cuda_generator(0)
    assert gen.device.type == "cuda"
    ember.cuda.manual_seed(5)
    first = ember.randn(50, device="cuda")
    ember.cuda.manual_seed_all(5)
    np.testing.assert_array_equal(ember.randn(50, device="cuda").cpu().numpy(), first.cpu().numpy())
    state = ember.cuda.get_rng_state()
    n1 = ember.randint(0, 10, (30,), device="cuda")
    ember.cuda.set_rng_state(state)
    np.testing.assert_array_equal(ember.randint(0, 10, (30,), device="cuda").cpu().numpy(), n1.cpu().numpy())
    assert len(ember.cuda.get_rng_state_all()) == ember.cuda.device_count()
    perm = ember.randperm(20, device="cuda").cpu().numpy()
    assert sorted(perm.tolist()) == list(range(20))
    d = ember.nn.functional.dropout(ember.ones(4000, device="cuda"), 0.5)
    assert d.device.type == "cuda" and 0.4 < float((d != 0).float().mean().item()) < 0.6
