"""Run under mpiexec -n 2: collective edge cases checked against NumPy (bool reductions with torch's
semantics, int8/uint8 wrap-around, 0-d and zero-size tensors, non-contiguous outputs, async works waited
out of order, two async ops on one tensor, a > 64 MB isend/irecv ring)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
ranks = range(size)


def reduced(make, op):
    t = make(rank)
    dist.all_reduce(t, op=op)
    return t.numpy()


# 1. bool tensors: MAX/BOR/SUM are logical or, MIN/BAND/PRODUCT logical and (torch's gloo results)
flags = lambda r: np.array([r == 0, False, True, r % 2 == 1])  # noqa: E731
anyof = np.logical_or.reduce([flags(r) for r in ranks])
allof = np.logical_and.reduce([flags(r) for r in ranks])
for op, want in [(ReduceOp.MAX, anyof), (ReduceOp.BOR, anyof), (ReduceOp.SUM, anyof), (ReduceOp.MIN, allof),
                 (ReduceOp.BAND, allof), (ReduceOp.PRODUCT, allof)]:
    got = reduced(lambda r: ember.tensor(flags(r)), op)
    assert got.dtype == np.bool_ and (got == want).all(), (op, got, want)
got = reduced(lambda r: ember.tensor(flags(r))[::2], ReduceOp.MAX)  # a non-contiguous bool view
assert (got == anyof[::2]).all(), got
out = ember.zeros(2, dtype=ember.bool)
dist.reduce_scatter_tensor(out, ember.tensor(np.concatenate([flags(rank)] * (size // 2 or 1))[:2 * size]),
                           op=ReduceOp.MAX)
assert out.dtype is ember.bool

# 2. int8 / uint8 sums wrap around like NumPy's (and torch's)
i8 = lambda r: np.array([100, -100, 5 + r], np.int8)  # noqa: E731
np.testing.assert_array_equal(reduced(lambda r: ember.tensor(i8(r)), ReduceOp.SUM),
                              np.sum([i8(r) for r in ranks], axis=0, dtype=np.int8))
u8 = lambda r: np.array([200, 1, 250 - r], np.uint8)  # noqa: E731
np.testing.assert_array_equal(reduced(lambda r: ember.tensor(u8(r)), ReduceOp.SUM),
                              np.sum([u8(r) for r in ranks], axis=0, dtype=np.uint8))
np.testing.assert_array_equal(reduced(lambda r: ember.tensor(u8(r)), ReduceOp.MAX), np.max([u8(r) for r in ranks], 0))

# 3. 0-d and zero-size tensors, including 16-bit floats that travel as bytes
assert float(reduced(lambda r: ember.tensor(3.0 + r), ReduceOp.SUM)) == sum(3.0 + r for r in ranks)
assert reduced(lambda r: ember.tensor(1.5 + r, dtype=ember.bfloat16), ReduceOp.MAX).shape == ()
for dtype in (ember.float16, ember.bfloat16, ember.float32):
    t = ember.tensor(2.5 if rank == 0 else -1.0, dtype=dtype)
    dist.broadcast(t, src=0)
    assert t.shape == () and float(t) == 2.5 and t.dtype is dtype
    outs = [ember.tensor(0.0, dtype=dtype) for _ in ranks]
    dist.all_gather(outs, ember.tensor(float(rank), dtype=dtype))
    assert [float(o) for o in outs] == [float(r) for r in ranks]
empty = ember.zeros(0, 3)
dist.all_reduce(empty)
assert tuple(empty.shape) == (0, 3)
empty16 = ember.zeros(0, 3, dtype=ember.bfloat16)
dist.broadcast(empty16, src=0)
outs = [ember.zeros(0, 2) for _ in ranks]
dist.all_gather(outs, ember.zeros(0, 2))
stacked = ember.zeros(size)
dist.all_gather_into_tensor(stacked, ember.tensor(float(rank)))
np.testing.assert_array_equal(stacked.numpy(), np.arange(size, dtype=np.float32))

# 4. non-contiguous results (transposes, column views) are written through to their base
base = ember.zeros(3, 4)
col = base[:, 1]
if rank == 0:
    col.copy_(ember.tensor([1.0, 2.0, 3.0]))
dist.broadcast(col, src=0)
np.testing.assert_array_equal(base.numpy()[:, 1], [1, 2, 3])
assert not base.numpy()[:, [0, 2, 3]].any()
outs = [ember.zeros(3, 2).t() for _ in ranks]
dist.all_gather(outs, ember.arange(6.0).reshape(2, 3) + rank)
for r, o in enumerate(outs):
    np.testing.assert_array_equal(o.numpy(), np.arange(6.0).reshape(2, 3) + r)
if size >= 2:
    if rank == 0:
        dist.send(ember.arange(6.0).reshape(2, 3), dst=1)
    elif rank == 1:
        holder = ember.zeros(3, 2)
        assert dist.recv(holder.t(), src=0) == 0
        np.testing.assert_array_equal(holder.numpy(), np.arange(6.0).reshape(2, 3).T)

# 5. async works waited out of order complete with the right values
a, b = ember.ones(3) * (rank + 1), ember.ones(2) * (rank + 5)
wa = dist.all_reduce(a, async_op=True)
wb = dist.all_reduce(b, async_op=True)
wb.wait()
wa.wait()
np.testing.assert_array_equal(a.numpy(), [sum(r + 1 for r in ranks)] * 3)
np.testing.assert_array_equal(b.numpy(), [sum(r + 5 for r in ranks)] * 2)

# 6. a tensor written by an unfinished async op cannot join another op (MPI would race on it) ...
t = ember.ones(4) * (rank + 1)
w = dist.all_reduce(t, async_op=True)
for second in (lambda: dist.all_reduce(t, async_op=True), lambda: dist.broadcast(t[1:], src=0)):
    try:
        second()
    except RuntimeError as error:
        assert "wait()" in str(error) and "all_reduce" in str(error), error
    else:
        raise AssertionError("a second op on a tensor an async all_reduce writes must be refused")
w.wait()
dist.all_reduce(t)  # ... and is fine once waited
np.testing.assert_array_equal(t.numpy(), [size * sum(r + 1 for r in ranks)] * 4)
# ... while reading one tensor in several async ops (one send to each peer) is allowed, as are disjoint halves
flat = ember.arange(8.0) + rank
halves = [dist.all_reduce(flat[:4], async_op=True), dist.all_reduce(flat[4:], async_op=True)]
for h in halves:
    h.wait()
np.testing.assert_array_equal(flat.numpy(), size * np.arange(8.0) + sum(ranks))
if size >= 2:
    payload = ember.full((5,), float(rank))
    sends = [dist.isend(payload, dst=r) for r in ranks if r != rank]
    got = {r: ember.zeros(5) for r in ranks if r != rank}
    recvs = [dist.irecv(got[r], src=r) for r in got]
    for work in recvs + sends:
        work.wait()
    assert all(float(v[0]) == r for r, v in got.items())

# 7. a > 64 MB message around a ring with isend/irecv (MPI's rendezvous protocol) does not deadlock
n = 17 * 2**20  # 68 MB of float32
send_buf = ember.full((n,), float(rank + 1))
recv_buf = ember.zeros(n)
right, left = (rank + 1) % size, (rank - 1) % size
works = [dist.irecv(recv_buf, src=left), dist.isend(send_buf, dst=right)]
for work in reversed(works):
    work.wait()
assert float(recv_buf[0]) == left + 1 and float(recv_buf[-1]) == left + 1

dist.destroy_process_group()
print(f"rank {rank}: qa collectives ok")
