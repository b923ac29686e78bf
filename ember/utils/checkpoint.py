"""``torch.utils.checkpoint``: activation checkpointing with recomputation in backward, as PyTorch.

Both of torch's forms:

* ``use_reentrant=False`` (recommended): the function runs once with grad; every tensor its ops save for backward is
  replaced by a handle (``saved_tensors_hooks``), so the activations are not kept; the first unpack in backward
  re-runs the function (same RNG state when ``preserve_rng_state``) and hands out what the re-run saved. Keyword
  arguments, ``autograd.grad`` and double backward work (the re-run records from the original inputs).
  Decision: the re-run goes to the end of the function. PyTorch stops it right after the last saved tensor (its
  "early stop"), so a forward hook or an op after that point runs once there and twice here; stopping there in
  ember would skip batch norm's running-statistics update, which ember's batch norm makes after saving its tensors
  and torch's kernel before (torch updates the statistics twice; so does ember).
* ``use_reentrant=True`` (torch's default when not passed, with its warning): a custom Function whose forward runs
  the function without grad and whose backward re-runs it with grad and calls ``backward`` on the re-run: when no
  input requires grad nothing is recorded (the parameters inside get no gradient, torch's warning), and
  ``autograd.grad`` / ``backward(inputs=...)`` are refused with torch's message.

The function is called twice (its side effects too: a module's forward hooks, batch norm's running statistics), as
PyTorch calls it. Only the CPU generator's state is replayed (ember's CUDA generators by ``get_device_states``).

Example:
    >>> import ember
    >>> from ember.utils.checkpoint import checkpoint
    >>> x = ember.ones(2, requires_grad=True)
    >>> checkpoint(lambda t: (t * 3).sin().sum(), x, use_reentrant=False).backward(); x.grad.shape
    ember.Size([2])
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from ember import cuda, random
from ember.autograd import grad_mode
from ember.autograd.engine import current_graph_task, run_backward
from ember.autograd.function import Function
from ember.autograd.graph import saved_tensors_hooks
from ember.tensor import Tensor
from ember.utils._pytree import tree_leaves

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_debug_enabled", "get_device_states",
           "set_device_states"]

_REENTRANT_DEFAULT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, calling "
    "checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, but if you need to "
    "preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants.")


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None, context_fn: Any = None,
               determinism_check: str = "default", debug: bool = False, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` without keeping its activations: backward recomputes them."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_DEFAULT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if context_fn is not None or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _ReentrantCheckpoint.apply(function, preserve_rng_state, *args)
    return _checkpoint_by_hooks(function, args, kwargs, preserve_rng_state, context_fn)


def _rerun(function: Callable, args: Sequence[Any], kwargs: dict, rng_state: Any) -> Any:
    """``function`` again with grad enabled, from the generator state the first run started with."""
    current = random.get_rng_state() if rng_state is not None else None
    try:
        if rng_state is not None:
            random.set_rng_state(rng_state)
        with grad_mode.enable_grad():
            return function(*args, **kwargs)
    finally:
        if current is not None:
            random.set_rng_state(current)


def _checkpoint_by_hooks(function: Callable, args: tuple, kwargs: dict, preserve_rng_state: bool,
                         context_fn: Any) -> Any:
    """``use_reentrant=False``: saved tensors become indices; the first unpack re-runs ``function`` and hands out
    the tensors the re-run saved, in the same order (freed once each was read; a second backward re-runs again)."""
    rng_state = random.get_rng_state() if preserve_rng_state else None
    packed = [0]
    rerun: dict = {}

    def pack(tensor: Any) -> int:
        packed[0] += 1
        return packed[0] - 1

    def unpack(index: int) -> Any:
        values = rerun.get("values")
        if values is None or values[index] is None:
            saved: list = []

            def keep(tensor: Any) -> int:
                saved.append(tensor)
                return len(saved) - 1
            with saved_tensors_hooks(keep, saved.__getitem__):
                _rerun(function, args, kwargs, rng_state)
            if len(saved) != packed[0]:
                raise RuntimeError(f"torch.utils.checkpoint: a different number of tensors was saved during the "
                                   f"original forward and recomputation (original {packed[0]}, recomputed "
                                   f"{len(saved)}): the checkpointed function must run the same ops both times")
            values = rerun["values"] = saved
        value = values[index]
        values[index] = None
        return value

    if context_fn is not None:
        forward_context, _ = context_fn()
        with forward_context, saved_tensors_hooks(pack, unpack):
            return function(*args, **kwargs)
    with saved_tensors_hooks(pack, unpack):
        return function(*args, **kwargs)


class _ReentrantCheckpoint(Function):
    """``use_reentrant=True``: forward without grad; backward re-runs with grad and back-propagates through it."""

    @staticmethod
    def forward(ctx: Any, function: Callable, preserve_rng_state: bool, *args: Any) -> Any:
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=4)
        ctx.function = function
        ctx.rng_state = random.get_rng_state() if preserve_rng_state else None
        ctx.arguments = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        task = current_graph_task()
        if task is not None and task.captured:
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
                "parameter to .backward(). To resolve this error, you can either set use_reentrant=False, or call "
                ".backward() without passing the `inputs` argument.")
        saved = iter(ctx.saved_tensors)
        inputs = [next(saved).detach().requires_grad_(t_grad) if a is None else a
                  for a, t_grad in zip(ctx.arguments, _input_grads(ctx))]
        outputs = _rerun(ctx.function, inputs, {}, ctx.rng_state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        run_backward([o for o, _ in pairs], [g for _, g in pairs], False, grad_mode.is_grad_enabled())
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


def _input_grads(ctx: Any) -> list:
    """Whether each argument (after the function and the flag) required grad, in ``ctx.arguments`` order."""
    return list(ctx.needs_input_grad[2:])


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                          **kwargs: Any) -> Any:
    """Run ``functions`` (a Sequential or a list) in ``segments`` chunks, each but the last checkpointed."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant is None:
        warnings.warn(_REENTRANT_DEFAULT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    modules: Sequence = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start: int, end: int) -> Callable:
        def forward(value: Any) -> Any:
            for module in modules[start:end + 1]:
                value = module(value)
            return value
        return forward

    size = len(modules) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(modules) - 1)(input)


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
