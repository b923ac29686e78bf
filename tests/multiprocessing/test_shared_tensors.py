"""Issue 17.2 (shared-memory half): Tensor.share_memory_/is_shared, Module.share_memory, ember.multiprocessing
queues, pools and spawn passing tensors through shared memory, and Hogwild training of one shared model."""
import gc
import multiprocessing
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp


def test_share_memory_moves_data_once_and_keeps_values():
    t = ember.arange(6.0).reshape(2, 3)
    assert not t.is_shared()
    before = t.numpy().copy()
    assert t.share_memory_() is t and t.is_shared()
    np.testing.assert_array_equal(t.numpy(), before)
    address = t.data_ptr()
    t.share_memory_()
    assert t.data_ptr() == address  # already shared: nothing moves


def test_module_share_memory_shares_parameters_and_buffers():
    model = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.BatchNorm1d(2))
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters()) and all(b.is_shared() for b in model.buffers())


def test_a_tensor_put_on_a_queue_arrives_backed_by_the_same_memory():
    q = mp.get_context("fork").SimpleQueue()
    t = ember.zeros(4)
    q.put(t)
    got = q.get()
    assert t.is_shared() and got.is_shared()  # moved into shared memory in place, as torch does
    got.add_(2)
    assert t.tolist() == [2.0] * 4
    view = ember.arange(10.0).share_memory_()[1:9:3]
    q.put(view)
    assert q.get().tolist() == [1.0, 4.0, 7.0]
    p = ember.nn.Parameter(ember.ones(2))
    q.put(p)
    back = q.get()
    assert type(back) is ember.nn.Parameter and back.requires_grad


def test_non_leaf_tensors_that_require_grad_are_refused_as_in_torch():
    q = mp.get_context("fork").SimpleQueue()
    x = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        q.put(x)
    q.put(x.detach())
    assert q.get().tolist() == [2.0, 2.0]


def test_the_reducers_are_registered_for_multiprocessing_only():
    import copyreg
    from multiprocessing.reduction import ForkingPickler

    from ember.multiprocessing.reductions import reduce_tensor

    assert ForkingPickler._extra_reducers[ember.Tensor] is reduce_tensor
    assert ForkingPickler._extra_reducers[ember.nn.Parameter] is reduce_tensor
    assert ember.Tensor not in copyreg.dispatch_table  # plain pickle keeps what ember.tensor defines
    t = ember.arange(3.0)
    try:
        back = pickle.loads(pickle.dumps(t))  # by value (ember.serialization.pickling), where available
    except TypeError:
        back = None
    assert not t.is_shared() and (back is None or (back.tolist() == [0.0, 1.0, 2.0] and not back.is_shared()))
    shared = ForkingPickler.loads(ForkingPickler.dumps(t))
    assert t.is_shared() and shared.is_shared() and shared.data_ptr() == t.data_ptr()


def _child_adds(q, t, amount):
    t.add_(amount)
    q.put(os.getpid())


def test_a_spawned_process_writes_into_the_parents_tensor():
    context = mp.get_context("spawn")
    t = ember.zeros(3)
    q = context.SimpleQueue()
    process = context.Process(target=_child_adds, args=(q, t, 5.0))
    process.start()
    pid = q.get()
    process.join(60)
    assert process.exitcode == 0 and pid != os.getpid()
    assert t.tolist() == [5.0, 5.0, 5.0]


def _square(t):
    return t * t


def test_pool_map_returns_tensors():
    with mp.get_context("fork").Pool(2) as pool:
        out = pool.map(_square, [ember.full((3,), float(i)) for i in range(4)])
    assert [o.tolist() for o in out] == [[float(i * i)] * 3 for i in range(4)]


def _hogwild(rank, model, steps, x, y):
    ember.manual_seed(rank)
    opt = ember.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        ember.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_hogwild_children_train_one_shared_model():
    ember.manual_seed(0)
    x = ember.randn(64, 4)
    w_true = ember.tensor([[1.0, -2.0, 0.5, 3.0]])
    y = x @ w_true.t()
    model = ember.nn.Linear(4, 1)
    model.share_memory()
    start = ember.nn.functional.mse_loss(model(x), y).item()
    mp.spawn(_hogwild, args=(model, 60, x, y), nprocs=2, start_method="fork")
    end = ember.nn.functional.mse_loss(model(x), y).item()
    assert end < start / 20, (start, end)  # the parent's weights moved: the children trained them in place
    np.testing.assert_allclose(model.weight.detach().numpy(), w_true.numpy(), atol=0.3)


def _raises(rank):
    if rank == 1:
        raise ValueError("rank 1 is broken")
    time.sleep(30)


def _dies(rank):
    if rank == 0:
        os._exit(7)
    time.sleep(30)


def test_spawn_reports_a_failing_process_and_stops_the_others():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="(?s)Process 1 terminated with the following error.*"
                                                         "ValueError: rank 1 is broken"):
        mp.spawn(_raises, nprocs=2, start_method="fork")
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 7") as info:
        mp.spawn(_dies, nprocs=2, start_method="fork")
    assert info.value.exit_code == 7
    assert time.monotonic() - start < 20
    assert multiprocessing.active_children() == []


def test_spawn_join_false_returns_a_context():
    job = mp.spawn(_child_noop, nprocs=2, join=False, start_method="fork")
    assert len(job.pids()) == 2
    while not job.join(timeout=10):
        pass


def _child_noop(rank):
    return None


def test_sharing_strategies():
    assert mp.get_all_sharing_strategies() == {"file_descriptor"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError, match="file_descriptor"):
        mp.set_sharing_strategy("file_system")


def test_shared_storage_leaves_nothing_in_dev_shm():
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    before = set(os.listdir(shm))
    tensors = [ember.ones(1000).share_memory_() for _ in range(5)]
    assert set(os.listdir(shm)) == before  # anonymous memory files: no names at all
    fds_before = len(os.listdir("/proc/self/fd"))
    del tensors
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= fds_before - 5  # the descriptors close with the tensors


def _echo(q_in, q_out):
    t = q_in.get()
    t.mul_(3)
    q_out.put((t, t[1:]))  # a tensor and a view of it, sent back to the parent
    q_in.get()  # the sender must live until the receiver has the tensors (descriptors pass through it), as in torch


def test_queue_round_trip_through_a_child_keeps_views_on_one_mapping():
    q_in, q_out = mp.Queue(), mp.Queue()
    child = mp.Process(target=_echo, args=(q_in, q_out))
    child.start()
    t = ember.ones(4)
    q_in.put(t)
    whole, view = q_out.get(timeout=60)
    q_in.put(None)
    child.join(60)
    assert child.exitcode == 0
    assert t.tolist() == [3.0] * 4  # the child wrote into the parent's memory
    whole.add_(1)
    assert view.tolist() == [4.0] * 3 and t.tolist() == [4.0] * 4  # one memory, mapped once per process
