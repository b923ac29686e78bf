"""Run under mpiexec -n 2 (or more): every collective against values computed with NumPy."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import sys

import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"


def per_rank(r, shape=(2, 3), dtype=np.float64):
    return (np.arange(np.prod(shape)).reshape(shape) + 10 * r + 1).astype(dtype)


everyone = np.stack([per_rank(r) for r in range(size)])

# all_reduce with every op, blocking and async
for op, ref in [(ReduceOp.SUM, everyone.sum(0)), (ReduceOp.MAX, everyone.max(0)), (ReduceOp.MIN, everyone.min(0)),
                (ReduceOp.PRODUCT, everyone.prod(0)), (ReduceOp.AVG, everyone.mean(0))]:
    t = ember.tensor(per_rank(rank))
    dist.all_reduce(t, op=op)
    np.testing.assert_allclose(t.numpy(), ref, err_msg=op.name)
    t = ember.tensor(per_rank(rank))
    work = dist.all_reduce(t, op=op, async_op=True)
    assert isinstance(work, dist.Work)
    work.wait()
    assert work.is_completed()
    np.testing.assert_allclose(t.numpy(), ref, err_msg=f"async {op.name}")

# integer bitwise ops and int sums
ints = np.stack([np.array([1, 2, 4, 7]) << r for r in range(size)])
t = ember.tensor(ints[rank])
dist.all_reduce(t, op=ReduceOp.BOR)
np.testing.assert_array_equal(t.numpy(), np.bitwise_or.reduce(ints, 0))
t = ember.tensor(ints[rank])
dist.all_reduce(t)
np.testing.assert_array_equal(t.numpy(), ints.sum(0))
assert t.dtype == ember.int64

# 16-bit floats reduce in float32 and keep their dtype
for dt in (ember.float16, ember.bfloat16):
    t = ember.tensor(per_rank(rank)).to(dt)
    dist.all_reduce(t)
    assert t.dtype == dt
    np.testing.assert_allclose(t.float().numpy(), everyone.sum(0), rtol=1e-2)

# a non-contiguous view is reduced in place through its base
base = ember.tensor(per_rank(rank, (3, 2)))
view = base.t()
dist.all_reduce(view)
np.testing.assert_allclose(base.numpy(), np.stack([per_rank(r, (3, 2)) for r in range(size)]).sum(0))

# broadcast from the last rank
t = ember.tensor(per_rank(rank))
dist.broadcast(t, src=size - 1)
np.testing.assert_array_equal(t.numpy(), per_rank(size - 1))

# all_gather / all_gather_into_tensor (stacked and concatenated)
outs = [ember.zeros(2, 3, dtype=ember.float64) for _ in range(size)]
dist.all_gather(outs, ember.tensor(per_rank(rank)))
for r in range(size):
    np.testing.assert_array_equal(outs[r].numpy(), per_rank(r))
stacked = ember.zeros(size, 2, 3, dtype=ember.float64)
dist.all_gather_into_tensor(stacked, ember.tensor(per_rank(rank)))
np.testing.assert_array_equal(stacked.numpy(), everyone)
flat = ember.zeros(size * 2, 3, dtype=ember.float64)
dist.all_gather_into_tensor(flat, ember.tensor(per_rank(rank)))
np.testing.assert_array_equal(flat.numpy(), everyone.reshape(size * 2, 3))

# reduce to rank 0; others keep their input
t = ember.tensor(per_rank(rank))
dist.reduce(t, dst=0, op=ReduceOp.MAX)
np.testing.assert_array_equal(t.numpy(), everyone.max(0) if rank == 0 else per_rank(rank))

# gather / scatter
gl = [ember.zeros(2, 3, dtype=ember.float64) for _ in range(size)] if rank == 0 else None
dist.gather(ember.tensor(per_rank(rank)), gl, dst=0)
if rank == 0:
    np.testing.assert_array_equal(np.stack([g.numpy() for g in gl]), everyone)
out = ember.zeros(2, 3, dtype=ember.float64)
dist.scatter(out, [ember.tensor(per_rank(r) * 2) for r in range(size)] if rank == 0 else None, src=0)
np.testing.assert_array_equal(out.numpy(), per_rank(rank) * 2)

# reduce_scatter and reduce_scatter_tensor
inputs = [ember.tensor(per_rank(rank) + j) for j in range(size)]
out = ember.zeros(2, 3, dtype=ember.float64)
dist.reduce_scatter(out, inputs)
np.testing.assert_allclose(out.numpy(), sum(per_rank(r) + rank for r in range(size)))
big = ember.tensor(np.concatenate([per_rank(rank) + j for j in range(size)]))
out = ember.zeros(2, 3, dtype=ember.float64)
dist.reduce_scatter_tensor(out, big, op=ReduceOp.AVG)
np.testing.assert_allclose(out.numpy(), np.mean([per_rank(r) + rank for r in range(size)], 0))

# all_to_all_single: block j of rank r goes to rank j
send = ember.tensor(np.array([100 * rank + j for j in range(size)], dtype=np.float32))
recv = ember.zeros(size)
dist.all_to_all_single(recv, send)
np.testing.assert_array_equal(recv.numpy(), [100 * j + rank for j in range(size)])

# point to point: a ring, blocking and non-blocking
nxt, prv = (rank + 1) % size, (rank - 1) % size
buf = ember.zeros(4, dtype=ember.float16)
req = dist.irecv(buf, src=prv, tag=3)
dist.isend(ember.full((4,), float(rank), dtype=ember.float16), dst=nxt, tag=3).wait()
req.wait()
np.testing.assert_array_equal(buf.numpy(), np.full(4, prv, np.float16))
if rank == 0:
    dist.send(ember.tensor([1.5, 2.5]), dst=1)
elif rank == 1:
    got = ember.zeros(2)
    sender = dist.recv(got)
    assert sender == 0
    np.testing.assert_array_equal(got.numpy(), [1.5, 2.5])

# objects
objs = [None] * size
dist.all_gather_object(objs, {"rank": rank})
assert objs == [{"rank": r} for r in range(size)]
lst = ["a", rank] if rank == 0 else [None, None]
dist.broadcast_object_list(lst, src=0)
assert lst == ["a", 0]

# a subgroup of the last rank only; src/dst are world ranks
sub = dist.new_group([size - 1])
if rank == size - 1:
    assert dist.get_world_size(sub) == 1 and dist.get_rank(sub) == 0
    t = ember.ones(2)
    dist.all_reduce(t, group=sub)
    np.testing.assert_array_equal(t.numpy(), [1, 1])
    dist.broadcast(t, src=size - 1, group=sub)
else:
    assert dist.get_rank(sub) == -1

# an all-reduce in place of a tensor saved for backward is caught like any in-place change
x = ember.ones(3, requires_grad=True)
y = x * 2
z = (y * y).sum()
dist.all_reduce(y)
try:
    z.backward()
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error) or "in-place" in str(error), error
else:
    raise AssertionError("backward through a tensor changed by all_reduce must fail")

# clear errors
def expect(exc, fragment, fn):
    try:
        fn()
    except exc as error:
        assert fragment in str(error), f"{fragment!r} not in {error}"
    else:
        raise AssertionError(f"expected {exc.__name__} with {fragment!r}")

expect(ValueError, "one tensor per rank", lambda: dist.all_gather([ember.zeros(1)] * (size + 1), ember.zeros(1)))
expect(RuntimeError, "needs a floating-point", lambda: dist.all_reduce(ember.arange(3), op=ReduceOp.AVG))
expect(ValueError, "not a member", lambda: dist.broadcast(ember.zeros(1), src=size + 5))
expect(RuntimeError, "already initialized", lambda: dist.init_process_group("mpi"))
expect(ValueError, "must hold", lambda: dist.reduce_scatter_tensor(ember.zeros(2), ember.zeros(2 * size + 1)))

dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
expect(ValueError, "backend 'nccl' is not available", lambda: dist.init_process_group("nccl"))
expect(RuntimeError, "has not been initialized", lambda: dist.all_reduce(ember.zeros(1)))
print(f"rank {rank}: collectives ok")
sys.exit(0)
