"""``torch.distributed.optim.ZeroRedundancyOptimizer`` (llm.c's train_gpt2.py and train_llama3.py import it).

The sharded steps run under ``mpiexec`` in tests/distributed/worker_zero_redundancy.py (compared with torch's
AdamW in one process and with torch's own partition method); the refusals run here.
"""
import pytest

import ember
from ember.distributed.optim import ZeroRedundancyOptimizer

from mpi_support import WORKERS, needs_mpi, run_on_ranks  # noqa: E402


@needs_mpi
def test_sharded_adamw_equals_torch_on_two_ranks():
    out = run_on_ranks([WORKERS / "worker_zero_redundancy.py"], n=2)
    assert "rank 0: zero ok" in out and "rank 1: zero ok" in out


@needs_mpi
@pytest.mark.slow
def test_sharded_adamw_equals_torch_on_three_ranks():
    out = run_on_ranks([WORKERS / "worker_zero_redundancy.py"], n=3)
    assert all(f"rank {r}: zero ok" in out for r in range(3))


def test_torch_module_paths_resolve_to_it():
    from ember.run.alias import module_for

    assert module_for("torch.distributed.optim").ZeroRedundancyOptimizer is ZeroRedundancyOptimizer
    assert module_for("torch.distributed.optim.zero_redundancy_optimizer").ZeroRedundancyOptimizer \
        is ZeroRedundancyOptimizer


def test_refusals_name_the_problem():
    w = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="init_process_group"):  # torch: the default group is not initialized
        ZeroRedundancyOptimizer([w], optimizer_class=ember.optim.AdamW, lr=1e-3)
    with pytest.raises(TypeError, match="single Tensor"):
        ZeroRedundancyOptimizer(w, optimizer_class=ember.optim.AdamW)
    with pytest.raises(ValueError, match="empty parameter list"):
        ZeroRedundancyOptimizer([], optimizer_class=ember.optim.AdamW)
    with pytest.raises(ValueError, match="same dense type"):
        ZeroRedundancyOptimizer([w, ember.zeros(2, dtype=ember.float64, requires_grad=True)],
                                optimizer_class=ember.optim.AdamW)
    with pytest.raises(NotImplementedError, match="overlap_with_ddp"):
        ZeroRedundancyOptimizer([w], optimizer_class=ember.optim.AdamW, overlap_with_ddp=True)
