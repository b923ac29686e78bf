"""``torch.distributed.optim.ZeroRedundancyOptimizer``: optimizer state sharded over the ranks (ZeRO stage 1).

Each rank builds the wrapped optimizer over a shard of the parameters only, so the optimizer state
(Adam's two moments, ...) is held once across the group instead of once per rank. ``step()`` updates the
local shard, then every rank broadcasts the parameters it owns, so all replicas hold the same weights
afterwards (the gradients must already agree, e.g. through :class:`~ember.nn.parallel.DistributedDataParallel`).

The partition is PyTorch's: per parameter group, parameters sorted by size (largest first) each go to the
rank holding the fewest elements so far. ``state_dict()`` after ``consolidate_state_dict(to=r)`` on every
rank has the layout of the wrapped optimizer's own ``state_dict()`` (global indices), so it loads into a
ZeroRedundancyOptimizer of any world size or into the plain optimizer.

Example (``python -m ember.distributed.run -n 2 train.py``):
    >>> opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=ember.optim.AdamW, lr=1e-3)  # doctest: +SKIP
    >>> loss.backward(); opt.step()                                  # doctest: +SKIP
    >>> opt.consolidate_state_dict(to=0)                             # doctest: +SKIP
    >>> if dist.get_rank() == 0: ember.save(opt.state_dict(), "opt.pt")  # doctest: +SKIP

Decisions: ``overlap_with_ddp=True`` (the step run inside DDP's communication hook) is refused: ember's DDP
has no communication hooks. ``parameters_as_bucket_view=True`` is accepted and changes only how PyTorch lays
parameters out in memory (flat per-rank buckets, one broadcast each); here the parameters keep their own
storage and are broadcast one by one, with the same values.
"""
from __future__ import annotations

import copy
from itertools import chain
from typing import Any, Callable

from ember.distributed import collectives
from ember.distributed.process_group import GroupMember, default_group, get_global_rank
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

__all__ = ["ZeroRedundancyOptimizer"]


def _to_cpu(value: Any) -> Any:
    """A copy of a state value with its tensors on the CPU (what travels between ranks and is saved)."""
    if isinstance(value, Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def _verify_params(params: Any) -> tuple[list, list[Tensor]]:
    """``params`` as a list (tensors or param-group dicts) and the flat list of its tensors, or torch's errors."""
    if isinstance(params, Tensor):
        raise TypeError("ZeroRedundancyOptimizer: `params` argument should be an iterable of Tensors, but got a "
                        f"single Tensor of shape {tuple(params.shape)}; wrap it in a list")
    try:
        items = list(params)
    except TypeError as error:
        raise TypeError("ZeroRedundancyOptimizer: `params` argument should be an iterable of Tensors or dicts, "
                        f"but got {type(params).__name__}") from error
    if not items:
        raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
    if all(isinstance(p, Tensor) for p in items):
        return items, items
    if all(isinstance(p, dict) for p in items):
        flat: list[Tensor] = []
        for group in items:
            if "params" not in group:
                raise ValueError("Each parameter group passed-in via `params` must have a 'params' key mapping to "
                                 "the parameters in the group")
            group_params = group["params"]
            flat.extend([group_params] if isinstance(group_params, Tensor) else list(group_params))
        return items, flat
    raise TypeError("ZeroRedundancyOptimizer: `params` argument should be an iterable of Tensors or dicts")


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class`` so that each rank keeps the state of its shard of the parameters only.

    Args:
        params: tensors or parameter groups (dicts), as for any optimizer.
        optimizer_class: the optimizer to run on each shard (e.g. ``ember.optim.AdamW``).
        process_group: the group sharing the work (default: the world).
        parameters_as_bucket_view: accepted; see the module notes.
        overlap_with_ddp: refused (needs DDP communication hooks).
        **defaults: the options of ``optimizer_class`` (``lr``, ``betas``, ...).
    """

    def __init__(self, params: Any, optimizer_class: type, process_group: Any = None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False, **defaults: Any) -> None:
        if overlap_with_ddp:
            raise NotImplementedError(
                "ZeroRedundancyOptimizer(overlap_with_ddp=True) runs the step inside DistributedDataParallel's "
                "communication hook, which ember's DDP does not have; leave overlap_with_ddp=False and call "
                "optimizer.step() after backward()")
        items, self._all_params = _verify_params(params)
        kinds = {(p.dtype, p.device.type, p.is_sparse) for p in self._all_params}
        if any(sparse for _, _, sparse in kinds):
            raise ValueError("ZeroRedundancyOptimizer only supports dense parameters, but got a sparse one")
        if len(kinds) > 1:
            raise ValueError("ZeroRedundancyOptimizer only supports using the same dense type for all parameters "
                             f"but got {sorted(str(d) + ' on ' + t for d, t, _ in kinds)}")
        self.initialized = False
        super().__init__(items, defaults)
        group = process_group if process_group is not None else GroupMember.WORLD
        self.process_group = default_group(group, "ZeroRedundancyOptimizer")
        self.world_size: int = self.process_group.size()
        self.rank: int = self.process_group.rank()
        self.global_rank: int = get_global_rank(self.process_group, self.rank)
        self._default_device = self._all_params[0].device
        self._optim_defaults = defaults
        self._optim_constructor = optimizer_class
        self._partition_cache: list[list[dict]] = []
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self.optim = optimizer_class(self._partition_parameters()[self.rank], **defaults)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self._all_state_dicts: list[dict] = []
        self.initialized = True

    # ---- the partition ------------------------------------------------------------------------------
    def _partition_parameters(self) -> list[list[dict]]:
        """Per rank, its param groups: copies of the global groups holding that rank's parameters."""
        if not self._partition_cache:
            per_rank: list[list[dict]] = [[] for _ in range(self.world_size)]
            sizes = [0] * self.world_size
            for group in self.param_groups:
                shards: list[list[Tensor]] = [[] for _ in range(self.world_size)]
                for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):  # stable, as torch's
                    rank = sizes.index(min(sizes))
                    shards[rank].append(p)
                    sizes[rank] += p.numel()
                for rank, shard in enumerate(shards):
                    local = {k: v for k, v in group.items() if k not in ("params", "param_names")}
                    local["params"] = shard
                    per_rank[rank].append(local)
            self._partition_cache = per_rank
        return self._partition_cache

    def _param_to_rank(self) -> dict[Tensor, int]:
        return {p: rank for rank, groups in enumerate(self._partition_parameters())
                for g in groups for p in g["params"]}

    def _index_to_param(self) -> list[Tensor]:
        return list(chain.from_iterable(g["params"] for g in self.param_groups))

    @staticmethod
    def _sync_param_groups(src: list[dict], dst: list[dict]) -> None:
        """Copy every option but ``params`` from each source group to its destination group."""
        if len(src) != len(dst):
            raise AssertionError("Mismatch between number of source and destination parameter groups")
        for s, d in zip(src, dst):
            for key, value in s.items():
                if key not in ("params", "param_names"):
                    d[key] = value

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (on every rank): it is partitioned like the others; earlier groups keep their ranks."""
        super().add_param_group(param_group)
        if getattr(self, "initialized", False):
            self._partition_cache = []
            local_groups = self._partition_parameters()[self.rank]
            if len(local_groups) == len(self.optim.param_groups) + 1:
                self.optim.add_param_group(local_groups[-1])

    # ---- steps ----------------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        """Update this rank's shard with the wrapped optimizer, then broadcast every shard from its owner."""
        self._sync_param_groups(self.param_groups, self.optim.param_groups)  # lr set by schedulers or by hand
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self._sync_params()
        return loss

    def _sync_params(self) -> None:
        works = []
        for rank, groups in enumerate(self._partition_parameters()):
            src = get_global_rank(self.process_group, rank)
            for group in groups:
                for p in group["params"]:
                    works.append(collectives.broadcast(p.detach(), src=src, group=self.process_group,
                                                       async_op=True))
        for work in works:
            work.wait()

    # ---- state dicts ------------------------------------------------------------------------------------
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard state on rank ``to`` (call it on all ranks), for :meth:`state_dict`."""
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        gathered: list | None = [None] * self.world_size if self.rank == to else None
        collectives.gather_object(_to_cpu(self.optim.state_dict()), gathered,
                                  dst=get_global_rank(self.process_group, to), group=self.process_group)
        self._all_state_dicts = gathered if gathered is not None else []

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state, with global parameter indices (after :meth:`consolidate_state_dict`)."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant "
                               "to save the global state.")
        state_dict = super().state_dict()
        index_of = {p: i for i, p in enumerate(self._index_to_param())}
        for local, global_groups in zip(self._all_state_dicts, self._partition_parameters()):
            if len(local["param_groups"]) != len(global_groups):
                raise AssertionError("Mismatch between number of local and global parameter groups")
            for local_group, global_group in zip(local["param_groups"], global_groups):
                for local_index, param in zip(local_group["params"], global_group["params"]):
                    if local_index in local["state"]:
                        state_dict["state"][index_of[param]] = local["state"][local_index]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a whole state (from :meth:`state_dict` or the plain optimizer's); each rank keeps its shard's."""
        index_to_param = self._index_to_param()
        owner = self._param_to_rank()
        mine = {i: v for i, v in state_dict["state"].items()
                if isinstance(i, int) and owner.get(index_to_param[i]) == self.rank}
        wrapper = dict(state_dict)
        wrapper["state"] = {}  # the shards' state lives in self.optim, as in torch (there the others are None)
        super().load_state_dict(wrapper)
        self._partition_cache = []
        local_groups = self._partition_parameters()[self.rank]
        index_of = {p: i for i, p in enumerate(index_to_param)}
        local_state, local_index, packed_groups = {}, 0, []
        for group in local_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(local_index, local_index + len(group["params"])))
            for i, p in zip(packed["params"], group["params"]):
                if index_of[p] in mine:
                    local_state[i] = copy.copy(mine[index_of[p]])
            local_index += len(group["params"])
            packed_groups.append(packed)
        self.optim.load_state_dict({"state": local_state, "param_groups": packed_groups})
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
