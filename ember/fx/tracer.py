"""``torch.fx.Tracer`` and ``symbolic_trace``: run a module's ``forward`` on Proxies and record a Graph.

As torch.fx does, tracing patches a few things for its duration and puts them back after: ``Module.__call__``
(a leaf module becomes one ``call_module`` node, any other is traced through), ``Module.__getattr__``
(parameters and buffers become ``get_attr`` nodes), and the functions of ``ember``, ``ember.nn.functional``,
``ember.linalg``, ``ember.special``, ``ember.fft`` plus the traced code's globals that name them (a call with
a Proxy argument becomes a ``call_function`` node; without one it runs as before, so another thread using
ember meanwhile gets the same results). ``wrap`` adds functions of the caller's module to that list.

Example:
    >>> import ember, ember.fx as fx
    >>> class M(ember.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.linear = ember.nn.Linear(4, 5)
    ...     def forward(self, x):
    ...         return ember.nn.functional.relu(self.linear(x)).clamp(min=0.0, max=1.0)
    >>> [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in fx.symbolic_trace(M()).graph.nodes]
    [('placeholder', 'x'), ('call_module', 'linear'), ('call_function', 'relu'), ('call_method', 'clamp'), ('output', 'output')]
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import math
import operator
import threading
import types
import warnings
from typing import Any, Callable, Iterator

from ember.fx._namespaces import public_namespaces
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.node import Node, map_aggregate
from ember.fx.proxy import Proxy, TraceError
from ember.surface.private_names import _assert  # torch._assert: the check concrete_args records
from ember.nn.modules.container import Sequential
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

_LOCAL = threading.local()  # the tracers running on this thread (innermost last)
_WRAPPED: list[tuple[dict, str]] = []  # (module globals, name) registered by fx.wrap


def _current() -> "Tracer | None":
    stack = getattr(_LOCAL, "stack", None)
    return stack[-1] if stack else None


def _find_proxy(args: tuple, kwargs: dict) -> Proxy | None:
    found: list = []
    map_aggregate((args, kwargs), lambda v: found.append(v) if isinstance(v, Proxy) else None)
    return found[0] if found else None


def wrap(fn_or_name: Callable | str) -> Callable | str:
    """Record calls of this module-level function (or builtin, by name) as one ``call_function`` node
    instead of tracing through it. Call at the top level of a module, as with torch.fx.wrap.

    Example:
        >>> import ember.fx
        >>> def my_norm(x):
        ...     return x / len(x)
        >>> _ = ember.fx.wrap("len")  # doctest: +SKIP
    """
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    name = fn_or_name if isinstance(fn_or_name, str) else getattr(fn_or_name, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"fx.wrap: expected a function or the name of one, got {fn_or_name!r}")
    _WRAPPED.append((frame.f_globals, name))
    return fn_or_name


def _assert_is_none(value: Any, message: str) -> None:
    """The check torch.fx records for a ``concrete_args`` value of None."""
    assert value is None, message


_assert._fx_side_effect = True  # dead-code elimination keeps it (and drops _assert_is_none, as torch.fx does)
_CHECKABLE = (bool, int, float, str, complex)  # concrete values fx guards with an equality assertion


def _wrapper(original: Callable) -> Callable:
    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_function", original, args, kwargs)
        return original(*args, **kwargs)
    traced.__fx_original__ = original
    return traced


class _Patcher:
    """Swaps attributes for the tracing and puts every one back (in reverse order) at the end."""

    def __init__(self) -> None:
        self.undo: list[tuple[Any, str, Any, bool]] = []
        self.wrappers: dict[int, Callable] = {}
        self.globals_done: set[int] = set()

    def set_attr(self, owner: Any, name: str, value: Any) -> None:
        self.undo.append((owner, name, owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name),
                          True))
        setattr(owner, name, value)

    def wrap_in_dict(self, namespace: dict, name: str, original: Callable) -> None:
        had = name in namespace
        self.undo.append((namespace, name, namespace.get(name), had))
        namespace[name] = self.wrapper_of(original)

    def wrapper_of(self, original: Callable) -> Callable:
        key = id(original)
        if key not in self.wrappers:
            self.wrappers[key] = _wrapper(original)
        return self.wrappers[key]

    def patch_globals(self, namespace: dict) -> None:
        """Names in ``namespace`` bound to ember functions (``from torch import flatten``) record too."""
        if id(namespace) in self.globals_done:
            return
        self.globals_done.add(id(namespace))
        for name, value in list(namespace.items()):
            if id(value) in self.wrappers and namespace[name] is value:
                self.wrap_in_dict(namespace, name, value)
        for wrapped_globals, name in _WRAPPED:
            if wrapped_globals is namespace:
                original = namespace.get(name, getattr(builtins, name, None))
                if callable(original) and not hasattr(original, "__fx_original__"):
                    self.wrap_in_dict(namespace, name, original)

    def restore(self) -> None:
        while self.undo:
            owner, name, value, had = self.undo.pop()
            if isinstance(owner, dict):
                if had:
                    owner[name] = value
                else:
                    owner.pop(name, None)
            elif isinstance(owner, type) and value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _ember_functions() -> list[tuple[Any, str, Callable]]:
    found = []
    for _, module in public_namespaces():
        for name, value in list(vars(module).items()):
            # torch._assert is the one private name fx records (it is how models check shapes traceably)
            if (name.startswith("_") and name != "_assert") or isinstance(value, type) or not callable(value):
                continue
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, functools.partial)):
                found.append((module, name, value))
    return found


class Tracer:
    """torch.fx.Tracer. Override ``is_leaf_module`` to choose which modules stay one ``call_module`` node."""

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = ()) -> None:
        self.autowrap_modules = autowrap_modules
        self.autowrap_functions = autowrap_functions
        self.root: Module | None = None
        self.graph: Graph | None = None
        self._module_paths: dict[int, str] = {}
        self._attr_proxies: dict[str, Proxy] = {}
        self._patcher: _Patcher | None = None
        self._constants = 0

    # ---- what PyTorch lets a subclass override ------------------------------------------------
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """ember.nn's own modules (but containers such as Sequential) are leaves, as torch.nn's are."""
        module_name = type(m).__module__ or ""
        return (module_name.startswith("ember.nn") or module_name.startswith("torch.nn")) and not isinstance(
            m, Sequential)

    def path_of_module(self, mod: Module) -> str:
        path = self._module_paths.get(id(mod))
        if path is None:
            raise NameError(f"module {type(mod).__name__} is not installed as a submodule of the traced module")
        return path

    def call_module(self, m: Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
        name = self.path_of_module(m)
        if not self.is_leaf_module(m, name):
            self._patcher.patch_globals(getattr(type(m).forward, "__globals__", {}))
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", name, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
        """A parameter of the root read in ``forward`` becomes a ``get_attr`` node."""
        if not isinstance(attr_val, Tensor):
            return attr_val
        qualified = self._tensor_path(attr_val)
        if qualified is None:
            return attr_val
        if qualified not in parameter_proxy_cache:
            parameter_proxy_cache[qualified] = self.create_proxy("get_attr", qualified, (), {})
        return parameter_proxy_cache[qualified]

    def create_arg(self, a: Any) -> Any:
        """Turn a value used as an argument into what a Node holds (Nodes for proxies and module tensors)."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Tensor):
            qualified = self._tensor_path(a)
            if qualified is None:  # a tensor made outside the module: kept as an attribute of the root
                qualified = f"_tensor_constant{self._constants}"
                self._constants += 1
                setattr(self.root, qualified, a)
                self._tensor_paths[id(a)] = qualified
            return self.create_node("get_attr", qualified, (), {})
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(v) for v in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(v) for v in a)
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, Module):
            raise RuntimeError(f"fx: a module ({type(a).__name__}) cannot be passed as an argument of a traced call; "
                               "call it, or make the code that takes it a leaf module")
        return a

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                    type_expr: Any = None) -> Node:
        target = getattr(target, "__fx_original__", target)  # a node names the function, never its wrapper
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def recording_wrapper(self, fn: Any) -> Any:
        """The wrapper standing in for ``fn`` while this tracer records (``fn`` itself when it has none)."""
        patcher = self._patcher
        return patcher.wrappers.get(id(fn), fn) if patcher is not None else fn

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any = None) -> Proxy:
        node = self.create_node(kind, target, self.create_arg(tuple(args)), self.create_arg(dict(kwargs)), name,
                                type_expr)
        return self.proxy(node)

    def proxy(self, node: Node) -> Proxy:
        return Proxy(node, self)

    # ---- the trace ----------------------------------------------------------------------------
    def _tensor_path(self, tensor: Tensor) -> str | None:
        return self._tensor_paths.get(id(tensor))

    def trace(self, root: Module | Callable, concrete_args: dict | None = None) -> Graph:
        """Record ``root.forward`` (or the function ``root``) into a new Graph; ``concrete_args`` fixes some
        arguments to constants (they get no placeholder)."""
        if isinstance(root, Module):
            self.root, fn = root, type(root).forward
        else:
            self.root, fn = Module(), root
        self.graph = Graph(tracer_cls=type(self))
        self._module_paths = {id(m): name for name, m in self.root.named_modules()}
        self._tensor_paths = {id(t): name for name, t in self.root.named_buffers()}
        self._tensor_paths.update({id(p): name for name, p in self.root.named_parameters()})
        self._attr_proxies = {}
        concrete_args = dict(concrete_args or {})
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        if isinstance(root, Module):
            params = params[1:]  # self
        call_args = [self.root] if isinstance(root, Module) else []
        call_kwargs: dict = {}
        for param in params:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TraceError(f"fx.symbolic_trace: {fn.__qualname__} takes *{param.name}; give the arguments "
                                  "names (or pass concrete_args) so each becomes one placeholder")
            if param.name in concrete_args:
                value = self._concrete_placeholder(param, concrete_args.pop(param.name))
            else:
                default = () if param.default is inspect.Parameter.empty else (param.default,)
                value = self.create_proxy("placeholder", param.name, default, {})
            if param.kind == param.KEYWORD_ONLY:
                call_kwargs[param.name] = value
            else:
                call_args.append(value)
        if concrete_args:
            raise TypeError(f"fx.symbolic_trace: concrete_args names {sorted(concrete_args)}, which "
                            f"{fn.__qualname__} does not take")
        with self.recording(fn):
            result = fn(*call_args, **call_kwargs)
        # through create_node, as torch.fx: a Tracer subclass overriding it sees the output node too
        self.create_node("output", "output", (self.create_arg(result),), {})
        return self.graph

    def _concrete_placeholder(self, param: inspect.Parameter, value: Any) -> Any:
        """As torch.fx: a concrete argument keeps a placeholder (``name_1``) and, for None and plain scalars, an
        assertion that the caller passes the value the trace was specialized to; tracing sees the value."""
        default = () if param.default is inspect.Parameter.empty else (param.default,)
        node = self.create_node("placeholder", f"{param.name}_1", default, {})
        message = f"{param.name} has been specialized to have value {value} but got another value"
        if value is None:
            self.create_node("call_function", _assert_is_none, (node, message), {})
        elif type(value) in _CHECKABLE:
            equal = self.create_node("call_function", operator.eq, (node, value), {})
            self.create_node("call_function", _assert, (equal, message), {})
        else:
            warnings.warn(f"Was not able to add assertion to guarantee correct input {param.name} to specialized "
                          "function. It is up to the user to make sure that your inputs match the inputs you "
                          "specialized the function with.")
        return value

    @contextlib.contextmanager
    def recording(self, fn: Callable | None = None) -> Iterator[None]:
        """While open, module calls, parameter reads and ember functions given a Proxy record into
        ``self.graph`` (fx.Transformer runs its interpreter inside this)."""
        self._patcher = _Patcher()
        stack = getattr(_LOCAL, "stack", None)
        if stack is None:
            stack = _LOCAL.stack = []
        stack.append(self)
        try:
            self._patch(fn)
            yield
        finally:
            stack.pop()
            self._patcher.restore()
            self._patcher = None
            self._attr_proxies = {}  # its Proxies point back here: no cycle keeps the tracer (and SWITCH) alive

    def _patch(self, fn: Callable | None) -> None:
        patcher = self._patcher
        original_call, original_getattr = Module.__call__, Module.__getattr__

        def call(module: Module, *args: Any, **kwargs: Any) -> Any:
            tracer = _current()
            if tracer is None or not _traced_by(tracer, module):
                return original_call(module, *args, **kwargs)
            return tracer.call_module(module, functools.partial(original_call, module), args, kwargs)

        def module_getattr(module: Module, name: str) -> Any:
            value = original_getattr(module, name)
            tracer = _current()
            if tracer is None or not isinstance(value, Parameter):  # buffers are read as values, as torch.fx does
                return value
            return tracer.getattr(name, value, tracer._attr_proxies)

        patcher.set_attr(Module, "__call__", call)
        patcher.set_attr(Module, "__getattr__", module_getattr)
        for module, name, original in _ember_functions():
            patcher.wrapper_of(original)
            patcher.set_attr(module, name, patcher.wrapper_of(original))
        for module in self.autowrap_modules:
            for name, value in vars(module).items():
                if callable(value) and not name.startswith("_"):
                    patcher.wrapper_of(value)
        for function in self.autowrap_functions:
            patcher.wrapper_of(function)
        if fn is not None:
            patcher.patch_globals(getattr(fn, "__globals__", {}))


class GraphAppendingTracer(Tracer):
    """``torch.fx.proxy.GraphAppendingTracer``: records onto an existing ``graph`` (no root module), so code run
    on ``Proxy(node, tracer)`` values (an inlined function, a traced module called on proxies) adds its nodes
    there. Tensors that are not proxies cannot become nodes here (no module to hold them), as in torch.fx.

    Example:
        >>> import ember, ember.fx as fx
        >>> g = fx.Graph()
        >>> x = fx.Proxy(g.placeholder("x"), fx.proxy.GraphAppendingTracer(g))
        >>> _ = g.output(ember.relu(x + 1).node)
        >>> [n.op for n in g.nodes]
        ['placeholder', 'call_function', 'call_function', 'output']
    """

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        self.graph = graph
        self._tensor_paths = {}

    def create_arg(self, a: Any) -> Any:
        if isinstance(a, Tensor) and self.root is None:
            raise NotImplementedError(f"argument of type: {type(a)}")
        return super().create_arg(a)


def _traced_by(tracer: Tracer, module: Module) -> bool:
    return id(module) in tracer._module_paths


def symbolic_trace(root: Module | Callable, concrete_args: dict | None = None) -> Any:
    """Trace ``root`` (a Module or a function) into a GraphModule that computes the same values.

    Example:
        >>> import ember, ember.fx as fx
        >>> gm = fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU()))
        >>> print(gm.code.strip())
        def forward(self, input):
            input_1 = input
            _0 = getattr(self, "0")(input_1)
            _1 = getattr(self, "1")(_0)
            return _1
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "function")
    return GraphModule(tracer.root, graph, name)


from ember.fx import proxy as _proxy_module  # noqa: E402  (torch.fx.proxy.GraphAppendingTracer lives there)

_proxy_module.GraphAppendingTracer = GraphAppendingTracer
