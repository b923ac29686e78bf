"""Optimizer base class: parameter groups, per-parameter state, state dicts, hooks.

Mirrors ``torch.optim.Optimizer`` (2.x): ``param_groups`` is a list of dicts holding ``params`` plus
per-group options (defaults fill the gaps); ``state`` maps each parameter tensor to a dict of its
buffers; ``state_dict()`` replaces parameters with integer indices so it can be saved and loaded
into a fresh optimizer over the same model.

Subclasses implement ``step``; each update has two spellings (see ``sgd.py`` and friends):

* the reference one, written in ember tensor ops (``p.add_``, ``mul_``, ...) so a graph tracer can
  record it, and
* an eager-only fast one that works on the raw arrays with in-place ufuncs (``out=``), taken when
  :func:`use_fast_path` says so. Both follow PyTorch's operation order, so results match torch.

Example:
    >>> import ember
    >>> w = ember.zeros(3, requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1)
    >>> (w - 1).pow(2).sum().backward()
    >>> opt.step(); opt.zero_grad()
    >>> w
    tensor([0.2000, 0.2000, 0.2000], requires_grad=True)
"""
from __future__ import annotations

import functools
import os
from collections import OrderedDict, defaultdict
from itertools import chain
from typing import Any, Callable, Iterable

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.ops import dispatch
from ember.tensor import Tensor
from ember.creation import tensor


class _RequiredParameter:
    """Marks an option every param group must set (``lr`` in optimizers that have no default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


class _Handle:
    """Removes a registered hook (what ``register_step_pre_hook`` returns)."""

    _next_id = 0

    def __init__(self, hooks: OrderedDict) -> None:
        self._hooks = hooks
        self.id = _Handle._next_id
        _Handle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)


def _wrap_step(step: Callable) -> Callable:
    """Run step hooks around ``step`` and note that it ran (LR schedulers warn on a wrong call order)."""

    @functools.wraps(step)
    def wrapper(self: "Optimizer", *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "_in_step", False):  # a subclass calling super().step(): hooks already ran
            return step(self, *args, **kwargs)
        self._opt_called = True
        if "_optimizer_step_pre_hooks" not in self.__dict__:  # a subclass that skipped Optimizer.__init__
            return step(self, *args, **kwargs)
        for hook in tuple(self._optimizer_step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                args, kwargs = result
        self._in_step = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        for hook in tuple(self._optimizer_step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._ember_step_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def use_fast_path() -> bool:
    """True when updates may bypass ember ops (eager mode, no graph being built, not disabled)."""
    return Optimizer.fast_path and not interpreters.tracing()


def scalar_dtype() -> dtypes.dtype:
    """dtype of the ``step`` counters: float32, or float64 when that is the default (as torch)."""
    return dtypes.float64 if dtypes.get_default_dtype() is dtypes.float64 else dtypes.float32


def new_step_tensor() -> Tensor:
    """A fresh ``state['step']``: a 0-d CPU tensor, as torch keeps it (cheap to read on any device)."""
    return tensor(0.0, dtype=scalar_dtype())


class Optimizer:
    """Base class of all optimizers.

    Args:
        params: an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts (param groups,
            each with a ``params`` entry and any per-group options).
        defaults: option values for groups that do not set them.

    Example:
        >>> opt = ember.optim.SGD([{"params": [w1]}, {"params": [w2], "lr": 0.01}], lr=0.1)
    """

    #: Class-wide switch for the eager array fast path (tests turn it off to check the op path).
    fast_path: bool = True
    #: Threads for big CPU updates in the fast path: None = CPU count (at most 8); 1 = no threads.
    update_threads: int | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_step_wrapped", False):
            cls.step = _wrap_step(step)

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._in_step = False
        self._opt_called = False
        # Scratch arrays of the fast path, one set per parameter; never part of the state dict.
        self._scratch: dict[Tensor, list] = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got a single Tensor of shape {tuple(params.shape)}; wrap it in a list: [param]")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list; pass model.parameters() or a list of tensors")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ---- groups ---------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (with optional per-group options) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        tensors, names = [], []
        for item in params:
            if isinstance(item, tuple):
                names.append(item[0])
                tensors.append(item[1])
            else:
                tensors.append(item)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor; optimize the leaf it was computed from, or "
                                 "call .detach().requires_grad_() to make a new leaf")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len(set(tensors)):
            import warnings

            warnings.warn("optimizer contains a parameter group with duplicate parameters; the duplicates will be "
                          "updated more than once per step", stacklevel=3)
        seen: set = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names; cannot add a group "
                                 f"{'with' if 'param_names' in param_group else 'without'} names to the others")
        if not seen.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ---- gradients and steps ----------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset gradients: drop them (``set_to_none=True``, the default) or fill them with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad._requires_grad = False
                grad._data[...] = 0
                grad._bump()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update the parameters once; ``closure`` re-evaluates the model and returns the loss."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    @staticmethod
    def _run_closure(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with grad_mode.enable_grad():
            return closure()

    def _scratch_for(self, p: Tensor, count: int = 1) -> list:
        """``count`` scratch arrays shaped like ``p`` for the fast path (allocated once, reused).

        The last one is the general temporary; with ``count=2`` the first holds the modified gradient."""
        bufs = self._scratch.get(p)
        data = p._data
        if bufs is None or len(bufs) < count or bufs[0].shape != data.shape or bufs[0].dtype != data.dtype:
            xp = p._device.xp
            bufs = [xp.empty_like(data) for _ in range(count)]
            self._scratch[p] = bufs
        return bufs

    # ---- hooks ----------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable) -> _Handle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; may return new ``(args, kwargs)``."""
        handle = _Handle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook: Callable) -> _Handle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        handle = _Handle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    # ---- state dicts ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}`` (tensors not copied)."""
        mapping: dict[int, int] = {}
        start = 0

        def pack(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()``; buffers are copied, cast to each parameter's dtype and device."""
        import copy

        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups ({len(saved_groups)}) "
                             f"than the optimizer ({len(groups)})")
        for i, (group, saved) in enumerate(zip(groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                    f"group: group {i} has {len(saved['params'])} parameters in the state dict but "
                    f"{len(group['params'])} in the optimizer. Build the optimizer over the same parameters."
                )
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = _cast_state(param, value)
            else:
                state[key] = copy.deepcopy(value)
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.state = state
        self.param_groups = saved_groups
        self._scratch = {}

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def _cast_state(param: Tensor, value: Any, key: Any = None) -> Any:
    """A copy of a saved state value, tensors moved to ``param``'s device (and dtype, except ``step``)."""
    if isinstance(value, Tensor):
        if key == "step":
            return value.detach().clone()
        target = param.dtype if (param.is_floating_point() and value.is_floating_point()) else value.dtype
        out = value.detach().to(device=param.device, dtype=target)
        return out.clone() if out._data is value._data else out
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


def to_scalar(value: Any) -> Any:
    """A 1-element tensor option (``lr=ember.tensor(0.1)``) as a Python number; numbers pass through."""
    return value.item() if isinstance(value, Tensor) else value


def prepared_grad(grad: Tensor, param: Tensor, weight_decay: float, maximize: bool) -> Tensor:
    """``-grad`` when maximizing, plus ``weight_decay * param`` (L2), in ember ops (torch's order)."""
    g = -grad if maximize else grad
    return g + param * weight_decay if weight_decay else g


def prepared_grad_array(xp: Any, grad: Any, data: Any, weight_decay: float, maximize: bool, buf: Any) -> Any:
    """Array twin of :func:`prepared_grad`; writes into ``buf`` only when the gradient changes."""
    if weight_decay:
        xp.multiply(data, weight_decay, out=buf)
        if maximize:
            return xp.subtract(buf, grad, out=buf)  # (-g) + wd*p, exactly
        return xp.add(grad, buf, out=buf)
    if maximize:
        return xp.negative(grad, out=buf)
    return grad


def lerp_array_(xp: Any, start: Any, end: Any, weight: float, tmp: Any) -> None:
    """``start += weight * (end - start)`` in place, with torch's two-sided formula for rounding."""
    xp.subtract(end, start, out=tmp)
    if abs(weight) < 0.5:
        tmp *= weight
        start += tmp
    else:
        tmp *= -(1 - weight)
        xp.add(end, tmp, out=start)


# Big CPU updates are split across threads: NumPy releases the GIL inside ufunc loops, so the chunks
# run in parallel the way torch's intra-op threads do. Below this many elements per chunk the thread
# hand-off costs more than it saves.
_PARALLEL_MIN_CHUNK = 1 << 17
_POOL: dict[str, Any] = {"key": None, "executor": None, "workers": 1}


_CPU_COUNT = min(os.cpu_count() or 1, 8)  # read once: os.cpu_count() costs ~65 us on some VMs


def _executor() -> Any:
    workers = Optimizer.update_threads or _CPU_COUNT
    key = (os.getpid(), workers)
    if _POOL["key"] != key:  # first use, a new thread count, or a forked child (the parent's threads are gone)
        from concurrent.futures import ThreadPoolExecutor

        _POOL.update(key=key, workers=workers,
                     executor=ThreadPoolExecutor(workers - 1, thread_name_prefix="ember-optim") if workers > 1
                     else None)
    return _POOL["executor"]


# Elements per block when a CPU update runs block by block (``cache_blocks=True``): Adam's NumPy update
# is ~12 whole-array sweeps; on blocks of 64K elements (256 KiB per float32 array) its temporaries stay
# in cache (1M-element Adam: 1.88 -> 1.48 ms). A 3-sweep update (SGD momentum) gains nothing.
_CACHE_BLOCK = 1 << 16


def _cache_blocked(kernel: Callable) -> Callable:
    """``kernel`` run on consecutive flat blocks of its (contiguous, same-shape) arrays."""

    def blocked(xp: Any, *arrays: Any, **scalars: Any) -> None:
        first = arrays[0]
        if first.size <= 2 * _CACHE_BLOCK or any(a is not None and a.shape != first.shape for a in arrays):
            return kernel(xp, *arrays, **scalars)
        flat = [None if a is None else a.reshape(-1) for a in arrays]
        for start in range(0, first.size, _CACHE_BLOCK):
            kernel(xp, *(None if a is None else a[start:start + _CACHE_BLOCK] for a in flat), **scalars)

    return blocked


def run_kernel(on_cpu: bool, xp: Any, kernel: Callable, arrays: tuple, cache_blocks: bool = False,
               **scalars: Any) -> None:
    """Call ``kernel(xp, *arrays, **scalars)``, an elementwise in-place update.

    Large contiguous CPU arrays are cut into equal flat chunks run on a small thread pool; ``None``
    entries (absent buffers) pass through. The kernel must be elementwise, so chunks are independent.
    With ``cache_blocks``, each chunk runs block by block (``_CACHE_BLOCK`` elements).
    """
    first = arrays[0]
    if cache_blocks and on_cpu and first.size > 2 * _CACHE_BLOCK and all(
            a is None or a.flags.c_contiguous for a in arrays):
        kernel = _cache_blocked(kernel)
    chunks = first.size // _PARALLEL_MIN_CHUNK
    if chunks >= 2 and on_cpu:
        executor = _executor()
        chunks = min(chunks, _POOL["workers"])
        if executor is not None and chunks >= 2 and all(
                a is None or (a.shape == first.shape and a.flags.c_contiguous) for a in arrays):
            flat = [None if a is None else a.reshape(-1) for a in arrays]
            edges = [first.size * i // chunks for i in range(chunks + 1)]
            parts = [[None if a is None else a[edges[i]:edges[i + 1]] for a in flat] for i in range(chunks)]
            futures = [executor.submit(kernel, xp, *part, **scalars) for part in parts[1:]]
            kernel(xp, *parts[0], **scalars)
            for future in futures:
                future.result()
            return
    kernel(xp, *arrays, **scalars)


def unsupported(name: str, **flags: Any) -> None:
    """Reject torch options that ember cannot honor (``differentiable=True``), with the reason."""
    for flag, value in flags.items():
        if value:
            raise NotImplementedError(f"{name}: {flag}=True is not supported by ember; drop the argument "
                                      "(ember's eager update is already fused)")
