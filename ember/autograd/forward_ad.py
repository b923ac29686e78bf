"""``torch.autograd.forward_ad`` for ember: dual tensors, computed by the double-vjp trick.

PyTorch carries a tangent along every op (one forward rule per op). ember has one reverse-mode engine
and no forward rules, so a dual tensor here is a tensor that *records onto the autograd graph* (a fresh
leaf that requires grad, or an alias of a primal that already requires grad), tagged with its level and
tangent. ``unpack_dual(y)`` computes y's tangent ``sum_i J_i t_i`` over the level's dual inputs by the
double-vjp trick used by ``ember.func.jvp``: ``b_i = J_i^T u`` for a cotangent ``u`` that requires grad,
then the vjp of ``u -> sum_i <b_i, t_i>`` is the jvp. Results are cached per output; exiting the level
drops every tangent. Cost: two backward passes per unpacked output (docs/func.md, "Forward mode").

Differences from PyTorch, by design: tensors computed from dual tensors report ``requires_grad=True``;
ops run under ``no_grad``/``inference_mode`` record nothing, so their results get no tangent (a warning
says so when ``unpack_dual`` runs with grad disabled); complex primals are refused.

Example:
    >>> import ember
    >>> import ember.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0]))
    ...     fwAD.unpack_dual(x ** 2).tangent.tolist()
    [2.0, 0.0]
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, NamedTuple

from ember import autograd
from ember.autograd import grad_mode
from ember.autograd.function import Function, FunctionCtx
from ember.creation import zeros_like
from ember.tensor import Tensor

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]


class _Level:
    """One entered forward-AD level: its dual inputs (with tangents) and the tangents computed so far."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.duals: list[tuple[Tensor, Tensor]] = []  # (dual tensor on the graph, tangent in the primal's dtype)
        self.cache: dict[int, tuple[Tensor, int, Tensor | None]] = {}  # id(y) -> (y, version, tangent)
        self.reals = False  # some primal requires grad: keep reverse-mode history through the duals


class _State(threading.local):
    def __init__(self) -> None:
        self.level: _Level | None = None
        self.computing = False  # a tangent computation is running: _StripTangent cuts its path


_STATE = _State()


class _StripTangent(Function):
    """Identity that cuts the dual path during tangent computations only: the primal ``unpack_dual``
    returns keeps its reverse-mode history to real leaves but carries no tangent, as in PyTorch."""

    @staticmethod
    def forward(ctx: FunctionCtx, y: Tensor) -> Tensor:
        return y.detach()  # a new tensor on the same data; the node is this Function's

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Any:
        return None if _STATE.computing else g


def enter_dual_level() -> int:
    """Enter a new forward-AD level and return its index (0: only one level at a time, as in PyTorch)."""
    if _STATE.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _STATE.level = _Level(0)
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the current level; every tangent of that level is dropped."""
    current = _STATE.level
    if current is None:
        raise RuntimeError("Dual level must be a positive number.")
    if level is not None and level != current.index:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    current.duals.clear()
    current.cache.clear()
    _STATE.level = None


def _level(level: int | None, what: str) -> _Level | None:
    """The level an API call addresses: None when no level exists (or a negative one is asked for)."""
    current = _STATE.level
    if level is None or (level < 0 and current is None):
        return current if level is None else None
    if current is None or level != current.index:
        raise RuntimeError(f"Invalid level given to {what}")
    return current


def _dual_of(t: Any, level: _Level) -> tuple | None:
    info = getattr(t, "_ember_dual", None)
    return info if info is not None and info[0] is level else None


def _depends_on_duals(t: Tensor, level: _Level) -> bool:
    """True when ``t`` has history to a dual tensor of ``level`` that is not cut by ``_StripTangent``."""
    duals = {id(d) for d, _ in level.duals}
    if id(t) in duals:
        return True
    stack, seen = [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, FunctionCtx) and node.fn_class is _StripTangent:
            continue
        for edge in node.next_edges:
            if edge is None:
                continue
            target = edge[0]
            if isinstance(target, Tensor):
                if id(target) in duals:
                    return True
            else:
                stack.append(target)
    return False


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A dual tensor: ``tensor``'s values with ``tangent`` as its forward gradient at the current level.

    Example:
        >>> with dual_level():
        ...     d = make_dual(ember.ones(2), ember.tensor([3.0, 4.0]))
        ...     unpack_dual(d * 2).tangent.tolist()
        [6.0, 8.0]
    """
    lv = _level(level, "_make_dual")
    if lv is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual(): expected Tensors for tensor and tangent, got {type(tensor).__name__} and "
                        f"{type(tangent).__name__}")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tensor.is_complex() or tangent.is_complex():
        raise NotImplementedError("make_dual(): complex dual tensors are not supported by ember's forward AD "
                                  "(double-vjp with conjugate Wirtinger gradients is not checked); use real "
                                  "and imaginary parts as separate real tensors")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if tangent.device != tensor.device:
        raise RuntimeError(f"make_dual(): the tangent is on {tangent.device} but the primal is on {tensor.device}; "
                           "move the tangent with tangent.to(primal.device)")
    if _depends_on_duals(tensor, lv):
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward gradient at the same "
                           f"level {lv.index} is not supported.")
    if tensor.requires_grad and grad_mode.is_grad_enabled():
        dual = tensor.view_as(tensor)  # an alias: reverse mode still reaches the primal's own leaves
        lv.reals = True
    else:
        dual = tensor.detach().requires_grad_(True)
    dual._ember_dual = (lv, tangent, tensor)
    lv.duals.append((dual, tangent.to(tensor.dtype)))
    return dual


class UnpackedDualTensor(NamedTuple):
    """``(primal, tangent)`` as returned by :func:`unpack_dual`; ``tangent`` is None for a non-dual tensor."""

    primal: Tensor
    tangent: Tensor | None


def _tangent(y: Tensor, lv: _Level) -> Tensor | None:
    """``sum_i J_i t_i`` for the level's duals by double vjp; None when y does not depend on any of them."""
    duals = [d for d, _ in lv.duals]
    with grad_mode.enable_grad():
        _STATE.computing = True
        try:
            u = zeros_like(y).requires_grad_(True)
            back = autograd.grad([y], duals, grad_outputs=[u], create_graph=True, allow_unused=True)
            pairs = [(b, t) for b, (_, t) in zip(back, lv.duals) if b is not None]
            if not pairs:
                return None
            live = [(b, t) for b, t in pairs if b.requires_grad]
            if not live:
                return zeros_like(y)
            keep = lv.reals or any(t.requires_grad for _, t in live)
            (found,) = autograd.grad([b for b, _ in live], [u], grad_outputs=[t for _, t in live],
                                     retain_graph=True, create_graph=keep, allow_unused=True)
        finally:
            _STATE.computing = False
    return zeros_like(y) if found is None else found


def unpack_dual(tensor: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at the current level; the tangent is computed on first use
    (double vjp, cached) and is None for tensors that do not depend on a dual tensor.

    Example:
        >>> with dual_level():
        ...     d = make_dual(ember.tensor([2.0]), ember.tensor([1.0]))
        ...     unpack_dual(d.exp()).tangent.tolist() == d.exp().tolist()
        True
    """
    lv = _level(level, "_fw_primal")
    if lv is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    own = _dual_of(tensor, lv)
    if own is not None:
        _, tangent, primal = own
        return UnpackedDualTensor(primal.view_as(primal) if lv.reals and primal.requires_grad else primal.detach(),
                                  tangent)
    if not tensor.requires_grad or not lv.duals:
        if lv.duals and not grad_mode.is_grad_enabled():
            warnings.warn("unpack_dual: gradient recording is disabled (no_grad/inference_mode); ember's forward "
                          "AD records on the autograd graph, so tensors computed there have no tangent",
                          stacklevel=2)
        return UnpackedDualTensor(tensor, None)
    cached = lv.cache.get(id(tensor))
    if cached is not None and cached[0] is tensor and cached[1] == tensor._version:
        tangent = cached[2]
    else:
        tangent = None
        if tensor.is_floating_point():
            tangent = _tangent(tensor, lv)
        lv.cache[id(tensor)] = (tensor, tensor._version, tangent)
    primal = _StripTangent.apply(tensor) if lv.reals else tensor.detach()
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """Context manager for a forward-AD level (also a decorator): enters on entry, exits (dropping every
    tangent) on exit. ``with dual_level(): ...`` gives the level index (0).

    Example:
        >>> with dual_level():
        ...     d = make_dual(ember.zeros(1), ember.ones(1))
        >>> unpack_dual(d).tangent is None
        True
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()

    def __call__(self, func: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with dual_level():
                return func(*args, **kwargs)

        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__doc__ = getattr(func, "__doc__", None)
        return wrapper
