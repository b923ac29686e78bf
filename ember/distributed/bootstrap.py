"""How ``python -m ember.distributed.run`` starts each rank: ``python -u .../bootstrap.py script args``.

It runs the script as ``python script args`` would (``__main__``, ``sys.argv``, the script's folder
first on ``sys.path``; it is started by path and imports only the standard library, so nothing is
imported before the script's own first line), and records a failure for the launcher even when it
happens before ``init_process_group`` (an import error, a bad argument) or is a ``sys.exit`` with a
non-zero code: the launcher then ends the whole job, as torchrun does, instead of leaving the other
ranks waiting in MPI_Init or a collective. After ``init_process_group``,
``ember.distributed.watchdog``'s hook also aborts the job through MPI at once.

Example:
    >>> from ember.distributed.bootstrap import script_argv
    >>> script_argv(["train.py", "--lr", "0.1"])
    ('train.py', False, ['train.py', '--lr', '0.1'])
"""
from __future__ import annotations

import json
import os
import runpy
import socket
import sys
import time
import traceback
from typing import Any

ERROR_DIR_ENV = "EMBER_ERROR_DIR"  # set by the launcher: where a failing rank records its traceback


def launcher_rank() -> int:
    """This process's rank as the launcher told it (MPICH/Hydra, Open MPI, or torchrun's RANK), before MPI starts."""
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def record_failure(rank: int, exception: str, trace: str) -> None:
    """Write ``rank``'s failure into the launcher's folder (``EMBER_ERROR_DIR``), atomically; no-op without it."""
    folder = os.environ.get(ERROR_DIR_ENV)
    if not folder or not os.path.isdir(folder):
        return
    record = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "time": time.time(),
              "exception": exception, "traceback": trace}
    path = os.path.join(folder, f"rank-{rank}.json")
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w") as f:
            json.dump(record, f)
        os.replace(temporary, path)
    except OSError:  # the record is a courtesy; the traceback is already on stderr
        pass


def script_argv(argv: list[str]) -> tuple[str, bool, list[str]]:
    """(target, is_module, the sys.argv the target sees) from the bootstrap's own arguments."""
    if argv and argv[0] == "-m":
        return argv[1], True, [argv[1]] + argv[2:]
    return argv[0], False, list(argv)


def _hook(previous: Any) -> Any:
    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        record_failure(launcher_rank(), f"{kind.__name__}: {value}",
                       "".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()

    return hook


_FROM_MPI = {"RANK": ("PMI_RANK", "OMPI_COMM_WORLD_RANK"), "WORLD_SIZE": ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"),
             "LOCAL_RANK": ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK"),
             "LOCAL_WORLD_SIZE": ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")}


def torchrun_environment(environ: dict) -> dict:
    """torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE from an MPI launcher's variables, where
    missing, so a torchrun script (``init_process_group("gloo")``, ``int(os.environ["LOCAL_RANK"])``) runs under
    mpiexec unchanged.

    Example:
        >>> torchrun_environment({"PMI_RANK": "1", "PMI_SIZE": "2"})
        {'RANK': '1', 'WORLD_SIZE': '2'}
    """
    found = {}
    for name, sources in _FROM_MPI.items():
        if name not in environ:
            value = next((environ[s] for s in sources if environ.get(s, "").isdigit()), None)
            if value is not None:
                found[name] = value
    return found


def main(argv: list[str]) -> None:
    target, is_module, sys.argv = script_argv(argv)
    os.environ.update(torchrun_environment(dict(os.environ)))
    sys.excepthook = _hook(sys.excepthook)
    try:
        if is_module:
            sys.path[0] = os.getcwd()  # as `python -m`: the current folder first
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (0, None):  # torchrun treats a non-zero exit as the worker's failure too
            record_failure(launcher_rank(), f"SystemExit: {stop.code}", traceback.format_exc())
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
