"""``torch.distributed.tensor.placement_types``: how a tensor is laid out over one mesh dimension.

``Shard(dim)`` (split along ``dim``), ``Replicate()`` (a full copy on each rank), ``Partial(reduce_op)``
(each rank holds a partial value awaiting a reduction) and ``_StridedShard(dim, split_factor=)``, with PyTorch's
equality, hashing, ``repr``/``str`` and ``is_shard/is_replicate/is_partial``. They are plain descriptions: ember
has no DTensor to place (:mod:`ember.distributed.tensor`), but libraries build and compare them.

Example:
    >>> from ember.distributed.tensor.placement_types import Shard, Replicate
    >>> Shard(0), str(Shard(1)), Replicate().is_replicate()
    (Shard(dim=0), 'S(1)', True)
"""
from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    """Base of the placement types."""

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return False


class Shard(Placement):
    """Split along tensor dimension ``dim`` over the mesh dimension."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.dim))

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


class _StridedShard(Placement):
    """A shard whose pieces are taken ``split_factor`` at a time (PyTorch's FSDP2 + TP layout). As in torch 2.13
    it is no ``Shard`` (``is_shard()`` is False, and it never equals one)."""

    def __init__(self, dim: int, split_factor: int) -> None:
        self.dim = dim
        self.split_factor = split_factor

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.dim, other.split_factor) == (self.dim, self.split_factor)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.dim, self.split_factor))

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """A full copy on every rank of the mesh dimension."""

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


class Partial(Placement):
    """Each rank holds a partial value; the full one is their ``reduce_op`` ("sum", "avg", "max", "min")."""

    def __init__(self, reduce_op: str = "sum") -> None:
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.reduce_op))

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
