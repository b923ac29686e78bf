"""Shared by the MPI worker scripts: one failing rank must end the whole job, not leave the others
waiting forever in a collective."""
import sys
import traceback


def abort_on_error() -> None:
    def hook(kind, value, tb):
        traceback.print_exception(kind, value, tb)
        sys.stderr.flush()
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook
