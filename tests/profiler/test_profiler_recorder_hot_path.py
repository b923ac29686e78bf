"""The recorder's hot path (ember/profiler/_recorder.py): what it leaves for later must come out the same.

FLOPs and bytes are computed after recording from interned signatures; they must equal what the FLOP
counter computes eagerly from the live tensors of each call, and hand counts. Attributes are kept only for
ops whose cost rules read them, outputs of the elementwise fast path are derived from the op and its
inputs, events are appended atomically (threads), and compacting the log mid-profile changes nothing.
"""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.ops.registry import OPS
from ember.profiler import ProfilerActivity, _recorder, profile, record_function
from ember.utils.flop_counter import FlopCounterMode


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _workload():
    """matmul, conv (forward and both gradients), attention, layer_norm, pooling (its kernel is an attribute),
    einsum twice on the same shapes with different equations, broadcasting elementwise ops and a comparison."""
    conv = nn.Conv2d(2, 4, 3, padding=1)
    x = ember.randn(2, 2, 8, 8, requires_grad=True)
    y = F.max_pool2d(conv(x).relu(), 2)
    y.sum().backward()
    q, k, v = (ember.randn(2, 3, 5, 4) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v)
    F.layer_norm(ember.randn(6, 10), (10,), ember.randn(10), ember.randn(10))
    a, b = ember.randn(8, 8), ember.randn(8, 8)
    ember.einsum("ij,jk->ik", a, b)
    ember.einsum("ij,ij->ij", a, b)
    m, r = ember.randn(4, 5), ember.randn(5)
    ((m + r) * 2.0 > r).sum()
    m @ ember.randn(5, 3)


def _per_name(events, attr):
    totals: dict = {}
    for e in events:
        if e.category == "cpu_op":
            totals[e.name] = totals.get(e.name, 0) + getattr(e, attr)
    return totals


def test_lazily_computed_flops_equal_the_eager_count_per_op():
    ember.manual_seed(0)
    with FlopCounterMode(display=False) as counter:
        _workload()
    eager = {name: flops for name, flops in counter.get_flop_counts()["Global"].items() if flops}
    ember.manual_seed(0)
    with profile(record_shapes=True, profile_memory=True, with_flops=True, backward_ops=True) as prof:
        _workload()  # (backward_ops: the backward dispatches its ops as under the counter, so each is an event)
    lazy = {name: flops for name, flops in _per_name(prof.events(), "flops").items() if flops}
    assert lazy == eager
    # and against hand counts for the ops the issue names
    conv_flops = 2 * 2 * 4 * 8 * 8 * (2 * 3 * 3)
    assert lazy["conv2d"] == conv_flops + 2 * 4 * 8 * 8  # the record adds the bias: one add per output
    assert lazy["conv2d_input_grad"] == lazy["conv2d_weight_grad"] == conv_flops
    assert lazy["einsum"] == 2 * 8 * 8 * 8 + 2 * 8 * 8  # the two equations (2 per index point), not one twice
    assert lazy["max_pool2d"] == 2 * 4 * 4 * 4 * (2 * 2)
    assert lazy["matmul"] == 2 * 4 * 3 * 5


def test_elementwise_outputs_are_derived_right_bytes_and_memory():
    m, r = ember.randn(4, 5), ember.randn(5)
    i = ember.arange(6)
    with profile(record_shapes=True, profile_memory=True, with_flops=True) as prof:
        m + r
        m > r  # the same input shapes as the add, a bool output
        i * 2  # an int tensor times an int: int64 out
        i * 2.5  # the tensor is cast first: float out
    ops = [e for e in prof.events() if e.category == "cpu_op"]
    add, gt = [e for e in ops if e.name == "add"][0], [e for e in ops if e.name == "gt"][0]
    assert add.input_shapes == gt.input_shapes == [[4, 5], [5]]
    assert add.bytes == (20 + 5 + 20) * 4 and add.cpu_memory_usage == 20 * 4 and add.flops == 20
    assert gt.bytes == (20 + 5) * 4 + 20 and gt.cpu_memory_usage == 20  # one byte per bool
    muls = [e for e in ops if e.name == "mul"]
    assert [e.input_dtypes for e in muls] == [["int64", "Scalar"], ["float32", "Scalar"]]
    assert [e.cpu_memory_usage for e in muls] == [6 * 8, 6 * 4]


def test_attributes_holding_tensors_are_keyed_by_shape_and_not_kept_alive():
    rec = _recorder.Recorder()
    a, b = ember.randn(3, 4), ember.randn(4, 5)
    out = ember.einsum("ij,jk->ik", a, b)
    extra = ember.randn(7)
    alive = weakref.ref(extra)
    t0 = rec.clock()
    rec.op(OPS["einsum"], t0, (a, b), {"equation": "ij,jk->ik", "extra": extra}, out)
    rec.op(OPS["einsum"], t0, (a, b), {"equation": "ij,jk->ik", "extra": ember.randn(7)}, out)
    rec.op(OPS["einsum"], t0, (a, b), {"equation": "ij,jk->ik", "extra": ember.randn(2)}, out)
    del extra
    gc.collect()
    assert alive() is None
    records = list(rec.records())
    assert len(records) == 3 and len({id(r[7]) for r in records}) == 2  # same shape: one signature
    assert records[0][7]["extra"] == ("array", (7,), str(ember.float32))


def test_unhashable_attributes_and_plain_ops_without_shapes():
    rec = _recorder.Recorder()
    x = ember.randn(4, 6)
    out = ember.einsum("ij->ji", x)
    t0 = rec.clock()
    rec.op(OPS["einsum"], t0, (x,), {"equation": "ij->ji", "slices": [slice(0, 2)]}, out)
    rec.op(OPS["einsum"], t0, (x,), {"equation": "ij->ji", "slices": [slice(0, 2)]}, out)
    (first, second) = list(rec.records())
    assert first[7] is second[7] and first[5] == ((x._data.shape, x._data.dtype),)
    plain = _recorder.Recorder(shapes=False)
    plain.op(OPS["einsum"], plain.clock(), (x,), {"equation": "ij->ji"}, out)
    assert [r[:2] for r in plain.records()] == [(_recorder.OP, OPS["einsum"])]


@pytest.mark.parametrize("shapes", [True, False])
def test_threads_recording_at_once_give_whole_events(shapes):
    a, b = ember.randn(3), ember.randn(3)
    start = threading.Barrier(2)

    def work():
        start.wait()
        for _ in range(300):
            a + b

    with profile(record_shapes=shapes) as prof:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    adds = [e for e in prof.events() if e.name == "add"]
    assert len(adds) == 600 and len({e.thread for e in adds}) == 2
    assert all(e.cpu_parent is None and 0 <= e.start_us <= e.end_us for e in adds)
    if shapes:
        assert all(e.input_shapes == [[3], [3]] for e in adds)


def _training_step_profile(**kwargs):
    ember.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = ember.optim.Adam(model.parameters())
    x, y = ember.randn(5, 6), ember.randint(0, 3, (5,))
    for _ in range(2):  # the optimizer's compiled update runs from the second step
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    with profile(**kwargs) as prof:
        for step in range(3):
            with record_function(f"step{step}"):
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
    return [(e.name, e.category, e.input_shapes, e.flops, e.bytes, e.cpu_parent.name if e.cpu_parent else None)
            for e in prof.events()]


@pytest.mark.parametrize("shapes", [True, False])
def test_compacting_mid_profile_changes_nothing(monkeypatch, shapes):
    whole = _training_step_profile(record_shapes=shapes, with_flops=shapes)
    monkeypatch.setattr(_recorder, "COMPACT_AT", 8)
    compacted = _training_step_profile(record_shapes=shapes, with_flops=shapes)
    assert compacted == whole
    assert any(c == "graph_node" for _, c, *_ in whole) and any(c == "autograd" for _, c, *_ in whole)


def test_graph_nodes_take_one_clock_reading_each():
    w = ember.randn(6, 6)
    step = ember.compile(lambda x: ((x @ w).relu() * 2).sum())
    x = ember.randn(4, 6)
    for _ in range(2):
        step(x)
    with profile() as prof:
        step(x)
    events = prof.events()
    (run,) = [e for e in events if e.name == "graph::run"]
    nodes = [e for e in events if e.category == "graph_node"]
    assert len(nodes) >= 2 and all(e.cpu_parent is run for e in nodes)
    for before, after in zip(nodes, nodes[1:]):
        assert before.end_us == after.start_us  # a node ends where the next one starts


def test_device_launches_survive_compaction(monkeypatch):
    monkeypatch.setattr(_recorder, "COMPACT_AT", 4)
    with ember.testing.standin_cuda():
        w = ember.randn(16, 8, device="cuda", requires_grad=True)
        x = ember.randn(4, 16)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for _ in range(3):
                with record_function("step"):
                    (x.to("cuda") @ w).relu().sum().backward()
    host = [e for e in prof.events() if e.device_type == "CPU" and e.category in ("cpu_op", "memcpy")]
    launched = [e for e in host if e.name in ("matmul", "relu", "sum", "relu_grad", "Memcpy HtoD")]
    assert len(launched) >= 15
    for event in launched:
        (kernel,) = event.kernels
        assert kernel.correlation is event and event.start_us <= kernel.start_us <= kernel.end_us <= event.end_us


class _Live:
    """A listener that notes each op's input shapes/dtypes and output bytes from the live tensors, to compare
    with what the recorder derives later from the references it logged."""

    clock = staticmethod(_recorder._clock)

    def __init__(self) -> None:
        self.seen: list = []

    def op(self, op, t0, args, attrs, result):
        outs = result if type(result) is tuple else (result,)
        self.seen.append((op.name, [list(a.shape) if isinstance(a, ember.Tensor) else [] for a in args],
                          [str(a.dtype).replace("ember.", "") if isinstance(a, ember.Tensor) else "Scalar" for a in args],
                          0 if op.view else sum(o.numel() * o.element_size() for o in outs
                                                if isinstance(o, ember.Tensor))))

    def node(self, *args):
        pass

    def copy(self, *args):
        pass

    def span(self, *args):
        pass


def test_every_recording_path_gives_the_live_shapes_dtypes_and_allocations():
    """Each path of Recorder.op: the elementwise fast path (tensor-tensor broadcasting, scalar first, scalar
    second, comparison, unary), ops with attributes and one, two or three inputs, Python scalars beside
    attributes, several outputs, four inputs; and autograd nodes with one and two gradients."""
    a = ember.randn(4, 1, 3, requires_grad=True)
    b, c = ember.randn(5, 1), ember.randn(3, dtype=ember.float64)
    live = _Live()
    _recorder.attach(live)
    try:
        with profile(record_shapes=True, profile_memory=True) as prof:
            y = a * b  # broadcast to (4, 5, 3)
            2 - b
            b / 3
            b >= 0.5
            y.tanh()
            y.sum(dim=1)
            ember.matmul(b, ember.randn(1, 6))
            ember.addmm(ember.randn(6), ember.randn(2, 3), ember.randn(3, 6))
            ember.clamp(b, 0.1, 0.2)
            ember.max(b, dim=0)
            ember.cat([b, b, b, b])
            c.double() + 1
            F.cross_entropy(ember.randn(4, 3, requires_grad=True), ember.tensor([0, 1, 2, 0])).backward()
            y.sum().backward()
    finally:
        _recorder.detach(live)
    recorded = [(e.name, e.input_shapes, e.input_dtypes, e.cpu_memory_usage) for e in prof.events()
                if e.category == "cpu_op"]
    assert recorded == live.seen
    assert ("mul", [[4, 1, 3], [5, 1]], ["float32", "float32"], 4 * 5 * 3 * 4) in recorded
    nodes = [e for e in prof.events() if e.category == "autograd"]
    assert any(e.input_shapes == [[4, 5, 3]] for e in nodes)
