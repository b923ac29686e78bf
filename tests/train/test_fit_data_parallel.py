"""ember.train.DataParallelStrategy: Keras-style fit/evaluate/predict across MPI processes.

The multi-process checks run tests/distributed/worker_fit_*.py (and examples/ddp_mnist.py, reduced)
under ``mpiexec -n 2`` and compare with a single-process ``Model`` on the equivalent global batches in
float64; they skip where mpi4py or mpiexec is missing. The rest runs in this process without MPI.
"""
import numpy as np
import pytest

import ember
from ember.data import DataLoader, DistributedSampler, TensorDataset
from ember.train import Callback, CSVLogger, Model, ModelCheckpoint, ProgbarLogger, TensorBoard, get_strategy
from ember.train.distributed import DataParallelStrategy, _ShardSampler
from ember.train.metrics import Accuracy, Mean, Metric

from mpi_support import ROOT, WORKERS, needs_mpi, run_on_ranks  # noqa: E402


@needs_mpi
def test_fit_evaluate_predict_match_one_process_on_the_global_batch():
    out = run_on_ranks([WORKERS / "worker_fit_exact.py"])
    assert "rank 0: fit exact ok" in out and "rank 1: fit exact ok" in out


@needs_mpi
def test_rank_zero_writes_and_every_rank_stops_together(tmp_path):
    out = run_on_ranks([WORKERS / "worker_fit_callbacks.py", tmp_path])
    assert "rank 0: fit callbacks ok" in out and "rank 1: fit callbacks ok" in out
    # fit(verbose=2) printed each epoch once (rank 0), while both ranks printed outside fit
    assert out.count("Epoch 1/2") == 1 and out.count("Epoch 2/2") == 1, out
    assert "rank 0: before fit" in out and "rank 1: before fit" in out


@needs_mpi
def test_ddp_mnist_example_reduced(tmp_path):
    out = run_on_ranks([ROOT / "examples" / "ddp_mnist.py", "--limit", "256", "--epochs", "1", "--batch-size", "32",
                "--out", tmp_path], timeout=180)
    assert out.count("test accuracy") == 1, out  # rank 0 only
    accuracy = float(out.split("test accuracy")[1].split()[0])
    assert 0.0 <= accuracy <= 1.0
    assert "2 replica(s), 256 training images, global batch 64" in out
    assert (tmp_path / "checkpoint.ember").is_file() and (tmp_path / "tensorboard").is_dir()


# ---- in this process, without MPI ----------------------------------------------------------------------
class _FakeGroup:
    """Stands in for a process group where only rank/size are read (data plumbing)."""

    def __init__(self, rank: int, size: int) -> None:
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size


def _fake_strategy(rank: int, size: int, seed: int = 0) -> DataParallelStrategy:
    strategy = object.__new__(DataParallelStrategy)
    strategy.group, strategy.seed, strategy.silence_workers = _FakeGroup(rank, size), seed, True
    return strategy


@pytest.mark.parametrize("n,replicas", [(13, 2), (10, 3), (2, 4), (0, 2), (12, 4)])
def test_evaluation_shards_are_contiguous_and_match_array_split(n, replicas):
    blocks = [list(_ShardSampler(n, replicas, r)) for r in range(replicas)]
    assert blocks == [b.tolist() for b in np.array_split(np.arange(n), replicas)]


def test_a_plain_dataloader_is_resharded_and_keeps_its_settings():
    ds = TensorDataset(ember.arange(10.0), ember.arange(10))
    shuffled = DataLoader(ds, batch_size=3, shuffle=True, drop_last=True)
    train = [_fake_strategy(r, 2, seed=4).distribute_loader(shuffled, train=True) for r in range(2)]
    assert all(isinstance(t.sampler, DistributedSampler) and t.sampler.shuffle for t in train)
    assert [t.batch_size for t in train] == [3, 3] and all(t.drop_last for t in train)
    assert sorted(list(train[0].sampler) + list(train[1].sampler)) == list(range(10))
    plain = DataLoader(ds, batch_size=4)
    evaluation = [_fake_strategy(r, 2).distribute_loader(plain, train=False) for r in range(2)]
    assert [[y.tolist() for _, y in e] for e in evaluation] == [[[0, 1, 2, 3], [4]], [[5, 6, 7, 8], [9]]]
    already = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 2, 1))
    assert _fake_strategy(1, 2).distribute_loader(already, train=True) is already


def test_loaders_that_cannot_be_sharded_are_refused_with_the_fix():
    ds = TensorDataset(ember.arange(6.0), ember.arange(6))
    strategy = _fake_strategy(0, 2)
    custom = DataLoader(ds, batch_size=2, sampler=[5, 4, 3, 2, 1, 0])
    with pytest.raises(ValueError, match="DistributedSampler"):
        strategy.distribute_loader(custom, train=True)
    with pytest.raises(ValueError, match="batch_sampler"):
        strategy.distribute_loader(DataLoader(ds, batch_sampler=[[0, 1], [2, 3]]), train=False)

    class Stream(ember.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="IterableDataset"):
        strategy.distribute_loader(DataLoader(Stream(), batch_size=2), train=True)


def test_metric_states_merge_to_the_global_result():
    a, b, whole = Accuracy(), Accuracy(), Accuracy()
    out = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0], [0.0, 1.0], [5.0, 4.0]])
    tgt = np.array([0, 0, 1, 1, 0])
    a.update(out[:2], tgt[:2])
    b.update(out[2:], tgt[2:])
    whole.update(out, tgt)
    merged = np.add(a.state(), b.state())
    assert whole.result_from_state(merged) == whole.result() == 3 / 5
    assert Mean().result_from_state([0.0, 0.0]) != Mean().result_from_state([0.0, 0.0])  # nan when empty

    class Custom(Metric):  # no state(): the strategy falls back to a sample-weighted mean
        name = "custom"

    assert Custom().state() is None


def test_side_effect_callbacks_are_marked_chief_only():
    assert all(cls.chief_only for cls in (ProgbarLogger, TensorBoard, ModelCheckpoint, CSVLogger))
    assert not Callback.chief_only


def test_without_a_strategy_a_model_is_unchanged():
    assert get_strategy() is None
    model = Model(ember.nn.Linear(2, 2))
    assert model.strategy is None and model._net is model.module
