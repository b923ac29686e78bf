"""Issue 10.5: a distributed job never hangs when one rank fails. Each test starts
tests/distributed/worker_failures.py on 2 MPI ranks with a hard subprocess timeout; rank 1 raises, calls
sys.exit, is killed or is too slow, and the job must end within seconds, non-zero, with the cause printed."""
import os
import subprocess
import sys
import time

import pytest

from mpi_support import MPIEXEC, ROOT, WORKERS, needs_mpi

WORKER = WORKERS / "worker_failures.py"
LIMIT = 60  # a hang fails the test here instead of blocking the suite; a pass takes a few seconds


def run_job(mode, launcher=False):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if launcher:
        cmd = [sys.executable, "-m", "ember.distributed.run", "-n", "2", str(WORKER), mode]
    else:
        cmd = [MPIEXEC, "-n", "2", sys.executable, "-u", str(WORKER), mode]
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT, env=env, cwd=ROOT)
    return result, time.monotonic() - start


def assert_failed_fast(result, seconds, *expected):
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    # A hang would wait for the 30-minute collective timeout (LIMIT stops it at 60 s); a pass takes a few seconds
    # on an idle machine and 20-25 s on a 2-core machine loaded ~20, so the bound leaves room for slow CI machines.
    assert seconds < 45, f"took {seconds:.1f} s:\n{text}"
    for piece in expected:
        assert piece in text, f"{piece!r} missing from:\n{text[-5000:]}"
    assert "rank 0: finished" not in text, text


@needs_mpi
@pytest.mark.parametrize("mode", ["ddp_raise", "fit_raise"])
def test_an_exception_on_one_rank_aborts_the_job_with_its_traceback(mode):
    result, seconds = run_job(mode)
    assert_failed_fast(result, seconds, "uncaught ValueError on rank 1", "ValueError: rank 1 broke at",
                       "Traceback (most recent call last)")


@needs_mpi
@pytest.mark.parametrize("mode, where", [("ddp_exit0", "DistributedDataParallel gradient bucket"),
                                         ("ddp_exit3", "DistributedDataParallel gradient bucket"),
                                         ("fit_exit0", "all_reduce (collective #")])
def test_sys_exit_on_one_rank_makes_the_others_fail_instead_of_waiting(mode, where):
    result, seconds = run_job(mode)
    assert_failed_fast(result, seconds, "DistBackendError", "can never complete: rank(s) 1 ended their script",
                       where)


@needs_mpi
def test_a_killed_rank_ends_the_job():
    result, seconds = run_job("ddp_kill")
    assert_failed_fast(result, seconds, "rank 1: failing (ddp_kill)")
    assert result.returncode == 9, result.returncode  # mpiexec reports the signal


@needs_mpi
@pytest.mark.parametrize("mode, where", [("ddp_osexit0", "DistributedDataParallel gradient bucket"),
                                         ("ddp_osexit3", "DistributedDataParallel gradient bucket"),
                                         ("fit_osexit0", "all_reduce (collective #")])
def test_os_exit_on_one_rank_fails_the_job_instead_of_reporting_success(mode, where):
    # os._exit skips atexit: without ember's handshake MPICH's mpiexec stopped rank 0 and exited 0
    result, seconds = run_job(mode)
    assert_failed_fast(result, seconds, "DistBackendError", "can never complete: rank(s) 1 ended their script",
                       "os._exit", where)


@needs_mpi
@pytest.mark.parametrize("mode, code", [("ddp_term", 15), ("ddp_segv", 11)])
def test_a_rank_ended_by_a_signal_ends_the_job(mode, code):
    result, seconds = run_job(mode)
    assert_failed_fast(result, seconds, f"rank 1: failing ({mode})")
    assert result.returncode == code, result.returncode  # mpiexec reports the signal


@needs_mpi
def test_os_exit_after_the_last_collective_is_a_normal_end():
    result, seconds = run_job("clean_early_osexit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0: finished" in result.stdout


@needs_mpi
def test_a_collective_past_the_timeout_names_it_and_the_missing_rank():
    result, seconds = run_job("timeout")
    assert_failed_fast(result, seconds, "DistBackendError", "timed out after", "(timeout=0:00:01)",
                       "rank(s) 1 did not arrive", "DistributedDataParallel gradient bucket")


@needs_mpi
def test_work_wait_takes_its_own_timeout():
    result, seconds = run_job("wait_timeout")
    assert_failed_fast(result, seconds, "all_reduce (collective #1 on the default group) timed out",
                       "(timeout=0:00:01)", "rank(s) 1 did not arrive")


@needs_mpi
@pytest.mark.parametrize("mode, what", [("p2p_exit0", "recv from rank 1"),
                                        ("object_exit0", "all_gather_object (collective #1")])
def test_point_to_point_and_object_collectives_are_watched_too(mode, what):
    result, seconds = run_job(mode)
    assert_failed_fast(result, seconds, "DistBackendError", what, "rank(s) 1 ended their script")


@needs_mpi
def test_a_rank_leaving_after_its_last_collective_is_a_normal_end():
    result, seconds = run_job("clean_early_exit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0: finished" in result.stdout


@needs_mpi
def test_dataloader_worker_processes_inside_ranks():
    result, seconds = run_job("loader_ok")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0: finished" in result.stdout and "rank 1: finished" in result.stdout
    result, seconds = run_job("loader_raise")
    assert_failed_fast(result, seconds, "uncaught ValueError on rank 1", "Caught ValueError in DataLoader worker "
                       "process", "rank 1 broke at item 21")


@needs_mpi
def test_the_launcher_prints_the_root_cause_like_torchrun():
    result, seconds = run_job("ddp_raise", launcher=True)
    assert_failed_fast(result, seconds, "Root cause (first observed failure)", "rank      : 1",
                       "exception : ValueError: rank 1 broke at step 2")
    summary = result.stderr.split("Root cause")[1]
    assert 'File "' in summary and "worker_failures.py" in summary  # the failing rank's traceback, in full


@needs_mpi
@pytest.mark.parametrize("mode, exception", [("pre_init_raise", "ValueError: rank 1 broke before init_process_group"),
                                             ("ddp_exit3", "SystemExit: 3")])
def test_the_launcher_ends_jobs_that_mpi_cannot_abort(mode, exception):
    # a rank failing before init_process_group (the others wait in MPI_Init) or calling sys.exit(3): the rank
    # records its failure and the launcher ends the job a few seconds later, as torchrun does
    result, seconds = run_job(mode, launcher=True)
    assert_failed_fast(result, seconds, "Root cause (first observed failure)", "rank      : 1",
                       f"exception : {exception}")


# ---- in this process, without MPI ----------------------------------------------------------------------
def test_the_default_timeout_is_torchs_and_bad_timeouts_are_refused():
    from datetime import timedelta

    from ember.distributed.process_group import _check_timeout
    from ember.distributed.watchdog import DEFAULT_TIMEOUT

    torch_constants = pytest.importorskip("torch.distributed.constants")
    assert DEFAULT_TIMEOUT == torch_constants.default_pg_timeout == timedelta(minutes=30)
    assert _check_timeout(None, "init_process_group") == DEFAULT_TIMEOUT
    with pytest.raises(TypeError, match="init_process_group: timeout must be a datetime.timedelta"):
        _check_timeout(30, "init_process_group")
    with pytest.raises(ValueError, match="timeout must be positive"):
        _check_timeout(timedelta(0), "init_process_group")


def test_the_launcher_summary_orders_failures_and_survives_bad_records(tmp_path):
    import json

    from ember.distributed.run import failure_summary

    assert "No rank recorded a Python exception" in failure_summary(str(tmp_path), 9)
    (tmp_path / "rank-0.json").write_text(json.dumps({"rank": 0, "time": 20.0, "exception": "DistBackendError: x",
                                                      "traceback": "tb0"}))
    (tmp_path / "rank-1.json").write_text(json.dumps({"rank": 1, "time": 10.0, "exception": "ValueError: boom",
                                                      "traceback": "Traceback\n  line\nValueError: boom"}))
    (tmp_path / "rank-2.json").write_text("{not json")  # a rank killed while writing
    text = failure_summary(str(tmp_path), 1)
    root = text.split("Root cause (first observed failure):")[1]
    assert root.index("rank      : 1") < root.index("Other failures") and "ValueError: boom" in root
    assert "rank 0: DistBackendError: x" in text and "exit code 1" in text
