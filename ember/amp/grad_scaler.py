"""``ember.amp.GradScaler``: dynamic loss scaling with PyTorch 2.x's semantics (torch.amp.GradScaler).

Multiply the loss by a large scale before ``backward`` so float16 gradients do not underflow, divide
the gradients by it before the optimizer step, skip the step when any gradient is inf/NaN, and adapt
the scale: ``update()`` multiplies it by ``backoff_factor`` after a skipped step and by
``growth_factor`` after ``growth_interval`` consecutive good ones (never growing it to inf).

Example:
    >>> import ember
    >>> w = ember.ones(2, requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1)
    >>> scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
    >>> scaler.scale((w * 3).sum()).backward()
    >>> scaler.step(opt); scaler.update()
    >>> w.tolist(), scaler.get_scale()
    ([0.699999988079071, 0.699999988079071], 1024.0)
"""
from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _ember() -> Any:
    import ember  # late: ember.amp is imported while ember itself is loading

    return ember


class _MultiDeviceReplicator:
    """Lazily serves copies of a tensor to the devices that ask for it (one copy per device)."""

    def __init__(self, master: Any) -> None:
        self.master = master
        self._per_device: dict = {}

    def get(self, device: Any) -> Any:
        copy = self._per_device.get(device)
        if copy is None:
            copy = self._per_device[device] = self.master.to(device=device, copy=True)
        return copy


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients, adapt the scale.

    Args:
        device: device type of the scaler (``"cpu"`` or ``"cuda"``); the scale itself lives on the
            device of the first tensor passed to :meth:`scale`.
        init_scale: initial scale factor.
        growth_factor: multiplies the scale after ``growth_interval`` consecutive unskipped steps (> 1).
        backoff_factor: multiplies the scale after a step with inf/NaN gradients (< 1).
        growth_interval: consecutive unskipped steps before the scale grows.
        enabled: ``False`` makes :meth:`step` a plain ``optimizer.step()`` and everything else a no-op.
    """

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        from ember.amp.autocast_mode import _check_device_type

        self._device = _check_device_type(device, "GradScaler")
        self._enabled = enabled
        if self._device == "cuda" and enabled and not _ember().cuda.is_available():
            warnings.warn("ember.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("GradScaler: the growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("GradScaler: the backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Any = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Any = None
            self._per_optimizer_states: dict = defaultdict(_refresh_per_optimizer_state)

    # ---- scale ------------------------------------------------------------------------------------
    def _check_scale_growth_tracker(self, funcname: str) -> tuple:
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier in the "
               "iteration: call scaler.scale(loss).backward() before scaler.%s(...)." % funcname)
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device: Any) -> None:
        ember = _ember()
        self._scale = ember.full((), self._init_scale, dtype=ember.float32, device=device)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=ember.int32, device=device)

    def scale(self, outputs: Any) -> Any:
        """Multiply a tensor (or a nested list/tuple of tensors) by the scale factor."""
        if not self._enabled:
            return outputs
        tensor_cls = _ember().Tensor
        if isinstance(outputs, tensor_cls):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
        stash: list = []

        def apply_scale(value: Any) -> Any:
            if isinstance(value, tensor_cls):
                if not stash:
                    if self._scale is None:
                        self._lazy_init_scale_growth_tracker(value.device)
                    stash.append(_MultiDeviceReplicator(self._scale))
                return value * stash[0].get(value.device)
            if isinstance(value, abc.Iterable):
                scaled = map(apply_scale, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got "
                             f"{type(value).__name__}")

        return apply_scale(outputs)

    # ---- unscale ----------------------------------------------------------------------------------
    def _unscale_grads_(self, optimizer: Any, inv_scale: Any, found_inf: Any, allow_fp16: bool) -> dict:
        ember = _ember()
        per_device_inv_scale = _MultiDeviceReplicator(inv_scale)
        per_device_found_inf = _MultiDeviceReplicator(found_inf)
        grads_by_device: dict = defaultdict(list)
        for group in optimizer.param_groups:
            for param in group["params"]:
                if not isinstance(param, ember.Tensor):
                    raise AssertionError(f"GradScaler: expected param to be an ember Tensor, got "
                                         f"{type(param).__name__}")
                if param.grad is None:
                    continue
                if not allow_fp16 and param.grad.dtype is ember.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                grads_by_device[param.grad.device].append(param.grad)
        with ember.no_grad():
            for device, grads in grads_by_device.items():
                found = per_device_found_inf.get(device)
                inv = per_device_inv_scale.get(device)
                for grad in grads:
                    _non_finite_check_and_unscale_(grad, found, inv)
        return per_device_found_inf._per_device

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale (in place) and record whether any is inf/NaN.

        Optional: :meth:`step` unscales when it was not called. Call it once per optimizer per step, e.g.
        before clipping gradients; a second call before :meth:`update` raises.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        ember = _ember()
        # The reciprocal in float64, rounded once to float32 (PyTorch's scale.double().reciprocal().float()).
        inv_scale = ember.full((), 1.0 / float(self._scale.item()), dtype=ember.float32, device=self._scale.device)
        found_inf = ember.full((), 0.0, dtype=ember.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        state["stage"] = OptState.UNSCALED

    # ---- step / update ----------------------------------------------------------------------------
    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless :meth:`unscale_` ran) and call ``optimizer.step()`` unless a gradient is inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer (it has no gradients: did "
                                 "backward run on the scaled loss?).")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: Any = None) -> None:
        """Back off the scale after a skipped step, grow it after ``growth_interval`` good ones, or set it."""
        if not self._enabled:
            return
        scale, growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element ember float tensor with "
                          "requires_grad=False.")
                if not isinstance(new_scale, _ember().Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [found.to(device=scale.device) for state in self._per_optimizer_states.values()
                          for found in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update(): call scaler.step(optimizer) "
                                     "(or scaler.unscale_(optimizer)) first.")
            found_inf = sum(float(f.item()) for f in found_infs)
            _update_scale_(scale, growth_tracker, found_inf, self._growth_factor, self._backoff_factor,
                           self._growth_interval)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ---- accessors and state ----------------------------------------------------------------------
    def _get_scale_async(self) -> Any:
        return self._scale

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())
        return 0

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker``
        ({} when disabled). Take it after :meth:`update`."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a :meth:`state_dict` (a no-op when this scaler is disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            # The tensors are rebuilt lazily from these plain numbers.
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_per_optimizer_states"] = {}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.__dict__.get("_enabled"):
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)


def _non_finite_check_and_unscale_(grad: Any, found_inf: Any, inv_scale: Any) -> None:
    """``found_inf = 1`` if ``grad`` has an inf/NaN; ``grad *= inv_scale`` in float32 arithmetic
    (PyTorch's _amp_foreach_non_finite_check_and_unscale_), without a host sync."""
    bad = grad.isfinite().logical_not().any().to(found_inf.dtype)
    found_inf.copy_(found_inf.maximum(bad))
    if grad.dtype.is_floating_point and grad.dtype.itemsize == 2:  # compute in float32, round once
        grad.copy_((grad.float() * inv_scale).to(grad.dtype))
    else:
        grad.mul_(inv_scale)


def _update_scale_(scale: Any, growth_tracker: Any, found_inf: float, growth_factor: float,
                   backoff_factor: float, growth_interval: int) -> None:
    """PyTorch's _amp_update_scale_ (CPU kernel): float32 scale times a double factor, rounded to float32."""
    import numpy as np

    current = float(scale.item())
    if found_inf:
        scale.fill_(float(np.float32(current * backoff_factor)))
        growth_tracker.fill_(0)
        return
    successful = int(growth_tracker.item()) + 1
    if successful == growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(current * growth_factor)
        if np.isfinite(grown):  # never grow the scale past float32's range to inf
            scale.fill_(float(grown))
        growth_tracker.fill_(0)
    else:
        growth_tracker.fill_(successful)
