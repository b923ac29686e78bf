"""DataLoader worker processes (issue 17.3): order, seeding, get_worker_info, IterableDataset sharding against
torch's own DataLoader, errors and deaths, timeouts, persistent workers, start methods, shared-memory batches and
a clean shutdown (no processes or shared-memory blocks left behind)."""
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info
from ember.data.shared_batch import BLOCK_PREFIX


def _blocks():
    folder = Path("/dev/shm")
    mine = f"{BLOCK_PREFIX}{os.getpid()}_*"  # blocks of this process's workers (names start with our pid)
    return sorted(p.name for p in folder.glob(mine)) if folder.is_dir() else []


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Every test here must end with no worker process alive and no shared block of ours in /dev/shm."""
    before = _blocks()
    yield
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert multiprocessing.active_children() == []
    assert [b for b in _blocks() if b not in before] == []


class Probe(Dataset):
    """Each item says who built it: value, worker id, pid, worker seed and draws from the three RNGs."""

    def __init__(self, n, die_at=None, fail_at=None, sleep_at=None):
        self.n, self.die_at, self.fail_at, self.sleep_at = n, die_at, fail_at, sleep_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if i == self.fail_at:
            raise ValueError(f"item {i} is corrupt")
        if i == self.sleep_at:
            time.sleep(3)
        info = get_worker_info()
        return {"value": np.float64(i), "worker": -1 if info is None else info.id, "pid": os.getpid(),
                "seed": -1 if info is None else info.seed, "random": random.random(), "numpy": np.random.rand(),
                "ember": float(ember.rand(1)[0]), "big": np.full(5000, i, np.float64)}


def values(loader):
    return [b["value"].tolist() for b in loader]


def test_order_and_values_equal_num_workers_zero_with_shuffle():
    ds = Probe(50)
    runs = [values(DataLoader(ds, batch_size=4, shuffle=True, num_workers=w, generator=ember.Generator().manual_seed(3)))
            for w in (0, 1, 3)]
    assert runs[0] == runs[1] == runs[2]
    assert sorted(v for batch in runs[0] for v in batch) == list(map(float, range(50)))


def test_workers_are_processes_with_worker_info_and_torch_seeding():
    loader = DataLoader(Probe(24), batch_size=2, num_workers=3, generator=ember.Generator().manual_seed(5))
    batches = list(loader)
    workers = {int(w) for b in batches for w in b["worker"].tolist()}
    pids = {int(p) for b in batches for p in b["pid"].tolist()}
    assert workers == {0, 1, 2} and len(pids) == 3 and os.getpid() not in pids
    # batch i goes to worker i % 3, and each worker's seed is base_seed + worker_id
    for i, b in enumerate(batches):
        assert b["worker"].tolist() == [i % 3] * 2
    seeds = {int(b["worker"][0]): int(b["seed"][0]) for b in batches}
    assert seeds[1] - seeds[0] == 1 and seeds[2] - seeds[0] == 1 + 1
    # Python's random, NumPy's global RNG and ember's generator are seeded per worker: they differ between
    # workers, and the same loader seed gives the same draws again
    first = {k: [float(b[k][0]) for b in batches[:3]] for k in ("random", "numpy", "ember")}
    for draws in first.values():
        assert len(set(draws)) == 3
    again = list(DataLoader(Probe(24), batch_size=2, num_workers=3, generator=ember.Generator().manual_seed(5)))
    for k in ("random", "numpy", "ember"):
        assert [float(b[k][0]) for b in again[:3]] == first[k]
    other = list(DataLoader(Probe(24), batch_size=2, num_workers=3, generator=ember.Generator().manual_seed(6)))
    assert int(other[0]["seed"][0]) != seeds[0]


def test_worker_init_fn_runs_in_each_worker(tmp_path):
    def init(worker_id):
        (tmp_path / f"w{worker_id}-{os.getpid()}").write_text(str(get_worker_info().num_workers))

    list(DataLoader(Probe(8), batch_size=2, num_workers=2, worker_init_fn=init))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert [n.split("-")[0] for n in names] == ["w0", "w1"]
    assert all(int(n.split("-")[1]) != os.getpid() for n in names)
    assert {p.read_text() for p in tmp_path.iterdir()} == {"2"}


def _sharded_stream(lib_worker_info, base, n):
    """An IterableDataset class (for ember or torch) that shards range(n) by worker, as torch's docs show."""

    class Stream(base):
        def __iter__(self):
            info = lib_worker_info()
            if info is None:
                return iter(range(n))
            per = -(-n // info.num_workers)
            return iter(range(info.id * per, min(n, (info.id + 1) * per)))

    return Stream()


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers, batch_size, drop_last", [(2, 3, False), (3, 4, True), (3, None, False)])
def test_iterable_dataset_order_matches_torch(workers, batch_size, drop_last):
    torch_data = pytest.importorskip("torch.utils.data")
    ours = _sharded_stream(get_worker_info, IterableDataset, 23)
    theirs = _sharded_stream(torch_data.get_worker_info, torch_data.IterableDataset, 23)
    got = [np.asarray(b).tolist() for b in DataLoader(ours, batch_size=batch_size, num_workers=workers,
                                                      drop_last=drop_last)]
    want = [np.asarray(b).tolist() for b in torch_data.DataLoader(theirs, batch_size=batch_size, num_workers=workers,
                                                       drop_last=drop_last)]
    assert got == want


def test_iterable_dataset_without_sharding_is_replicated_per_worker_as_in_torch():
    class Plain(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    got = [np.asarray(b).tolist() for b in DataLoader(Plain(), batch_size=2, num_workers=2)]
    assert got == [[0, 1], [0, 1], [2, 3], [2, 3]]


def test_a_worker_exception_is_reraised_with_its_traceback_and_worker_id():
    with pytest.raises(ValueError) as info:
        for _ in DataLoader(Probe(20, fail_at=13), batch_size=4, num_workers=2):
            pass
    message = str(info.value)
    assert "Caught ValueError in DataLoader worker process 1" in message  # batch 3 (items 12-15) is worker 1's
    assert "Original Traceback (most recent call last)" in message and "item 13 is corrupt" in message
    assert "__getitem__" in message


def test_a_worker_that_dies_is_a_clear_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly.*SIGKILL"):
        for _ in DataLoader(Probe(20, die_at=9), batch_size=2, num_workers=2):
            pass
    assert time.monotonic() - start < 10


def test_timeout_names_the_batch_and_worker():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds waiting for batch 1 from worker 1"):
        for _ in DataLoader(Probe(8, sleep_at=2), batch_size=2, num_workers=2, timeout=0.5):
            pass
    assert time.monotonic() - start < 8  # not the 3 s the item sleeps plus a 5 s join: stopped at once


def test_persistent_workers_live_across_epochs_and_stop_with_the_loader():
    loader = DataLoader(Probe(12), batch_size=2, num_workers=2, persistent_workers=True)
    first = {int(p) for b in loader for p in b["pid"].tolist()}
    for i, _ in enumerate(loader):  # an epoch stopped early: its late batches must not leak into the next
        if i == 1:
            break
    third = list(loader)
    assert {int(p) for b in third for p in b["pid"].tolist()} == first
    assert [b["value"].tolist() for b in third] == [[2.0 * i, 2.0 * i + 1] for i in range(6)]
    assert len(multiprocessing.active_children()) == 2
    del loader


def test_break_and_errors_in_the_loop_body_stop_the_workers():
    for _ in range(2):
        for i, _batch in enumerate(DataLoader(Probe(100), batch_size=2, num_workers=3)):
            if i == 2:
                break
    with pytest.raises(KeyError):
        for _batch in DataLoader(Probe(50), batch_size=2, num_workers=2):
            raise KeyError("user error in the loop body")


def test_batches_arrive_in_shared_memory_not_through_the_pipe():
    import mmap

    ds = TensorDataset(ember.arange(40000.0).reshape(100, 400), ember.arange(100))
    batch = next(iter(DataLoader(ds, batch_size=50, num_workers=1)))
    data = batch[0].numpy()
    base = data
    while getattr(base, "base", None) is not None:
        base = base.base
    assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)  # mapped from the worker's block, not unpickled bytes
    np.testing.assert_array_equal(data, np.arange(20000.0).reshape(50, 400))
    assert batch[1].tolist() == list(range(50))  # small arrays ride inline


def test_start_methods_and_contexts():
    ds = TensorDataset(ember.arange(20.0), ember.arange(20))
    want = [b[0].tolist() for b in DataLoader(ds, batch_size=6)]
    spawn = multiprocessing.get_context("spawn")
    assert [b[0].tolist() for b in DataLoader(ds, batch_size=6, num_workers=2, multiprocessing_context=spawn)] == want
    assert [b[0].tolist() for b in DataLoader(ds, batch_size=6, num_workers=2, multiprocessing_context="fork")] == want
    with pytest.raises(ValueError, match="not a start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="teleport")
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    assert len(list(DataLoader(ds, batch_size=5, num_workers=1, pin_memory=True))) == 4  # no-op on CPU


class SlowFirst(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 0:
            time.sleep(1.0)
        return np.float64(i)


def test_in_order_false_yields_batches_as_they_arrive():
    got = [b.tolist() for b in DataLoader(SlowFirst(), batch_size=2, num_workers=2, in_order=False)]
    assert sorted(got) == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    assert got[0] != [0.0, 1.0]  # the slow first batch did not hold the others back
    ordered = [b.tolist() for b in DataLoader(SlowFirst(), batch_size=2, num_workers=2)]
    assert ordered == sorted(got)


class Counted(Dataset):
    """Counts fetches in memory shared with the (forked) workers."""

    def __init__(self, counter):
        self.counter = counter

    def __len__(self):
        return 400

    def __getitem__(self, i):
        with self.counter.get_lock():
            self.counter.value += 1
        return np.float64(i)


def test_prefetch_factor_bounds_the_batches_in_flight():
    counter = multiprocessing.get_context("fork").Value("i", 0)
    iterator = iter(DataLoader(Counted(counter), batch_size=1, num_workers=2, prefetch_factor=3,
                               multiprocessing_context="fork"))
    next(iterator)
    deadline = time.monotonic() + 10
    while counter.value < 1 + 2 * 3 and time.monotonic() < deadline:  # the workers run ahead...
        time.sleep(0.01)
    time.sleep(0.3)
    assert counter.value == 1 + 2 * 3  # ...exactly as far as prefetch_factor allows, and no further
    iterator.close()


def test_an_iterable_dataset_restarts_each_epoch_with_persistent_workers():
    stream = _sharded_stream(get_worker_info, IterableDataset, 10)
    loader = DataLoader(stream, batch_size=3, num_workers=2, persistent_workers=True)
    first = [np.asarray(b).tolist() for b in loader]
    second = [np.asarray(b).tolist() for b in loader]
    assert first == second == [[0, 1, 2], [5, 6, 7], [3, 4], [8, 9]]
    del loader
