"""Names of ``torch.distributed``'s sharded-tensor stack that ember does not implement, refused when used.

ember's distributed layer is collectives (on MPI or ember's own sockets, "gloo"), DDP and a GPipe pipeline (:mod:`ember.distributed`). PyTorch's
DTensor, device meshes, FSDP, ``Join`` and distributed checkpoints are not here. Libraries import these names at
module level whenever ``torch.distributed.is_available()`` (Hugging Face ``transformers`` does, for tensor
parallelism it only uses when asked), so the names exist: a class can appear in annotations and ``isinstance``
checks (no ember tensor is one), and making one or calling a function raises ``NotImplementedError`` naming it.

Example:
    >>> from ember.distributed.tensor import DTensor
    >>> import ember; isinstance(ember.ones(2), DTensor)
    False
"""
from __future__ import annotations

from typing import Any, Callable

_WHY = ("ember's torch.distributed has collectives (MPI and gloo), DistributedDataParallel and a pipeline, not "
        "PyTorch's sharded-tensor stack (DTensor, device meshes, FSDP, Join, distributed checkpoints)")


def refusal(torch_name: str) -> NotImplementedError:
    return NotImplementedError(f"{torch_name}: {_WHY}; use DistributedDataParallel (ember.nn.parallel) instead")


def refused_class(torch_name: str, doc: str, base: type = object) -> type:
    """A class named as PyTorch's whose construction raises (it can still be annotated and isinstance-checked)."""
    def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N807 - the class protocol
        raise refusal(torch_name)

    module, _, name = torch_name.rpartition(".")
    return type(name, (base,), {"__new__": __new__, "__doc__": f"{doc} (not in ember: refused when made)",
                                "__module__": "ember" + module[len("torch"):]})


def refused_function(torch_name: str, doc: str) -> Callable[..., Any]:
    """A function named as PyTorch's that raises when called."""
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise refusal(torch_name)

    refused.__name__ = refused.__qualname__ = torch_name.rpartition(".")[2]
    refused.__doc__ = f"{doc} (not in ember: raises NotImplementedError)"
    return refused
