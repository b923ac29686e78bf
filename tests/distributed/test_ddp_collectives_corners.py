"""QA of ember.distributed corners on 2 MPI ranks (workers in tests/distributed/worker_qa_*.py):
DistributedDataParallel with tied/frozen/reused parameters and two dtypes, no_sync accumulation, a second
backward, autocast, GradScaler, ember.compile and state_dict, against torch on the full batch; collectives
on bool/int8/uint8, 0-d, zero-size and non-contiguous tensors, async ordering and a > 64 MB ring.
The last check runs in this process: without mpiexec, init_process_group makes a world of one process."""
import pytest

from mpi_support import WORKERS, needs_mpi, run_on_ranks  # noqa: E402


@needs_mpi
def test_ddp_edge_cases_match_torch_on_the_full_batch():
    out = run_on_ranks([WORKERS / "worker_qa_ddp.py"], n=2)
    assert "rank 0: qa ddp ok" in out and "rank 1: qa ddp ok" in out


@needs_mpi
def test_collective_edge_cases_on_two_ranks():
    out = run_on_ranks([WORKERS / "worker_qa_collectives.py"], n=2)
    assert "rank 0: qa collectives ok" in out and "rank 1: qa collectives ok" in out


def test_ddp_forward_refuses_tracing_so_compile_falls_back_instead_of_dropping_the_all_reduce():
    pytest.importorskip("mpi4py")
    import ember
    import ember.distributed as dist
    from ember.graph.ir import TracingError
    from ember.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")  # a world of one process when pytest runs without mpiexec
    try:
        model = DDP(ember.nn.Linear(3, 2))
        compiled = ember.compile(model, fallback="raise", warmup=0)
        with pytest.raises(TracingError, match="DistributedDataParallel"):
            compiled(ember.ones(4, 3))
        step = ember.compile(model, warmup=0)
        with pytest.warns(RuntimeWarning, match="DistributedDataParallel"):
            out = step(ember.ones(4, 3))
        out.sum().backward()
        assert model.module.weight.grad is not None
    finally:
        dist.destroy_process_group()
