"""Optimizer base class: parameter groups, per-parameter state, the step loop, state dicts, hooks.

Mirrors ``torch.optim.Optimizer`` (2.x): ``param_groups`` is a list of dicts holding ``params`` plus
per-group options (defaults fill the gaps); ``state`` maps each parameter tensor to a dict of its
buffers; ``state_dict()`` replaces parameters with integer indices so it can be saved and loaded
into a fresh optimizer over the same model.

An optimizer is two small functions (see ``adam.py``): ``init_state(p, group)`` makes a parameter's
buffers, and ``update(p, grad, state, hp)`` is its update, written once in ember tensor ops in
PyTorch's operation order. The base class owns everything else: the loop over groups and parameters,
lazy state, ``maximize``, closures, hooks. There is no second copy of the math: eagerly, a group's
updates run as one compiled graph (:mod:`ember.optim.compiled_update`: the same ``update`` traced once,
its elementwise chains fused into one loop per parameter), and inside a traced training step
(``ember.compile``) the ops are recorded like any others.

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
from collections import OrderedDict, defaultdict
from itertools import chain
from typing import Any, Callable, Iterable

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.ops.complex_ops import view_as_complex, view_as_real
from ember.optim.compiled_update import CompiledUpdates
from ember.optim.fused_ops import add_scaled
from ember.optim.hyper import Hyper, apply_updates, to_scalar  # noqa: F401 (to_scalar: re-exported)
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
        if not self._optimizer_step_pre_hooks and not self._optimizer_step_post_hooks:
            self._in_step = True
            try:
                return step(self, *args, **kwargs)
            finally:
                self._in_step = False
        args = (self, *args)  # torch's hooks see the optimizer as args[0]
        for hook in tuple(self._optimizer_step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step} must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        self._in_step = True
        try:
            out = step(*args, **kwargs)
        finally:
            self._in_step = False
        for hook in tuple(self._optimizer_step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._ember_step_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def use_fast_path() -> bool:
    """True when a group's update may run as its compiled graph (eager mode, no graph being built
    around the step, not disabled by ``Optimizer.fast_path = False``)."""
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

    #: Class-wide switch for the compiled eager update (off: ``update`` runs op by op; tests check both).
    fast_path: bool = True
    #: Whether ``update`` can be traced (no ``.item()`` or Python branches on values); if not, it
    #: always runs op by op.
    compile_update: bool = True
    #: Options ``update`` reads as Python values even when compiled (a loop count): baked into the compiled
    #: update and part of its key, instead of being 0-d tensor inputs like ``lr``.
    static_options: tuple[str, ...] = ()
    #: The update as a few NumPy passes (:mod:`ember.optim.numpy_kernels`), run instead of the compiled graph
    #: when numba is not installed; used only while ``update`` is the one it stands for (``kernel.update``).
    numpy_kernel: Any = None
    #: Whether ``update`` itself handles ``capturable=True`` (Adam/AdamW); for the others the step refuses
    #: parameters off a CUDA device as torch's does.
    capturable_update: bool = False
    #: Whether the update sees a complex parameter as ``view_as_real`` (torch's adaptive optimizers; SGD's ops
    #: are linear and torch runs them on the complex tensor, with complex rounding).
    complex_as_real: bool = True

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
        # The compiled updates (ember/optim/compiled_update.py); never part of the state dict.
        self._compiled = CompiledUpdates()
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
        if "_compiled" in self.__dict__:
            self._compiled = CompiledUpdates()

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

    # ---- what a subclass says: its state and its update ------------------------------------------
    @staticmethod
    def init_state(p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        """The buffers of parameter ``p`` before its first update (``{}``: none, or made lazily)."""
        return {}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict[str, Any], hp: "Hyper") -> None:
        """Update ``p`` (and ``state``) in place from ``grad`` (already negated under ``maximize``), in
        ember ops. Read options through ``hp``: see :class:`Hyper` for which are numbers and which decide."""
        raise NotImplementedError(f"{type(p).__name__} optimizer does not implement update()")

    @_wrap_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update the parameters once; ``closure`` re-evaluates the model and returns the loss.

        Parameters without ``.grad`` are skipped (and get no state). Each group's updates run as one
        compiled graph when :func:`use_fast_path` allows and the class's ``update`` can be traced.
        """
        loss = self._run_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if not params:
                    continue
                if group.get("capturable") and not self.capturable_update:
                    check_capturable_devices(params)
                states = []
                empty = False
                for p in params:
                    state = self.state[p]
                    if not state:
                        state.update(self.init_state(p, group))
                        empty = empty or not state
                    states.append(state)
                kernel = self.numpy_kernel
                if kernel is not None and kernel.update is not self.update:
                    kernel = None  # a subclass with its own update: the kernel is not its math
                if not (self.compile_update and use_fast_path()
                        and self._compiled.run(self.update, group, params, states, self.static_options, kernel)):
                    # (the compiled update declines complex parameters: torch steps them as their real views)
                    if self.complex_as_real and any(p.dtype.is_complex for p in params):
                        self._step_as_real(group, params, states)
                    else:
                        apply_updates(self.update, params, [p.grad for p in params], states, Hyper(group))
                if empty:  # no buffers (SGD without momentum): no state entry, as torch
                    for p, state in zip(params, states):
                        if not state:
                            del self.state[p]
        return loss

    def _step_as_real(self, group: dict[str, Any], params: list, states: list) -> None:
        """The update on ``view_as_real`` of each complex parameter, gradient and buffer, as torch's optimizers
        step them (each real and imaginary part its own element: Adam's second moment is per part, not
        ``|g|^2``); a buffer the update makes (SGD's momentum) is kept as the complex view of it."""
        reals, grads, views = [], [], []
        for p, state in zip(params, states):
            if not p.dtype.is_complex:
                reals.append(p), grads.append(p.grad), views.append(state)
                continue
            reals.append(view_as_real(p))
            grads.append(view_as_real(p.grad))
            views.append({k: view_as_real(v) if isinstance(v, Tensor) and v.dtype.is_complex else v
                          for k, v in state.items()})
        apply_updates(self.update, reals, grads, views, Hyper(group))
        for p, state, view in zip(params, states, views):
            if view is state:
                continue
            for key, value in view.items():
                if key not in state or not (isinstance(state[key], Tensor) and state[key].dtype.is_complex):
                    complex_shaped = (isinstance(value, Tensor) and value.dim() == p.dim() + 1
                                      and value.shape[-1] == 2 and not value.dtype.is_complex)
                    state[key] = view_as_complex(value) if complex_shaped else value

    @staticmethod
    def _run_closure(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with grad_mode.enable_grad():
            return closure()

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

    def _hooks(self, kind: str) -> OrderedDict:
        """The state-dict hook table ``kind`` (made on first use: pickled optimizers from before have none)."""
        table = self.__dict__.get(kind)
        if table is None:
            table = self.__dict__[kind] = OrderedDict()
        return table

    def _register(self, kind: str, hook: Callable, prepend: bool) -> _Handle:
        table = self._hooks(kind)
        handle = _Handle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> _Handle:
        """``hook(optimizer)`` runs before ``state_dict()`` builds the dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> _Handle:
        """``hook(optimizer, state_dict)`` runs on the built dict; it may return a new one."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> _Handle:
        """``hook(optimizer, state_dict)`` runs before loading (on a shallow copy); it may return a new dict."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> _Handle:
        """``hook(optimizer)`` runs after ``load_state_dict()``."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    # ---- state dicts ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}`` (tensors not copied)."""
        for hook in tuple(self._hooks("_optimizer_state_dict_pre_hooks").values()):
            hook(self)
        out = self._build_state_dict()
        for hook in tuple(self._hooks("_optimizer_state_dict_post_hooks").values()):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    def _build_state_dict(self) -> dict[str, Any]:
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

        state_dict = dict(state_dict)  # (a shallow copy, as torch: the hooks may change it)
        for hook in tuple(self._hooks("_optimizer_load_state_dict_pre_hooks").values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self._load_state_dict(state_dict)
        for hook in tuple(self._hooks("_optimizer_load_state_dict_post_hooks").values()):
            hook(self)

    def _load_state_dict(self, state_dict: dict[str, Any]) -> None:
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
        self._compiled = CompiledUpdates()  # the graphs hold the old buffers

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




def check_capturable_devices(params: list) -> None:
    """``capturable=True`` needs parameters on a CUDA device: torch's AssertionError otherwise."""
    if interpreters.tracing():
        return
    for p in params:
        if p.device.type != "cuda":
            raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                                 f"['cuda'] (parameter on {p.device}); drop capturable=True on the CPU")


def tensor_option(value: Any, name: str) -> Any:
    """An option given as a Tensor (``lr=ember.tensor(0.01)``) stays one in ``param_groups``, as torch keeps it
    (the update reads its value); it must hold one element."""
    if isinstance(value, Tensor) and value.numel() != 1:
        raise ValueError(f"Tensor {name} must be 1-element")
    return value


def with_weight_decay(grad: Tensor, param: Tensor, hp: Hyper) -> Tensor:
    """``grad + weight_decay * param`` (the L2 penalty, torch's order) when ``weight_decay`` is nonzero."""
    if not hp.nonzero("weight_decay"):
        return grad
    return add_scaled(grad, param, hp["weight_decay"])  # grad.add(param, alpha=weight_decay): one rounding


def unsupported(name: str, **flags: Any) -> None:
    """Reject torch options that ember cannot honor (``differentiable=True``), with the reason."""
    for flag, value in flags.items():
        if value:
            raise NotImplementedError(f"{name}: {flag}=True is not supported by ember; drop the argument "
                                      "(ember's eager update is already fused)")
