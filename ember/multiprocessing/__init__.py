"""``ember.multiprocessing``: Python's ``multiprocessing`` with ember tensors shared, as ``torch.multiprocessing``.

Everything in :mod:`multiprocessing` is here under the same names (Process, Queue, SimpleQueue, Pool,
Pipe, get_context, set_start_method, ...). What ember adds: tensors sent through any of them travel
by shared memory (:mod:`ember.multiprocessing.reductions`; ``import ember`` registers it), so a tensor
put on a queue arrives backed by the same memory, and ``spawn``/``start_processes`` with their
exceptions. One sharing strategy exists, 'file_descriptor' (torch's default on Linux): storages are
anonymous memory files passed by descriptor, so nothing is ever left behind in /dev/shm.

Example (Hogwild: children train one shared model):
    >>> import ember, ember.multiprocessing as mp               # doctest: +SKIP
    >>> model = ember.nn.Linear(4, 1); model.share_memory()     # doctest: +SKIP
    >>> workers = [mp.Process(target=train, args=(model,)) for _ in range(2)]  # doctest: +SKIP
"""
from multiprocessing import *  # noqa: F401,F403 - torch.multiprocessing re-exports multiprocessing too
from multiprocessing import __all__ as _multiprocessing_all

from ember.multiprocessing.reductions import init_reductions
from ember.multiprocessing.spawn import (
    ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException, spawn, start_processes,
)

_STRATEGIES = {"file_descriptor"}


def get_all_sharing_strategies() -> set:
    """The ways tensors can be shared: only 'file_descriptor' (see the module docstring)."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepts 'file_descriptor'; torch's 'file_system' (named files in /dev/shm) is refused, since named
    segments can outlive a killed process."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: {new_strategy!r} is not available; ember shares tensors by "
                         "'file_descriptor' only (anonymous memory files, never left behind)")


init_reductions()

__all__ = list(_multiprocessing_all) + [
    "ProcessContext", "ProcessException", "ProcessExitedException", "ProcessRaisedException",
    "get_all_sharing_strategies", "get_sharing_strategy", "init_reductions", "set_sharing_strategy", "spawn",
    "start_processes",
]
