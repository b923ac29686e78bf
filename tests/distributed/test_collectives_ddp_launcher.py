"""ember.distributed: MPI collectives, DistributedDataParallel, model parallelism, sampler, launcher.

The multi-process checks live in tests/distributed/worker_*.py and run under ``mpiexec -n 2``
(they compare against NumPy and against torch trained in one process); they skip where mpi4py or
mpiexec is missing. The rest runs in this process.
"""
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.distributed as dist
from ember.distributed.run import BOOTSTRAP, build_command

from mpi_support import WORKERS, needs_mpi, run_on_ranks  # noqa: E402


def _run_workers(script: str, n: int = 2) -> str:
    return run_on_ranks([WORKERS / script], n=n)


@needs_mpi
def test_collectives_match_numpy_on_two_ranks():
    out = _run_workers("worker_collectives.py")
    assert "rank 0: collectives ok" in out and "rank 1: collectives ok" in out


@needs_mpi
def test_ddp_matches_single_process_torch():
    out = _run_workers("worker_ddp.py")
    assert "rank 0: ddp ok" in out and "rank 1: ddp ok" in out


@needs_mpi
def test_pipeline_and_tensor_parallel_match_torch():
    out = _run_workers("worker_model_parallel.py")
    assert "rank 0: model parallel ok" in out and "rank 1: model parallel ok" in out


@needs_mpi
def test_launcher_runs_a_script_on_two_ranks(tmp_path):
    script = tmp_path / "hello.py"
    # each rank writes its own file: the ranks' stdout streams interleave character by character
    script.write_text("import sys, ember.distributed as d\nd.init_process_group()\n"
                      "open(sys.argv[1] + str(d.get_rank()), 'w').write(f'{d.get_rank()} of {d.get_world_size()}')\n")
    result = subprocess.run([sys.executable, "-m", "ember.distributed.run", "-n", "2", str(script),
                             str(tmp_path / "rank")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["0 of 2", "1 of 2"]


def test_launcher_command_line():
    assert build_command(["-n", "4", "train.py", "--lr", "0.1"], mpiexec="mpiexec", python="py") == \
        ["mpiexec", "-n", "4", "py", "-u", BOOTSTRAP, "train.py", "--lr", "0.1"]
    assert build_command(["--nproc-per-node", "2", "--hosts", "a,b", "-m", "pkg.train"], mpiexec="m", python="py") \
        == ["m", "-hosts", "a,b", "-ppn", "2", "-n", "4", "py", "-u", BOOTSTRAP, "-m", "pkg.train"]


def test_calls_before_init_explain_what_to_do():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(ember.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        ember.nn.parallel.DistributedDataParallel(ember.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="num_replicas"):
        ember.data.DistributedSampler(range(4))


def test_unknown_backend_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="backend='gloo'"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="not available"):
        dist.init_process_group("ucc")


@pytest.mark.parametrize("n,replicas,drop_last,shuffle", [(10, 3, False, False), (10, 3, True, False),
                                                          (11, 4, False, False), (3, 4, False, False),
                                                          (12, 4, True, False), (17, 3, False, True)])
def test_distributed_sampler_matches_torch(n, replicas, drop_last, shuffle):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler

    ours = [list(ember.data.DistributedSampler(range(n), replicas, r, shuffle=shuffle, drop_last=drop_last))
            for r in range(replicas)]
    theirs = [list(TorchSampler(range(n), replicas, r, shuffle=shuffle, drop_last=drop_last))
              for r in range(replicas)]
    assert ours == theirs  # shuffled too: the same generator seeding and randperm as torch


def test_distributed_sampler_reshuffles_per_epoch_and_agrees_across_ranks():
    a = ember.data.DistributedSampler(range(20), 2, 0, seed=5)
    b = ember.data.DistributedSampler(range(20), 2, 1, seed=5)
    first = list(a) + list(b)
    a.set_epoch(1)
    b.set_epoch(1)
    second = list(a) + list(b)
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second
    assert not set(list(a)) & set(list(b))


def test_data_parallel_without_gpus_runs_the_module():
    net = ember.nn.Linear(3, 2)
    x = ember.randn(4, 3)
    np.testing.assert_array_equal(ember.nn.DataParallel(net)(x).detach().numpy(), net(x).detach().numpy())


def test_post_accumulate_grad_hook_and_queued_callback_order():
    from ember.autograd.engine import queue_callback

    w = ember.ones(3, requires_grad=True)
    events = []
    w.register_post_accumulate_grad_hook(lambda p: events.append(("hook", p.grad.tolist())))
    w.register_hook(lambda g: queue_callback(lambda: events.append("end")) or None)
    ((w * 2).sum() + (w * 3).sum()).backward()
    assert events == [("hook", [5.0, 5.0, 5.0]), "end"]
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="no backward pass"):
        queue_callback(lambda: None)
