"""Define-then-run graphs placed on several processes (TF1 "distributed execution").

In-process: placement scopes and colocation rules, the partition pass (a pure graph transformation:
per-rank subgraphs, send/recv pairs, tags, shapes), its numerics with a thread-per-rank stand-in for
MPI, single-process errors, printing and saving. Under ``mpiexec -n 2``
(tests/distributed/worker_graph_train.py): the real thing, against NumPy and the one-process graph.
"""
from __future__ import annotations

import queue
import sys
import threading

import numpy as np
import pytest

import ember
import ember.distributed
import ember.graph as G
from ember.graph.executor import Executable
from ember.graph.partition import RECV, SEND, TAG_BASE, partition
from ember.graph.placement import parse_device

from mpi_support import WORKERS, needs_mpi, run_on_ranks  # noqa: E402

sys.path.insert(0, str(WORKERS))
import graph_lecture as L  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_graph():
    G.reset_default_graph()
    yield
    G.reset_default_graph()


def _graph():
    return G.get_default_graph()


# ---- placement ----------------------------------------------------------------------------------------------
def test_device_spellings():
    specs = ("rank:1", "cpu", "cpu:0", "/cpu:2", "RANK:3", 4, None)
    assert [parse_device(s) for s in specs] == [1, 0, 0, 2, 3, 4, None]
    for bad in ("gpu:0", "/job:worker/task:1", "rank:x", -1):
        with pytest.raises(ValueError, match="rank:N" if bad != -1 else "ranks are >= 0"):
            parse_device(bad)


def test_scopes_nest_and_mark_values():
    with G.device("rank:1"):
        x = G.placeholder((2,), ember.float64)
        with G.device("cpu:0"):
            w = G.Variable(np.ones(2))
            a = x * w
        b = a + 1
        with G.device(None):
            c = b * 2
    d = c - 1
    assert [t._data.rank for t in (x, w, a, b, c, d)] == [1, 0, 0, 1, None, None]
    assert "@rank:1" in str(_graph()) and "@rank:0" in str(_graph())


def test_gradients_are_colocated_with_their_forward_ops():
    m = L.build(placed=True)
    assert m["gw1"]._data.rank == 0 and m["gw2"]._data.rank == 1
    # every node gradients() added sits on the rank of some forward node: here, forward nodes are
    # on ranks 0/1 only and the backward of relu (rank 0) produced relu_grad on rank 0
    nodes = _graph().nodes
    assert {n.outputs[0].rank for n in nodes if n.op.name == "relu_grad"} == {0}
    # a scope around gradients() does not move them (colocate_gradients_with_ops)
    with G.device("rank:5"):
        (again,) = G.gradients(m["loss"], [m["w1"]])
    assert again._data.rank == 0


def test_assign_runs_where_its_variable_lives():
    with G.device("rank:1"):
        w = G.Variable(np.zeros(3))
    with G.device("rank:0"):
        v = G.placeholder((3,), ember.float64)
        set_w = G.assign(w, v)
        inc_w = G.assign_add(w, v)
    assert set_w._data.rank == 1 and inc_w._data.rank == 1
    assert inc_w._data.node.inputs[1].rank == 1  # the addition too (TF's AssignAdd is one op on w's device)
    p = partition(_graph(), [set_w._data, inc_w._data], world_size=2)
    assert [(t.src, t.dst, t.value.kind) for t in p.transfers] == [(0, 1, "input")]  # v, once


# ---- the partition pass ----------------------------------------------------------------------------------
def test_lecture_net_partition_has_one_pair_each_way():
    m = L.build(placed=True)
    p = partition(_graph(), [m["loss"]._data, m["train"]._data], world_size=2)
    h = m["h"]._data
    assert [(t.src, t.dst) for t in p.transfers] == [(0, 1), (1, 0)]
    assert p.transfers[0].value is h
    assert [t.tag for t in p.transfers] == [TAG_BASE, TAG_BASE + 1]
    for r, g in enumerate(p.graphs):
        g.validate()
        assert all(o.rank == r for n in g.nodes for o in n.outputs)  # a rank's subgraph holds only its nodes
        (send,), (recv,) = p.sends(r), p.recvs(r)
        assert send.attrs["dst"] == 1 - r and recv.attrs["src"] == 1 - r
        assert recv.attrs["shape"] == (L.N, L.H) and recv.attrs["dtype"] is ember.float64
        assert recv.outputs[0].shape == (L.N, L.H)
        assert [n.inputs[0].name for n in g.nodes if n.op.name == "assign"] == [f"w{r + 1}"]
    assert {s.name for s in p.graphs[0].states} == {"w1"} and {s.name for s in p.graphs[1].states} == {"w2"}
    assert [v.name for v in p.graphs[0].inputs] == ["x"] and [v.name for v in p.graphs[1].inputs] == ["y"]
    # rank 0 sends h (relu's output), rank 1 sends dL/dh (a matmul colocated with h @ w2)
    assert p.sends(0)[0].inputs[0].node.op.name == "relu"
    assert p.sends(1)[0].inputs[0].node.op.name == "matmul"
    # the group (rank 0) keeps only its local input; rank 1's assign is a root there (control edge)
    (group,) = [n for n in p.graphs[0].nodes if n.op.name == "group"]
    assert [i.node.op.name for i in group.inputs] == ["assign"]
    assert any(v.node is not None and v.node.op.name == "assign" for v in p.graphs[1].outputs)
    text = p.explain()
    assert "send(" in text and "recv(" in text and "send x1" in p.graphs[0].summary()


def test_one_transfer_per_value_and_consumer_rank():
    with G.device("rank:0"):
        x = G.placeholder((4,), ember.float64)
        h = x.exp()
    with G.device("rank:1"):
        a, b = h * 2, h + 1  # two readers on rank 1: one transfer
        y1 = a + b + h
    with G.device("rank:2"):
        y2 = h.sum()  # a reader on rank 2: its own transfer
    p = partition(_graph(), [y1._data, y2._data], world_size=3)
    assert [(t.src, t.dst) for t in p.transfers] == [(0, 1), (0, 2)]
    assert len(p.sends(0)) == 2 and len(p.recvs(1)) == 1 and len(p.recvs(2)) == 1
    assert len({t.tag for t in p.transfers}) == 2


def test_rank0_only_fetch_has_no_transfers():
    m = L.build(placed=True)
    p = partition(_graph(), [m["h"]._data], world_size=2)
    assert p.transfers == [] and p.graphs[1].nodes == [] and p.graphs[1].outputs == []
    assert p.owners[m["h"]._data.id] == 0


def test_constants_are_replicated_and_unplaced_nodes_go_to_default_rank():
    with G.device("rank:1"):
        x = G.placeholder((3,), ember.float64)
    c = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    y = (x * c).sum()  # unplaced: default rank
    z = x * c
    p = partition(_graph(), [y._data], world_size=2)
    assert [(t.src, t.dst, t.value.kind) for t in p.transfers] == [(1, 0, "input")]  # the const is not sent
    assert p.graphs[0].consts and not p.graphs[1].consts
    p1 = partition(_graph(), [y._data, z._data], world_size=2, default_rank=1)
    assert p1.transfers == [] and p1.graphs[0].nodes == []


def test_unplaced_update_math_lands_on_the_default_rank():
    # TF1's rule: an op with no device goes to the default device - here `LR * g2` (rank 0) costs
    # two more transfers than placing it with w2 (what graph_lecture.build does).
    with G.device("rank:1"):
        w2 = G.Variable(np.ones((2, 2)), name="w2")
        loss = (w2 * w2).sum()
    (g2,) = G.gradients(loss, [w2])
    step = G.assign_sub(w2, 0.1 * g2)
    p = partition(_graph(), [step._data], world_size=2)
    assert [(t.src, t.dst) for t in p.transfers] == [(1, 0), (0, 1)]


def test_placement_beyond_the_job_names_the_node():
    with G.device("rank:2"):
        x = G.placeholder((2,), ember.float64)
        y = x * 3
    with pytest.raises(ValueError, match=r"mul.*rank:2.*2 process\(es\)"):
        partition(_graph(), [y._data], world_size=2)


def _run_ranks_in_threads(p, feeds_by_name, steps):
    """Each rank's subgraph in its own thread; send/recv go through queues instead of MPI."""
    boxes: dict = {}
    lock = threading.Lock()

    def box(tag):
        with lock:
            return boxes.setdefault(tag, queue.Queue())

    class Done:
        def wait(self):
            return True

    def isend(tensor, dst, tag=0):
        box(tag).put(np.array(tensor._data))
        return Done()

    def recv(tensor, src, tag=0):
        tensor._data[...] = box(tag).get(timeout=20)

    results = [[] for _ in p.graphs]
    errors = []

    def worker(r):
        try:
            g = p.graphs[r]
            exe = Executable(g, g.outputs, include_updates=False, fuse=True)
            for _ in range(steps):
                results[r].append(exe.run([feeds_by_name[v.name] for v in g.inputs]))
        except Exception as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    patch = pytest.MonkeyPatch()
    patch.setattr(ember.distributed, "isend", isend)
    patch.setattr(ember.distributed, "recv", recv)
    try:
        threads = [threading.Thread(target=worker, args=(r,)) for r in range(len(p.graphs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        patch.undo()
    assert not errors, errors
    return results


def test_partitioned_training_matches_numpy_without_mpi():
    m = L.build(placed=True)
    p = partition(_graph(), [m["loss"]._data, m["train"]._data], world_size=2)
    xv, yv = m["feeds"][m["x"]], m["feeds"][m["y"]]
    results = _run_ranks_in_threads(p, {"x": xv, "y": yv}, steps=3)
    loss_slot = [k for k, v in enumerate(p.graphs[1].outputs) if v.node is not None and v.node.op.name == "sum"][0]
    losses = [step[loss_slot] for step in results[1]]
    ref_losses, ref_w1, ref_w2 = L.numpy_steps(3)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)
    # the Variables' own buffers hold the trained weights (state lives where placed)
    np.testing.assert_allclose(m["w1"]._data.tensor._data, ref_w1, rtol=1e-12)
    np.testing.assert_allclose(m["w2"]._data.tensor._data, ref_w2, rtol=1e-12)


# ---- one process -------------------------------------------------------------------------------------------
def test_single_process_refuses_other_ranks_with_the_fix():
    m = L.build(placed=True)
    sess = G.Session()
    with pytest.raises(RuntimeError, match=r"matmul.*rank:1.*not part of an ember.distributed job.*distributed.run"):
        sess.run(m["loss"], m["feeds"])
    with pytest.raises(RuntimeError, match=r"Variable %w2.*rank:1"):
        sess.run(m["w2"])
    # the rank-0 part runs as usual
    xv, _, w1v, _ = L.data()
    np.testing.assert_allclose(sess.run(m["h"], m["feeds"]), np.maximum(xv @ w1v, 0), rtol=1e-13)
    with pytest.raises(RuntimeError, match="distributed=True"):
        G.Session(distributed=True).run(m["h"], m["feeds"])


def test_unplaced_graph_runs_as_before():
    m = L.build(placed=False)
    sess = G.Session()
    losses = [sess.run([m["loss"], m["train"]], m["feeds"])[0] for _ in range(3)]
    ref_losses, ref_w1, ref_w2 = L.numpy_steps(3)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)
    np.testing.assert_allclose(sess.run(m["w1"]), ref_w1, rtol=1e-12)


def test_partitioned_subgraphs_save_and_load(tmp_path):
    pytest.importorskip("safetensors")
    m = L.build(placed=True)
    G.save(_graph(), str(tmp_path / "whole"))
    p = partition(_graph(), [m["loss"]._data, m["train"]._data], world_size=2)
    G.save(p.graphs[1], str(tmp_path / "rank1"))
    whole = G.load(str(tmp_path / "whole")).graph
    assert {v.name: v.rank for v in whole.inputs} == {"x": 0, "y": 1}
    assert {v.name: v.rank for v in whole.states} == {"w1": 0, "w2": 1}
    part = G.load(str(tmp_path / "rank1")).graph
    ops = [n.op for n in part.nodes]
    assert ops.count(SEND) == 1 and ops.count(RECV) == 1
    (recv,) = [n for n in part.nodes if n.op is RECV]
    assert recv.attrs == {"src": 0, "tag": TAG_BASE, "shape": (L.N, L.H), "dtype": ember.float64}


# ---- two processes -----------------------------------------------------------------------------------------
@needs_mpi
def test_two_ranks_train_the_lecture_net_like_one_process_and_numpy():
    out = run_on_ranks([WORKERS / "worker_graph_train.py"], n=2)
    assert "rank 0: graph distributed ok" in out and "rank 1: graph distributed ok" in out
