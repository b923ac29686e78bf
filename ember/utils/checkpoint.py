"""``torch.utils.checkpoint``: activation checkpointing, accepted for compatibility.

Decision: ember keeps the activations (no recomputation in backward). Results and gradients are the same
as PyTorch's; only the memory saving is absent. Random ops inside run once, so no RNG-state replay is needed.

Example:
    >>> import ember
    >>> from ember.utils.checkpoint import checkpoint
    >>> x = ember.ones(2, requires_grad=True)
    >>> checkpoint(lambda t: (t * 3).sum(), x, use_reentrant=False).backward(); x.grad.tolist()
    [3.0, 3.0]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import cuda
from ember.tensor import Tensor
from ember.utils._pytree import tree_leaves

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_debug_enabled", "get_device_states",
           "set_device_states"]


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None, context_fn: Any = None,
               determinism_check: str = "default", debug: bool = False, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                          **kwargs: Any) -> Any:
    modules: Sequence = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for module in modules:
        input = module(input)
    return input


class set_checkpoint_debug_enabled:
    def __init__(self, enabled: bool | None) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def get_device_states(*args: Any) -> tuple[list[int], list[Any]]:
    """The device index of every accelerator tensor among ``args`` (nested lists/dicts too; one entry per tensor,
    as PyTorch) and that device's RNG state: what reversible layers save to replay dropout in backward.
    CPU and meta tensors are skipped, so on the CPU both lists are empty.

    Example:
        >>> get_device_states(ember.ones(2), [ember.zeros(1)])  # doctest: +SKIP
        ([], [])
    """
    ids = [leaf.get_device() for leaf in tree_leaves(args)
           if isinstance(leaf, Tensor) and leaf.device.type not in ("cpu", "meta")]
    return ids, [cuda.get_rng_state(index) for index in ids]


def set_device_states(devices: Sequence[int], states: Sequence[Any], *, device_type: str | None = None) -> None:
    """Restore the RNG state of each device index in ``devices`` (the pairs :func:`get_device_states` returned)."""
    if device_type == "meta":
        return
    if device_type not in (None, "cuda"):
        raise RuntimeError(f"set_device_states: ember has no {device_type!r} devices with random generators; "
                           "only 'cuda' (and the CPU, whose state torch.set_rng_state restores)")
    for index, state in zip(devices, states):
        cuda.set_rng_state(state, index)
