"""Run under mpiexec -n 2: a define-then-run graph placed on two ranks (TF1 distributed execution).

The lectures' two-layer net (x, w1 on rank 0; y, w2, loss on rank 1) trained with symbolic
gradients + assign must match NumPy by hand and the same graph run in one process; the partition
must hold exactly the expected send/recv pairs; a fetch of rank-0 nodes must move nothing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
import ember.graph as G  # noqa: E402
import graph_lecture as L  # noqa: E402
from ember.graph.partition import COMM_STATS, RECV, SEND  # noqa: E402

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
assert size == 2, "this worker places the model on two ranks"
STEPS = 4


def delta(before):
    return {k: COMM_STATS[k] - before[k] for k in ("send", "recv", "broadcast", "plan_check")}


# ---- 1. the lecture's network, placed on two ranks -------------------------------------------------------
m = L.build(placed=True)
sess = G.Session()
part = sess.partition([m["loss"], m["train"]])
# Forward: h goes 0 -> 1; backward: dL/dh goes 1 -> 0. Nothing else crosses (gradients are colocated,
# the updates run on their Variables' ranks, the group's edge from rank 1 is a control edge).
assert [(t.src, t.dst) for t in part.transfers] == [(0, 1), (1, 0)], part.explain()
assert [t.value.shape for t in part.transfers] == [(L.N, L.H), (L.N, L.H)]
mine = part.graphs[rank]
assert [(n.attrs["dst"], n.attrs["tag"]) for n in part.sends(rank)] == [(1 - rank, part.transfers[rank].tag)]
assert [(n.attrs["src"], n.attrs["tag"]) for n in part.recvs(rank)] == [(1 - rank, part.transfers[1 - rank].tag)]
assert {n.op.name for n in mine.nodes} >= {"send", "recv", "assign"}

# Each rank may feed only its own placeholders.
feeds = {m["x"]: m["feeds"][m["x"]]} if rank == 0 else {m["y"]: m["feeds"][m["y"]]}
losses = []
for step in range(STEPS):
    before = dict(COMM_STATS)
    loss, nothing = sess.run([m["loss"], m["train"]], feeds)
    losses.append(loss)
    moved = delta(before)
    # one send + one recv per rank per step; the loss is broadcast from rank 1
    assert moved["send"] == 1 and moved["recv"] == 1 and moved["broadcast"] == 1, moved
    assert nothing is None
w1, w2 = sess.run([m["w1"], m["w2"]])

# Variables live where they were placed: only the owner's buffer moved.
init_w1, init_w2 = L.data()[2:]
store_w1, store_w2 = m["w1"]._data.tensor._data, m["w2"]._data.tensor._data
np.testing.assert_array_equal(store_w1, w1 if rank == 0 else init_w1)
np.testing.assert_array_equal(store_w2, w2 if rank == 1 else init_w2)

# NumPy by hand, float64
ref_losses, ref_w1, ref_w2 = L.numpy_steps(STEPS)
np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)
np.testing.assert_allclose(w1, ref_w1, rtol=1e-12, atol=1e-14)
np.testing.assert_allclose(w2, ref_w2, rtol=1e-12, atol=1e-14)

# ---- 2. a fetch that needs only rank-0 nodes -------------------------------------------------------------
owner_only = G.Session(broadcast_fetches=False)
before = dict(COMM_STATS)
h = owner_only.run(m["h"], feeds)
first = delta(before)
before = dict(COMM_STATS)
h_again = owner_only.run(m["h"], feeds)
second = delta(before)
assert first == {"send": 0, "recv": 0, "broadcast": 0, "plan_check": 1}, first  # the one-time plan check
assert second == {"send": 0, "recv": 0, "broadcast": 0, "plan_check": 0}, second
x_np = L.data()[0]
if rank == 0:
    np.testing.assert_allclose(h, np.maximum(x_np @ w1, 0), rtol=1e-13)
else:
    assert h is None and h_again is None
# The default session returns it on both ranks: one broadcast, still no send/recv.
before = dict(COMM_STATS)
h_everywhere = sess.run(m["h"], feeds)
assert delta(before)["send"] == 0 and delta(before)["recv"] == 0
np.testing.assert_allclose(h_everywhere, np.maximum(x_np @ w1, 0), rtol=1e-13)

# ---- 3. the same graph without placement runs whole on each process: same weights -----------------------
local = L.build(placed=False)
local_sess = G.Session()
local_losses = []
for _ in range(STEPS):
    before = dict(COMM_STATS)
    local_losses.append(local_sess.run([local["loss"], local["train"]], local["feeds"])[0])
    assert delta(before) == {"send": 0, "recv": 0, "broadcast": 0, "plan_check": 0}
lw1, lw2 = local_sess.run([local["w1"], local["w2"]])
np.testing.assert_allclose(losses, local_losses, rtol=1e-13)
np.testing.assert_allclose(w1, lw1, rtol=1e-13, atol=1e-15)
np.testing.assert_allclose(w2, lw2, rtol=1e-13, atol=1e-15)

# ---- 4. crossing edges both ways inside one fusable chain: no deadlock, fused or not -------------------
for fuse in (True, False):
    G.reset_default_graph()
    with G.device("rank:0"):
        a_in = G.placeholder((3,), ember.float64, name="a_in")
        a = a_in * 2.0
    with G.device("rank:1"):
        b_in = G.placeholder((3,), ember.float64, name="b_in")
        b = b_in + 1.0
    with G.device("rank:0"):
        c0 = (a * b).exp()  # would fuse with `a`, but needs b from rank 1
    with G.device("rank:1"):
        c1 = (b - a).tanh()  # needs a from rank 0
    crossed = G.Session(fuse=fuse)
    av, bv = np.array([0.1, 0.2, 0.3]), np.array([-1.0, 0.5, 2.0])
    got0, got1 = crossed.run([c0, c1], {a_in: av, b_in: bv})
    np.testing.assert_allclose(got0, np.exp(av * 2 * (bv + 1)), rtol=1e-14)
    np.testing.assert_allclose(got1, np.tanh(bv + 1 - av * 2), rtol=1e-14)
    p = crossed.partition([c0, c1])
    assert len(p.transfers) == 2
    (recv,) = p.recvs(rank)
    (send,) = p.sends(rank)
    # the recv waits for this rank's send (an edge), so no schedule can block before sending
    assert send.outputs[0] in recv.inputs

# ---- 5. errors: a rank beyond the job names the node ----------------------------------------------------
G.reset_default_graph()
with G.device("rank:3"):
    z = G.placeholder((2,), ember.float64, name="z")
    far = z * 3
try:
    G.Session().run(far, {z: np.ones(2)})
except ValueError as error:
    assert "rank:3" in str(error) and "2 process(es)" in str(error), error
else:
    raise AssertionError("placing a node on rank 3 of a 2-process job must fail")

dist.barrier()
print(f"rank {rank}: graph distributed ok", flush=True)
dist.destroy_process_group()
