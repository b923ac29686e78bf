"""``__torch_dispatch__``'s machinery: dispatch modes and dispatch subclasses as levels of the interpreter stack.

PyTorch calls ``__torch_dispatch__`` below autograd with ATen operators (``torch.ops.aten.mul.Tensor``). ember has no
C++ dispatcher; its ops are records (:mod:`ember.ops.registry`) run by :mod:`ember.ops.dispatch`, which already asks
the interpreter stack (:mod:`ember.interpreters`) who runs an op whenever anything sits above eager. So:

* a ``TorchDispatchMode`` entered with ``with`` is a :class:`ModeLevel` pushed on this thread's stack (as vmap's
  batching level is); while none is pushed and no dispatch subclass class is alive, dispatch pays nothing new
  (its existing ``if GRAPHS.count:`` test is the only check);
* a tensor subclass defining ``__torch_dispatch__`` makes :func:`ember.interpreters.find` answer
  :data:`SUBCLASS_LEVEL` for ops taking one of its objects (counted process-wide while such a class lives);
* a level runs a record with :func:`run`: autograd is recorded above (the record's own vjp, once), and below,
  with grad recording off, the record is *presented* as the ATen calls torch would make
  (:mod:`ember._aten_present`: ``linear`` is ``aten.t`` + ``aten.addmm``); each call goes to the innermost mode,
  which runs with itself popped, then to the subclasses' ``__torch_dispatch__``, then to ember's implementation.

Example:
    >>> import ember
    >>> from ember.utils._python_dispatch import TorchDispatchMode
    >>> class Names(TorchDispatchMode):
    ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    ...         seen.append(str(func)); return func(*args, **(kwargs or {}))
    >>> seen = []
    >>> with Names():
    ...     _ = ember.ones(2, 3) @ ember.ones(3, 4)
    >>> seen
    ['aten.mm.default']
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.device import CPU, to_device
from ember.interpreters import EAGER, Interpreter
from ember.ops import dispatch, layout as _layout

Tensor: Any = None  # ember.tensor.Tensor, bound by ember.tensor (the core's seam, as dispatch's)


class ModeLevel(Interpreter):
    """The stack level of one entered ``TorchDispatchMode``."""

    traces = False
    watches = True  # a mode sees the backward's ops: the engine keeps its ember-op gradient rules

    def __init__(self, mode: Any) -> None:
        self.mode = mode

    def process(self, op: Any, args: tuple, attrs: dict) -> Any:
        return run_record(op, args, attrs)

    def __repr__(self) -> str:
        return f"ModeLevel({type(self.mode).__name__})"


class _SubclassLevel(Interpreter):
    """Ops on a dispatch subclass's objects (never pushed: :func:`ember.interpreters.find` answers it). Also the
    autograd engine's way in (``interpreters.SUBCLASSES.level``, so the engine imports nothing of this module): the
    seed ``ones_like`` and the leaves' ``detach``/``add_`` are ATen calls a mode or a subclass sees, as in torch."""

    traces = False

    def process(self, op: Any, args: tuple, attrs: dict) -> Any:
        return run_record(op, args, attrs)

    def owns(self, t: Any) -> bool:
        """Whether autograd's own tensor work on ``t`` goes to a level (call only when ``GRAPHS.count``)."""
        return active((t,), None)

    def seed(self, out: Any) -> Any:
        """``loss.backward()``'s implicit gradient: ``aten.ones_like(out)``."""
        with grad_mode.no_grad():
            return present(_aten("ones_like"), (out,), {"pin_memory": False, "memory_format": sys.modules["ember"].preserve_format})

    def write(self, t: Any, result: Any) -> bool:
        """An in-place op's write of array ``result`` into ``t``: ``aten.copy_(t, result)``, seen by the mode or
        subclass (torch's functionalized form: ``sub_`` is ``sub`` then ``copy_``). True: the write is done."""
        source = Tensor._make(result, t._device, False)
        with grad_mode.no_grad():
            present(_aten("copy_"), (t, source), {})
        return True

    def accumulate(self, leaf: Any, grad: Any) -> None:
        """``leaf.grad``: ``aten.detach(grad)`` the first time, then ``aten.add_``-like accumulation (a new sum)."""
        with grad_mode.no_grad():
            if leaf.grad is None:
                leaf.grad = present(_aten("detach"), (grad,), {})
            else:
                leaf.grad = present(_aten("add", "Tensor"), (leaf.grad, grad), {})

    def __repr__(self) -> str:
        return "SUBCLASS_LEVEL"


SUBCLASS_LEVEL = _SubclassLevel()
_LOCK = threading.Lock()
_LIVE: weakref.WeakSet = weakref.WeakSet()  # alive classes with their own __torch_dispatch__
interpreters.SUBCLASSES.types = _LIVE
interpreters.SUBCLASSES.level = SUBCLASS_LEVEL


def is_dispatch_type(kind: type) -> bool:
    """Whether ``kind`` defines a ``__torch_dispatch__`` of its own (``Tensor`` and ember's classes do not)."""
    return kind in _LIVE


def subclass_defined(cls: type) -> None:
    """``Tensor.__init_subclass__``: a class with ``__torch_dispatch__`` turns the subclass level on while it lives."""
    impl = getattr(cls, "__torch_dispatch__", None)
    if impl is None or getattr(impl, "__func__", impl) is _disabled:
        return
    own = [base for base in cls.__mro__ if base is not Tensor and issubclass(base, Tensor)]
    for name, method in _WRAPPER_METHODS.items():  # a wrapper's array is a broadcast zero: never read its values
        if not any(name in vars(base) for base in own):
            setattr(cls, name, method)
    with _LOCK:
        _LIVE.add(cls)
        interpreters.SUBCLASSES.count += 1
        interpreters.graph_opened()  # dispatch asks the stack while one lives (its one existing check)
    weakref.finalize(cls, _subclass_gone)


def _subclass_gone() -> None:
    with _LOCK:
        interpreters.SUBCLASSES.count -= 1
        interpreters.graph_closed()


def _disabled(cls: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
    """``torch._C._disabled_torch_dispatch_impl``: a class whose ``__torch_dispatch__`` is this is a plain tensor."""
    return NotImplemented


# ---- modes ---------------------------------------------------------------------------------------------------
def push_mode(mode: Any) -> None:
    interpreters.push(ModeLevel(mode))


def pop_mode(mode: Any = None) -> Any:
    """Remove ``mode`` (default: the innermost mode) from this thread's stack and return it."""
    for level in reversed(interpreters.stack()):
        if isinstance(level, ModeLevel) and (mode is None or level.mode is mode):
            interpreters.pop(level)
            return level.mode
    raise RuntimeError("no TorchDispatchMode is active on this thread" if mode is None else
                       f"{mode!r} is not an active TorchDispatchMode on this thread")


def modes() -> list:
    """The active modes of this thread, outermost first (suspended ones, whose handlers run, excluded)."""
    return [level.mode for level in interpreters.stack() if isinstance(level, ModeLevel)]


class hidden:
    """Inside, ops run below every dispatch mode of this thread (work a presentation does that torch would not
    show, e.g. recounting a loss's total weight)."""

    def __enter__(self) -> "hidden":
        lowest = next((level for level in interpreters.stack() if isinstance(level, ModeLevel)), None)
        self._above = interpreters.suspend(lowest) if lowest is not None else []
        return self

    def __exit__(self, *exc: Any) -> None:
        interpreters.resume(self._above)


# ---- where an ATen call goes -----------------------------------------------------------------------------------
def _flat(args: tuple, kwargs: dict | None) -> list:
    out: list = []
    for a in list(args) + list((kwargs or {}).values()):
        if type(a) in (list, tuple):
            out.extend(a)
        else:
            out.append(a)
    return out


def _subclass_args(args: tuple, kwargs: dict | None) -> list:
    """Arguments of dispatch subclasses, one per type, subclasses before their bases (as torch orders them)."""
    found: list = []
    kinds: list = []
    for a in _flat(args, kwargs):
        kind = type(a)
        if kind in kinds or kind not in _LIVE:
            continue
        index = next((i for i, old in enumerate(kinds) if issubclass(kind, old)), len(kinds))
        kinds.insert(index, kind)
        found.insert(index, a)
    return found


def active(args: tuple, kwargs: dict | None) -> bool:
    """Whether an ATen call on these arguments goes to a level (a mode, or a dispatch subclass argument)."""
    if not interpreters.GRAPHS.count:
        return False
    top = interpreters.current()
    if isinstance(top, ModeLevel):
        return True
    return top is EAGER and interpreters.SUBCLASSES.count > 0 and bool(_subclass_args(args, kwargs))


def present(func: Any, args: tuple, kwargs: dict | None = None) -> Any:
    """Hand one ATen call to the innermost mode (popped while it runs), else to the subclasses' handlers, else run
    ember's implementation of ``func``."""
    kwargs = kwargs or {}
    top = interpreters.current()
    if isinstance(top, ModeLevel):
        above = interpreters.suspend(top)
        try:
            result = top.mode.__torch_dispatch__(func, tuple(type(a) for a in _subclass_args(args, kwargs)),
                                                  args, kwargs)
            if result is NotImplemented:  # torch goes on to the subclasses with the mode still popped
                result = _to_subclasses(func, args, kwargs, top.mode)
        finally:
            interpreters.resume(above)
        return result
    return _to_subclasses(func, args, kwargs, None)


def _to_subclasses(func: Any, args: tuple, kwargs: dict, mode: Any) -> Any:
    overloaded = _subclass_args(args, kwargs) if interpreters.SUBCLASSES.count else []
    if not overloaded:
        if mode is not None:
            raise TypeError(f"Multiple dispatch failed for {func}: mode {mode!r} returned NotImplemented and no "
                            "tensor subclass argument handles it")
        return func._bottom(args, kwargs)
    types = tuple(type(a) for a in overloaded)
    for arg in overloaded:
        result = type(arg).__torch_dispatch__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"Multiple dispatch failed for {func}; all __torch_dispatch__ handlers returned NotImplemented: "
                    f"{[t.__name__ for t in types]}")


# ---- one record at a level ---------------------------------------------------------------------------------------
def run(op: Any, args: tuple, attrs: dict, body: Callable[[Callable], Any]) -> Any:
    """Run ``body(present)`` (the ATen calls standing for record ``op``) with grad recording off, then record
    autograd for ``op`` on what it returned, as torch's autograd layer sits above ``__torch_dispatch__``."""
    state = grad_mode.STATE
    needs = state.enabled and op.vjp is not None and any(
        isinstance(a, Tensor) and a._requires_grad for a in args)
    previous = state.enabled
    state.enabled = False
    try:
        out = body(present)
    finally:
        state.enabled = previous
    single = not isinstance(out, tuple)
    outs = (out,) if single else out
    if any(o is a for o in outs for a in args):  # a handler returned an input: autograd needs a new object
        outs = tuple(_alias(o) if any(o is a for a in args) else o for o in outs)
        out = outs[0] if single else outs
    first = outs[0]
    if op.view and type(first) is Tensor and getattr(first._data, "base", None) is not None \
            and isinstance(args[0], Tensor):
        dispatch._share_version(first, args[0], op, attrs)
    if needs and len(outs) == op.num_outputs and all(isinstance(o, Tensor) for o in outs):
        dispatch.record(op, outs, args, attrs)
        if any(type(o) is not Tensor for o in outs):
            _keep_saved_outputs(outs)
    return out


def _keep_saved_outputs(outs: tuple) -> None:
    """Autograd keeps a saved output as its array and rebuilds a plain Tensor on unpack; a subclass's output (a
    wrapper, whose array is a broadcast zero) must come back as itself, so its saved slot holds the object."""
    node = outs[0].grad_fn
    saved = getattr(node, "saved_out", None)
    if saved is None:
        return
    for slot, o in zip(saved if isinstance(saved, tuple) else (saved,), outs):
        if slot is not None and type(o) is not Tensor:
            slot.tensor = o


def _alias(t: Any) -> Any:
    """A new tensor object of ``t``'s class over the same data (no op dispatched)."""
    out = object.__new__(type(t))
    for slot in ("_data", "_device", "_requires_grad", "_output_nr", "_vc", "_base"):
        object.__setattr__(out, slot, getattr(t, slot))
    for name, value in getattr(t, "__dict__", {}).items():
        object.__setattr__(out, name, value)
    out.grad = None
    out.grad_fn = None
    out._hooks = None
    out._retains_grad = False
    out._requires_grad = False
    return out


# The record -> ATen table and the overloads (ember/_aten_present.py binds them when imported: that module imports
# this one, so the link goes that way; ``import ember`` imports it through ember.custom_ops.namespaces).
TABLE: dict = {"presentation": None, "aten": None}


def _aten(name: str, overload: str = "default") -> Any:
    return TABLE["aten"](name, overload)


def run_record(op: Any, args: tuple, attrs: dict) -> Any:
    """A level's answer for record ``op``: its ATen presentation (:mod:`ember._aten_present`), autograd above."""
    return run(op, args, attrs, TABLE["presentation"](op, args, attrs))


# ---- wrapper subclasses ------------------------------------------------------------------------------------------
def make_wrapper_subclass(cls: type, size: Any, strides: Any = None, storage_offset: Any = None,
                          memory_format: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
                          pin_memory: bool = False, requires_grad: bool = False, **_: Any) -> Any:
    """``Tensor._make_wrapper_subclass``: a ``cls`` object with a size, dtype and device but no data of its own
    (its ``__torch_dispatch__`` computes on whatever it wraps). Its array is a read-only broadcast of one zero, so
    shape questions answer without memory; ``stride()`` reports ``strides`` (default: contiguous)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_wrapper_subclass(): cls must be a subclass of Tensor, not {cls!r}")
    shape = tuple(int(s) for s in size)
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    dev = CPU if device is None else to_device(device)
    xp = dev.xp
    data = xp.broadcast_to(xp.zeros((), dtype=dt.np), shape)
    out = Tensor._make.__func__(cls, data, dev, bool(requires_grad))
    if strides is None:
        strides = _layout.contiguous_strides(shape)
    out._wrapper_strides = tuple(int(s) for s in strides)
    return out


def _wrapper_stride(self: Any, dim: int | None = None) -> Any:
    strides = self.__dict__.get("_wrapper_strides")
    if strides is None:
        return Tensor.stride(self, dim)
    return strides if dim is None else strides[self._dim(dim, "stride")]


def _is_wrapper(t: Any) -> bool:
    return "_wrapper_strides" in t.__dict__


def _wrapper_item(self: Any) -> Any:
    """``item()``: torch's ``aten._local_scalar_dense``, which the subclass's ``__torch_dispatch__`` answers."""
    if not _is_wrapper(self):
        return Tensor.item(self)
    with grad_mode.no_grad():
        return present(_aten("_local_scalar_dense"), (self,), {})


def _no_data(name: str) -> Any:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_wrapper(self):
            return getattr(Tensor, name)(self, *args, **kwargs)
        raise RuntimeError(f"{name}(): {type(self).__name__} is a wrapper subclass (made by _make_wrapper_subclass) "
                           "with no data of its own; read the tensor it wraps, or unwrap it in __torch_dispatch__")
    refuse.__name__ = name
    return refuse


def _wrapper_repr(self: Any) -> str:
    if not _is_wrapper(self):
        return Tensor.__repr__(self)
    return (f"{type(self).__name__}(size={tuple(self._data.shape)}, dtype={self.dtype}"
            f"{', requires_grad=True' if self._requires_grad else ''}) (a wrapper subclass: its values live in the "
            "tensors it wraps)")


_WRAPPER_METHODS = {
    "__repr__": _wrapper_repr, "__str__": _wrapper_repr,
    "stride": _wrapper_stride, "item": _wrapper_item,
    "__float__": lambda self: float(_wrapper_item(self)), "__int__": lambda self: int(_wrapper_item(self)),
    "__bool__": lambda self: bool(_wrapper_item(self)) if _is_wrapper(self) else Tensor.__bool__(self),
    "tolist": _no_data("tolist"), "numpy": _no_data("numpy"), "__array__": _no_data("__array__"),
}
