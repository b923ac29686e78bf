"""The ``__torch_function__`` protocol's machinery (the public names are in :mod:`ember.overrides`).

PyTorch lets a type take over any call of its public API: a ``Tensor`` subclass, or any class with a
``__torch_function__`` classmethod (the "ScalarTensor" of PyTorch's docs), and a ``TorchFunctionMode`` pushed with
``with mode:`` see ``func, types, args, kwargs`` of every overridable call before it runs. How ember keeps a
program without any of them as fast as before:

* **Public functions** (``ember.*``, ``ember.nn.functional.*``, ``linalg``, ``special``, ``fft``; creation and
  settings functions excepted, as torch's ``get_ignored_functions``) are wrapped once at import
  (:func:`install`). A wrapper reads one flag (``SWITCH.on``: a mode is active or a Tensor subclass with its own
  ``__torch_function__`` exists) and otherwise calls the function. A non-Tensor class never passes ember's own
  checks, so its objects are looked for only when the call raises (no cost on success).
* **Tensor methods, properties and operators** are not wrapped on ``Tensor``: a subclass gets its own wrappers
  when it is defined (``Tensor.__init_subclass__`` calls :func:`subclass_defined`), so plain tensors run the
  methods they always ran. While a mode is active on any thread, or any override lives (a user's overriding
  subclass, an fx tracer, a Tensor-like class met by a function or an operator: :func:`foreign_seen`), ``Tensor``
  itself carries the wrappers (each asks its own thread's mode stack; with no mode, a call whose arguments are
  exact tensors and numbers runs at once), so ``plain.add(sub)`` dispatches as torch's; the last one gone restores
  the plain methods. An operator given an operand no op takes asks its ``__torch_function__`` on the failure path
  (:func:`operator_fallback`).
* ``func`` passed to ``__torch_function__`` is the public object (``ember.add``, ``Tensor.add``; operators map to
  their named method as torch's: ``a + b`` is ``Tensor.add``, ``a * b`` is ``Tensor.mul``), so
  ``func is torch.add`` and ``HANDLED_FUNCTIONS[func]`` work as in PyTorch.

State is per thread (modes, ``DisableTorchFunction``/``DisableTorchFunctionSubclass``), as torch's.
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading
import weakref
from typing import Any, Callable, Iterable

from ember import _nonbinding, _numpy_names, dtypes
from ember.autograd import grad_mode
from ember.ops import views


def disabled_torch_function_impl(func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
    """``torch._C._disabled_torch_function_impl``: a class whose ``__torch_function__`` is this one is treated as a
    plain tensor (``nn.Parameter``'s)."""
    return func(*args, **(kwargs or {}))


class _Switch:
    """Process-wide: is any override possible at all? (One attribute read on every wrapped call.)"""

    __slots__ = ("on", "carry", "modes", "subclasses", "tracers", "foreign")

    def __init__(self) -> None:
        self.on = False
        self.carry = False  # Tensor itself carries the overridable methods (see _tensor_methods_overridable)
        self.modes = 0  # modes entered and not exited, over all threads
        self.subclasses: weakref.WeakSet = weakref.WeakSet()  # live Tensor subclasses that override
        self.tracers: weakref.WeakSet = weakref.WeakSet()  # live fx tracers (their Proxies override)
        self.foreign: weakref.WeakSet = weakref.WeakSet()  # live non-Tensor classes with __torch_function__ seen

    def update(self) -> None:
        # iterate, not len(): inside a dying class's finalizer the set may still count its dead reference
        users = any(True for c in self.subclasses if not c.__module__.startswith("ember."))
        carry = self.modes > 0 or users or any(True for _ in self.tracers) or any(True for _ in self.foreign)
        self.on = carry or any(True for _ in self.subclasses)  # (ember's NestedTensor counts while one lives)
        if carry != self.carry and _TENSOR is not None:
            self.carry = carry
            _tensor_methods_overridable(carry)


SWITCH = _Switch()
_LOCK = threading.RLock()


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.modes: list = []  # TorchFunctionMode stack, innermost last
        self.no_subclass = 0  # DisableTorchFunctionSubclass depth
        self.no_torch_function = 0  # DisableTorchFunction depth (modes too)


STATE = _ThreadState()
_PLAIN: set = set()  # filled by bind(): Tensor itself (exact tensors never override)


def _is_overloaded_type(kind: type) -> bool:
    if kind in _PLAIN:
        return False
    impl = getattr(kind, "__torch_function__", None)
    return impl is not None and getattr(impl, "__func__", impl) is not disabled_torch_function_impl


def overloaded_args(relevant: Iterable[Any], with_tensor: bool = False) -> list:
    """Arguments whose types override, one per type, subclasses before their bases, else left to right (NEP 18).
    ``with_tensor``: exact Tensors count too (torch's functions written in Python report ``Tensor`` in ``types``);
    they never make a call dispatch on their own (the caller checks for another type first)."""
    found: list = []
    kinds: list = []
    for arg in relevant:
        kind = type(arg)
        if kind in kinds or not (_is_overloaded_type(kind) or (with_tensor and kind in _PLAIN)):
            continue
        index = len(found)
        for i, old in enumerate(kinds):
            if issubclass(kind, old):
                index = i
                break
        kinds.insert(index, kind)
        found.insert(index, arg)
    return found


def _relevant(args: tuple, kwargs: dict | None) -> list:
    """The arguments torch inspects: each argument, and the items of list/tuple arguments (tensor lists)."""
    out = []
    for a in args:
        out.append(a)
        if type(a) is list or type(a) is tuple:
            out.extend(a)
    if kwargs:
        for a in kwargs.values():
            out.append(a)
            if type(a) is list or type(a) is tuple:
                out.extend(a)
    return out


class _PopMode:
    """The innermost mode, removed from this thread's stack while its ``__torch_function__`` runs."""

    def __enter__(self) -> Any:
        self.mode = STATE.modes.pop()
        return self.mode

    def __exit__(self, *exc: Any) -> None:
        STATE.modes.append(self.mode)


def handle(public: Any, overloaded: list, args: tuple, kwargs: dict | None, python_level: bool = True) -> Any:
    """``torch.overrides.handle_torch_function``'s core: the mode first, then each overloaded type in order."""
    kwargs = kwargs or {}
    types = tuple(type(a) for a in overloaded)
    state = STATE
    if state.modes and not state.no_torch_function:
        with _PopMode() as mode:
            result = mode.__torch_function__(public, types, args, kwargs)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = arg.__torch_function__(public, types, args, kwargs)  # a classmethod (or torch's deprecated method)
        if result is not NotImplemented:
            return result
    raise TypeError(_no_implementation(public, overloaded, python_level))


def _no_implementation(public: Any, overloaded: list, python_level: bool) -> str:
    """torch's two messages: its Python-level functions' and its C++ dispatcher's."""
    name = _public_name(public)
    mode = STATE.modes[-1] if STATE.modes and not STATE.no_torch_function else None
    if python_level:
        message = (f"no implementation found for '{name}' on types that implement __torch_function__: "
                   f"{[type(a) for a in overloaded]}")
        return message + (f" nor in mode {mode}" if mode is not None else "")
    handlers = ([f"  - mode object {mode!r}"] if mode is not None else []) + \
        [f"  - tensor subclass {type(a)}" for a in overloaded if type(a) not in _PLAIN]
    return (f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned NotImplemented:\n\n"
            + "\n".join(handlers) + "\n\nFor more information, try re-running with TORCH_LOGS=not_implemented")


def _public_name(public: Any) -> str:
    from_table = PUBLIC_NAMES.get(id(public))
    if from_table is None:
        fn_name = getattr(public, "__name__", repr(public))
        if _TENSOR is not None and getattr(_TENSOR, fn_name, None) is public:
            from_table = f"torch.Tensor.{fn_name}"
        else:
            return f"{getattr(public, '__module__', None)}.{fn_name}"
    return dtypes.PUBLIC_NAME[0] + from_table[len("torch"):]


def dispatch(public: Any, impl: Callable[..., Any], args: tuple, kwargs: dict, with_tensor: bool = False,
             args_too: bool = True) -> Any:
    """Run ``impl`` unless a mode or an argument's type takes the call over (called only when SWITCH.on).
    ``args_too=False``: only modes see the call (torch's factories: ``torch.ones`` reaches a mode, never a type)."""
    if not SWITCH.modes:  # no mode anywhere: exact tensors and numbers alone never dispatch (the usual call of a
        for arg in args:  # program in which some override lives)
            if type(arg) not in _PLAIN_ARGS:
                break
        else:
            if not kwargs or all(type(v) in _PLAIN_ARGS for v in kwargs.values()):
                return impl(*args, **kwargs)
    state = STATE
    if state.no_torch_function:
        return impl(*args, **kwargs)
    overloaded = [] if state.no_subclass or not args_too else overloaded_args(_relevant(args, kwargs))
    if not overloaded and not state.modes:
        return impl(*args, **kwargs)
    if with_tensor and args_too and not state.no_subclass:
        overloaded = overloaded_args(_relevant(args, kwargs), with_tensor=True)
    return handle(public, overloaded, args, kwargs, python_level=with_tensor)


def _foreign_override(args: tuple, kwargs: dict) -> bool:
    """An argument of a non-Tensor class with ``__torch_function__`` (looked for only after a call failed); its
    class is remembered (:func:`foreign_seen`), so Tensor's methods dispatch on its objects from now on."""
    if STATE.no_torch_function or STATE.no_subclass:
        return False
    found = overloaded_args(_relevant(args, kwargs))
    for arg in found:
        if not isinstance(arg, _TENSOR):
            foreign_seen(type(arg))
    return bool(found)


def foreign_seen(kind: type) -> None:
    """A non-Tensor class with ``__torch_function__`` reached ember: while it lives, public functions look at their
    arguments and Tensor carries the overridable methods (``plain.add(obj)`` dispatches to it, as torch's)."""
    if kind in SWITCH.foreign:
        return
    try:
        weakref.ref(kind)
    except TypeError:
        return
    with _LOCK:
        SWITCH.foreign.add(kind)
        SWITCH.update()
    weakref.finalize(kind, _subclass_gone)


def operator_fallback(name: str, tensor: Any, other: Any) -> Any:
    """Tensor's operator ``name`` met an operand no op takes: an object whose class has ``__torch_function__``
    gets the call (``plain + obj`` -> ``obj.__torch_function__(Tensor.add, ...)``, as torch); anything else:
    NotImplemented, so Python asks the operand. Only on this failure path: the operators' fast path is unchanged."""
    kind = type(other)
    if STATE.no_torch_function or STATE.no_subclass or isinstance(other, _TENSOR) or \
            not _is_overloaded_type(kind) or name not in _wrappers():
        return NotImplemented
    foreign_seen(kind)
    return _wrappers()[name](tensor, other)


_WRAPPED: dict[tuple, Callable[..., Any]] = {}  # (id(original), builtin) -> its wrapper: one public object each


PUBLIC_NAMES: dict[int, str] = {}  # id(wrapper) -> its public name for messages ("torch.mul")


def wrap_function(fn: Callable[..., Any], with_tensor: bool = False, args_too: bool = True,
                  builtin: bool = False) -> Callable[..., Any]:
    """``fn`` as an overridable public function (see the module docstring for the cost). ``with_tensor``: torch
    writes it in Python, so plain Tensor arguments appear in ``types`` when it dispatches; ``args_too=False``:
    only modes see it (a factory); ``builtin``: torch's is a C builtin, so the public object does not bind as a
    class attribute (:mod:`ember._nonbinding`)."""
    if getattr(fn, "__torch_function_wrapped__", None) is not None:
        return fn
    key = (id(fn), builtin)
    if key in _WRAPPED:
        return _WRAPPED[key]

    def call(*args: Any, **kwargs: Any) -> Any:
        if SWITCH.on:
            return dispatch(public, fn, args, kwargs, with_tensor, args_too)
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            if _foreign_override(args, kwargs):
                return handle(public, overloaded_args(_relevant(args, kwargs), with_tensor), args, kwargs, with_tensor)
            if kwargs and type(error) is TypeError:  # NumPy's names (axis=, keepdims=), as torch's parser takes
                torch_names = _numpy_names.renamed(fn, kwargs)
                if torch_names is not None:
                    return public(*args, **torch_names)
            if type(error) is AttributeError:
                refused = _not_a_tensor(fn, args, kwargs, error)
                if refused is not None:
                    raise refused from None
            raise

    functools.update_wrapper(call, fn)
    public = _nonbinding.make(call, fn) if builtin else call  # ``public``: the object __torch_function__ sees
    public.__torch_function_wrapped__ = fn  # type: ignore[attr-defined]
    _WRAPPED[key] = public  # the wrapper keeps fn alive, so the id stays unique
    return public


def _not_a_tensor(fn: Callable[..., Any], args: tuple, kwargs: dict, error: AttributeError) -> TypeError | None:
    """torch's TypeError for a number, None or string where a Tensor goes (``torch.sin(2.5)``: "argument 'input'
    (position 1) must be Tensor, not float"); ember's op failed reading an attribute of that very argument (an
    AttributeError, which ``try: torch.exp(x) except TypeError:`` fallbacks do not catch). None: another cause."""
    culprit = getattr(error, "obj", None)  # (None both for a None argument and for an error that names no object:
    if culprit is None and getattr(error, "name", None) is None:  # the interpreter's errors name the attribute)
        return None
    if not isinstance(culprit, (int, float, complex, str, type(None))):
        return None
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    where = next((f"'{names[k] if k < len(names) else 'input'}' (position {k + 1})" for k, a in enumerate(args)
                  if a is culprit), None)
    if where is None:
        where = next((f"'{k}'" for k, a in kwargs.items() if a is culprit), None)
    if where is None:
        return None
    return TypeError(f"{getattr(fn, '__name__', 'function')}(): argument {where} must be Tensor, not "
                     f"{type(culprit).__name__}")


# ---- namespaces ------------------------------------------------------------------------------------------
OVERRIDABLE: dict[str, list] = {}  # namespace name -> its wrapped public functions (get_overridable_functions)
IGNORED: dict[str, list] = {}  # namespace name -> its public functions left alone (get_ignored_functions)
NAMESPACES: dict[str, Any] = {}  # namespace name -> the module


def install(namespace: Any, label: str, ignored: Iterable[str], python_level: Callable[[str], bool],
            mode_only: Iterable[str] = ()) -> int:
    """Wrap every public function of the module ``namespace`` but those named in ``ignored``; classes, modules
    and private names are left alone; ``python_level(name)``: torch's function is written in Python (see
    :func:`wrap_function`); ``mode_only``: ignored names that modes still see (factories). Functions torch has as
    C builtins become non-binding (:mod:`ember._nonbinding`), ignored ones too. Returns how many overridable
    functions there are."""
    get = lambda n: getattr(namespace, n, None)  # noqa: E731
    def put(name: str, value: Any) -> None:
        setattr(namespace, name, value)
        # Pickle finds a function by its __module__ and __qualname__ and checks it is the same object: point the
        # wrapper at a namespace that holds it (the wrapped original keeps its own home).
        home = sys.modules.get(getattr(value, "__module__", None) or "")
        if getattr(home, getattr(value, "__qualname__", ""), None) is not value:
            value.__module__, value.__qualname__ = namespace.__name__, name

    names = dir(namespace)
    ignored, mode_only = set(ignored), set(mode_only)
    builtins = _nonbinding.BUILTIN_NAMES.get(label, frozenset())
    NAMESPACES[label] = namespace
    wrapped, left = OVERRIDABLE.setdefault(label, []), IGNORED.setdefault(label, [])
    for name in names:
        value = get(name)
        if name.startswith("_") or isinstance(value, type) or not callable(value) or \
                type(value).__name__ == "module" or not (hasattr(value, "__code__") or hasattr(value, "__wrapped__")):
            continue
        builtin = name in builtins
        if name in ignored:
            if name in mode_only:
                value = wrap_function(value, args_too=False, builtin=builtin)
                PUBLIC_NAMES.setdefault(id(value), f"{label}.{name}")
                put(name, value)
            elif builtin and hasattr(type(value), "__get__"):  # no dispatch, but not binding either
                value = _IGNORED_NONBINDING.get(id(value)) or _IGNORED_NONBINDING.setdefault(
                    id(value), _nonbinding.make(value, value))
                put(name, value)
            left.append(value)
            continue
        fn = wrap_function(value, python_level(name), builtin=builtin)
        PUBLIC_NAMES.setdefault(id(fn), f"{label}.{name}")
        put(name, fn)
        wrapped.append(fn)
    return len(wrapped)


_IGNORED_NONBINDING: dict[int, Any] = {}  # id(function) -> its non-binding form (one object per function)


# ---- Tensor's methods ------------------------------------------------------------------------------------
# Operators reach __torch_function__ as the named method torch reports (``a + b`` -> ``Tensor.add``).
_OPERATOR_FUNC = {"__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_",
                  "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
                  "__itruediv__": "div_", "__pow__": "pow", "__ipow__": "pow_", "__abs__": "abs", "__lt__": "lt",
                  "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__ne__": "ne", "__mod__": "remainder",
                  "__imod__": "remainder_", "__ifloordiv__": "floor_divide_", "__matmul__": "matmul",
                  "__neg__": "neg", "__pos__": "positive", "__rand__": "bitwise_and", "__ror__": "bitwise_or",
                  "__rxor__": "bitwise_xor", "__rtruediv__": "__rdiv__"}
# Protocol methods that torch routes through __torch_function__ (besides every public method and property).
_DUNDERS = frozenset(_OPERATOR_FUNC) | {
    "__eq__", "__rsub__", "__rtruediv__", "__rpow__", "__rmod__", "__floordiv__", "__rfloordiv__", "__and__",
    "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__", "__ilshift__",
    "__irshift__", "__iand__", "__ior__", "__ixor__", "__rmatmul__", "__getitem__", "__setitem__", "__len__",
    "__iter__", "__contains__", "__bool__", "__float__", "__int__", "__index__", "__complex__", "__repr__",
    "__format__", "__array__", "__reduce_ex__", "__deepcopy__", "__reversed__"}
_PLAIN_ARGS: set = {int, float, bool, complex, str, type(None)}  # argument types that never override (+ Tensor)
# torch's dunders written in Python: plain Tensor arguments appear in ``types`` (``p ** obj``: (Tensor, type(obj)))
_PYTHON_DUNDERS = frozenset({"__floordiv__", "__ipow__", "__pow__", "__rdiv__", "__rfloordiv__", "__rlshift__",
                             "__rmatmul__", "__rmod__", "__rpow__", "__rrshift__", "__rsub__", "__rtruediv__",
                             "__array__", "__contains__", "__deepcopy__", "__format__", "__iter__", "__len__",
                             "__reduce_ex__", "__repr__", "__reversed__"})
# Not overridable in torch either (torch.overrides.get_ignored_functions), or the machinery itself.
_TENSOR_IGNORED = frozenset({"as_subclass", "new", "__torch_function__", "_make_subclass"})

# Reflected operators with a Tensor on the left: (the forward operator, the name torch reports).
_REFLECTED = {"__radd__": ("__add__", "add"), "__rsub__": ("__sub__", "sub"), "__rmul__": ("__mul__", "mul"),
              "__rtruediv__": ("__truediv__", "div"), "__rmatmul__": ("__matmul__", "matmul"),
              "__rpow__": ("__pow__", "pow"), "__rmod__": ("__mod__", "remainder"),
              "__rfloordiv__": ("__floordiv__", "__floordiv__"), "__rand__": ("__and__", "__and__"),
              "__ror__": ("__or__", "__or__"), "__rxor__": ("__xor__", "__xor__"),
              "__rlshift__": ("__lshift__", "__lshift__"), "__rrshift__": ("__rshift__", "__rshift__")}
_TENSOR: Any = None  # the Tensor class (bind)
_ORIGINAL: dict[str, Any] = {}  # name -> Tensor's own attribute (function or property), before any mode
_METHOD_WRAPPERS: dict[str, Any] = {}  # name -> its overridable form (one object, shared by subclasses and modes)
_PUBLIC_FORM: dict[str, tuple] = {}  # name -> (Tensor's plain method, its overridable form: what ``Tensor.<name>``
#                                      gives at class level)


class TensorMeta(type):
    """``torch._C._TensorMeta``: ``Tensor.<method>`` read on the class is one object, whatever overrides live.

    Instances run Tensor's plain methods while no override lives and the overridable forms while one does (see the
    module docstring); neither may show through the class: ``__torch_function__`` receives ``Tensor.matmul`` as
    ``func``, libraries key tables on it at import (linear_operator, PyTorch's ``HANDLED_FUNCTIONS`` recipe) and
    call it to re-dispatch (an outer mode must see the call). So a class-level read gives the overridable form
    always, as torch's dispatching builtin. Instance calls (``x.matmul(y)``) never come here: attribute lookup on
    an instance does not go through the metaclass, so a program without overrides runs the plain methods as fast.
    """

    def __getattribute__(cls, name: str) -> Any:
        attr = type.__getattribute__(cls, name)
        entry = _PUBLIC_FORM.get(name)
        if entry is not None and entry[0] is attr:  # (a subclass's own method is not Tensor's: it shows as it is)
            return entry[1]
        return attr


def _wrappable(name: str, attr: Any) -> bool:
    if name in _TENSOR_IGNORED or name == "_version":
        return False
    if name.startswith("_") and name not in _DUNDERS:
        return False
    return isinstance(attr, property) or type(attr).__name__ == "function"


def _make_method(name: str, impl: Any) -> Any:
    public_name = _OPERATOR_FUNC.get(name, name)
    if not hasattr(_TENSOR, public_name):
        public_name = name
    tensor = _TENSOR
    python_level = name in _PYTHON_DUNDERS

    if isinstance(impl, property):
        getter = impl.fget

        def get(self: Any) -> Any:
            if STATE.no_torch_function:
                return getter(self)
            return dispatch(tensor.__dict__.get(name, impl).__get__, getter, (self,), {}, with_tensor=True)

        return property(get, impl.fset, impl.fdel, impl.__doc__)

    forward = _REFLECTED.get(name)
    forward_python = forward is not None and forward[0] in _PYTHON_DUNDERS
    plain_name = {"__eq__": "eq", "__ne__": "ne"}.get(name)  # torch: a plain tensor's == reports Tensor.eq

    if plain_name is not None:
        def compare(self: Any, other: Any) -> Any:
            if STATE.no_torch_function:
                return impl(self, other)
            public = getattr(tensor, plain_name if type(self) is tensor else public_name)
            return dispatch(public, impl, (self, other), {})

        functools.update_wrapper(compare, impl)
        return compare

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if type(self) is tensor and not SWITCH.modes and not kwargs:  # the plain call of a program in which an
            for arg in args:  # override lives: nothing to look at (no mode; exact tensors and numbers)
                if type(arg) not in _PLAIN_ARGS:
                    break
            else:
                return impl(self, *args)
        if STATE.no_torch_function:
            return impl(self, *args, **kwargs)
        if forward is not None and args and isinstance(args[0], tensor):
            # ``plain - sub``: Python asks the subclass's __rsub__ first; torch reports ``Tensor.sub(plain, sub)``
            return dispatch(getattr(tensor, forward[1]), _ORIGINAL[forward[0]], (args[0], self), {}, forward_python)
        return dispatch(getattr(tensor, public_name), impl, (self,) + args, kwargs, python_level)

    functools.update_wrapper(method, impl)
    method.__name__, method.__qualname__ = name, f"Tensor.{name}"  # (expand_as is expand_as_public underneath)
    return method


def _wrappers() -> dict[str, Any]:
    if not _METHOD_WRAPPERS:
        _TENSOR_OWN.update(vars(_TENSOR))  # Tensor's own names (the rest come from the TensorMethods mixin)
        for name in dir(_TENSOR):
            attr = inspect.getattr_static(_TENSOR, name)
            if _wrappable(name, attr):
                _ORIGINAL[name] = attr
        for name, attr in _ORIGINAL.items():
            _METHOD_WRAPPERS[name] = _make_method(name, attr)
            if type(attr) is not property:  # (a property read on the class is the property: it stays Tensor's)
                _PUBLIC_FORM[name] = (attr, _METHOD_WRAPPERS[name])
    return _METHOD_WRAPPERS


def refresh_tensor_methods() -> None:
    """Re-read Tensor's methods after ember's import replaced some (``_deprecated_overloads`` wraps ``add``...).

    ``ember.nested``'s subclass is defined mid-import and builds the overridable forms from the methods of that
    moment; a method replaced later would be lost when a mode ends (its old form put back) and bypassed inside
    one. Classes holding an old form get the new one.
    """
    if not _METHOD_WRAPPERS:
        _wrappers()  # built now, at the end of ember's import: class-level reads give them (TensorMeta)
        return
    old = dict(_METHOD_WRAPPERS)
    _METHOD_WRAPPERS.clear()
    _ORIGINAL.clear()
    _TENSOR_OWN.clear()
    _PUBLIC_FORM.clear()
    new = _wrappers()
    for cls in list(SWITCH.subclasses):
        for name, wrapper in old.items():
            if vars(cls).get(name) is wrapper and name in new:
                setattr(cls, name, new[name])


def subclass_defined(cls: type) -> None:
    """``Tensor.__init_subclass__``: give ``cls`` overridable methods unless its ``__torch_function__`` is the
    disabled one (``nn.Parameter``'s) or it is one of ember's own internal classes (symbolic tensors, sparse
    tensors, ...), which are marked disabled here."""
    own = any("__torch_function__" in vars(base) for base in cls.__mro__ if base is not _TENSOR
              and issubclass(base, _TENSOR))
    if not own and cls.__module__.startswith("ember."):
        cls.__torch_function__ = classmethod(disabled_torch_function_impl)  # type: ignore[attr-defined]
        _PLAIN_ARGS.add(cls)
        return
    if not _is_overloaded_type(cls):
        if cls.__module__.startswith("ember."):  # nn.Parameter, Buffer...: plain arguments (dispatch's fast check)
            _PLAIN_ARGS.add(cls)
        return
    for name, wrapper in _wrappers().items():
        if not any(name in vars(base) for base in cls.__mro__[:cls.__mro__.index(_TENSOR)]):
            setattr(cls, name, wrapper)
    with _LOCK:
        SWITCH.subclasses.add(cls)
        SWITCH.update()
    weakref.finalize(cls, _subclass_gone)  # functions stop looking at arguments once no such class is alive


def tracer_alive(tracer: Any) -> None:
    """An fx tracer made a Proxy: while the tracer lives, public functions look at their arguments first, so a
    Proxy reaching one records a node (torch.fx's ``Proxy.__torch_function__``) instead of running the function on
    it. ember's tracers are short-lived (dropped when ``symbolic_trace`` returns), so plain programs pay nothing."""
    if tracer in SWITCH.tracers:
        return
    with _LOCK:
        SWITCH.tracers.add(tracer)
        SWITCH.update()
    weakref.finalize(tracer, _subclass_gone)


def _subclass_gone() -> None:
    with _LOCK:
        SWITCH.update()


_TENSOR_OWN: set = set()


def _tensor_methods_overridable(on: bool) -> None:
    """While a mode is active anywhere, Tensor itself carries the overridable methods (see the docstring)."""
    wrappers = _wrappers()
    for name, original in _ORIGINAL.items():
        if on:
            setattr(_TENSOR, name, wrappers[name])
        elif vars(_TENSOR).get(name) is wrappers[name]:
            if name in _TENSOR_OWN:
                setattr(_TENSOR, name, original)
            else:
                delattr(_TENSOR, name)  # the mixin's method shows through again


def push_mode(mode: Any) -> None:
    with _LOCK:
        STATE.modes.append(mode)
        SWITCH.modes += 1
        SWITCH.update()


def pop_mode() -> Any:
    with _LOCK:
        mode = STATE.modes.pop()
        SWITCH.modes -= 1
        SWITCH.update()
    return mode


def convert(result: Any, cls: type) -> Any:
    """Results of the default ``__torch_function__`` as ``cls`` (tensors, and tuples/lists of them)."""
    if cls is _TENSOR:
        return result
    if isinstance(result, _TENSOR) and not isinstance(result, cls):
        return result.as_subclass(cls)
    if isinstance(result, (tuple, list)):
        items = [convert(r, cls) for r in result]
        kind = type(result)
        if hasattr(kind, "_fields"):  # a namedtuple
            return kind(*items)
        return kind(items)
    return result


def bind(tensor: type) -> None:
    """Called once by ember.tensor after the class exists (the same seam as dispatch's)."""
    global _TENSOR
    _TENSOR = tensor
    _PLAIN.add(tensor)
    _PLAIN_ARGS.add(tensor)


def default_torch_function(cls: type, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
    """``torch.Tensor.__torch_function__``: run ``func`` with subclass dispatch off, results as ``cls``."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        return convert(func(*args, **kwargs), cls)


class DisableTorchFunctionSubclass:
    """``torch._C.DisableTorchFunctionSubclass``: inside, subclasses' ``__torch_function__`` are not called (modes
    still are)."""

    def __enter__(self) -> "DisableTorchFunctionSubclass":
        STATE.no_subclass += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        STATE.no_subclass -= 1


class DisableTorchFunction:
    """``torch._C.DisableTorchFunction``: inside, neither modes nor subclasses see calls."""

    def __enter__(self) -> "DisableTorchFunction":
        STATE.no_torch_function += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        STATE.no_torch_function -= 1


def as_subclass(tensor: Any, cls: type) -> Any:
    """``Tensor.as_subclass``: a ``cls`` object viewing ``tensor``'s data, attached to its autograd history (an
    alias node when it requires grad, as torch's AliasBackward0)."""
    if not (isinstance(cls, type) and issubclass(cls, _TENSOR)):
        raise TypeError(f"as_subclass(): argument 'cls' must be a subclass of Tensor, not {cls!r}")
    from_ = tensor
    if tensor._requires_grad and grad_mode.STATE.enabled:
        from_ = views._alias(tensor)
    elif tensor._vc is None:
        tensor._vc = [0]  # share the version counter, as a view does
    out = object.__new__(cls)
    _copy_slots(from_, out)
    out.grad = None
    out._hooks = None
    out._retains_grad = False
    return out


def make_subclass(cls: type, data: Any, require_grad: bool = False, **_: Any) -> Any:
    """``Tensor._make_subclass``: a ``cls`` leaf sharing ``data``'s memory, ``requires_grad`` as asked."""
    if not (isinstance(cls, type) and issubclass(cls, _TENSOR)):
        raise TypeError(f"_make_subclass(): cls must be a subclass of Tensor, not {cls!r}")
    if not isinstance(data, _TENSOR):
        raise TypeError(f"_make_subclass(): data must be a Tensor, not {type(data).__name__}")
    with DisableTorchFunction():
        plain = _TENSOR.detach(data)
    out = object.__new__(cls)
    _copy_slots(plain, out)
    out._requires_grad = bool(require_grad)
    return out


_SLOTS = ("_data", "_device", "_requires_grad", "grad", "grad_fn", "_output_nr", "_vc", "_base", "_hooks",
          "_retains_grad")


def _copy_slots(src: Any, dst: Any) -> None:
    for slot in _SLOTS:
        object.__setattr__(dst, slot, getattr(src, slot))
    view_fn = getattr(src, "_view_fn", None)
    if view_fn is not None:
        object.__setattr__(dst, "_view_fn", view_fn)
