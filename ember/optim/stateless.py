"""``torch.optim.swap_in_optimizer_params_and_state``: run optimizer APIs against other parameter tensors and
another ``state_dict()``-shaped state for the length of a ``with`` block, then restore the live optimizer.

Example:
    >>> import ember
    >>> w = ember.zeros(2, requires_grad=True); opt = ember.optim.SGD([w], lr=1.0, momentum=0.9)
    >>> w.grad = ember.ones(2); opt.step()
    >>> other = ember.zeros(2); other.grad = ember.ones(2)
    >>> with ember.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, opt.state_dict()):
    ...     opt.step()
    >>> other.tolist(), w.tolist()
    ([-1.899999976158142, -1.899999976158142], [-1.0, -1.0])
"""
from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any, Iterator

from ember.tensor import Tensor

__all__ = ["swap_in_optimizer_params_and_state"]


def _check_structure(optimizer: Any, swapin_optim_state: Any) -> tuple:
    if not optimizer.state:
        raise RuntimeError("swap_in_optimizer_params_and_state requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError("swap_in_optimizer_params_and_state requires a DCP-style optimizer state_dict.")
    state, groups = swapin_optim_state.get("state"), swapin_optim_state.get("param_groups")
    if not isinstance(state, dict):
        raise RuntimeError("swap_in_optimizer_params_and_state requires swapin_optim_state['state'] to be a dict "
                           "keyed by packed parameter ids.")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise RuntimeError(f"swap_in_optimizer_params_and_state requires swapin_optim_state['param_groups'] to "
                           f"have one entry per optimizer param group ({len(optimizer.param_groups)}).")
    for idx, (live, swap) in enumerate(zip(optimizer.param_groups, groups)):
        if not isinstance(swap, dict) or len(swap.get("params", ())) != len(live["params"]):
            raise RuntimeError(f"swap_in_optimizer_params_and_state: param group {idx} has "
                               f"{len(live['params'])} parameters, the swap-in state lists a different number.")
    return state, groups


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer: Any, swapin_parameters: dict[str, Tensor],
                                       swapin_optim_state: dict[str, Any]) -> Iterator[None]:
    """Inside the block ``optimizer.param_groups`` hold ``swapin_parameters`` (in param-group order) with
    the swap-in groups' hyperparameters, and ``optimizer.state`` is the swap-in state re-keyed by those
    tensors; in-place changes to the swap-in state tensors propagate back, other changes stay local."""
    state, groups = _check_structure(optimizer, swapin_optim_state)
    flat = list(swapin_parameters.values())
    if len(flat) != sum(len(g["params"]) for g in optimizer.param_groups):
        raise RuntimeError("swap_in_optimizer_params_and_state requires the explicit parameter state to match "
                           "optimizer.param_groups ordering.")
    original_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        new_state: dict = {}
        offset = 0
        for live, swap in zip(optimizer.param_groups, groups):
            params = flat[offset:offset + len(swap["params"])]
            offset += len(params)
            live["params"] = params
            for key, value in swap.items():
                if key != "params":
                    live[key] = value
            for p, pid in zip(params, swap["params"]):
                new_state[p] = dict(state.get(pid, {}))
        optimizer.state = defaultdict(dict, new_state)
        yield
    finally:
        for group, snapshot in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snapshot)
        optimizer.state = original_state
