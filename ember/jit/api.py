"""``ember.jit.trace`` / ``script`` / ``save`` / ``load`` (see :mod:`ember.jit`)."""
from __future__ import annotations

import builtins
import copy
import inspect
import json
import os
import warnings
import zipfile
from typing import Any, Callable

from ember.graph.compile import CompiledFunction, flatten
from ember.graph.ir import Graph, TracingError
from ember.jit.code import graph_code
from ember.nn.modules.module import Module
from ember.tensor import Tensor
from ember.autograd import no_grad
from ember.graph import serialize
from ember.jit import archive
from ember.jit.deprecation import deprecated
from ember.jit import torchscript
from ember import futures as _futures

_STATE = {"tracing": 0}


class TracerWarning(UserWarning):
    """A trace that may not mean what the Python code means (PyTorch's ``torch.jit.TracerWarning``)."""


class _GraphRunner:
    """Runs ``fn`` through ember.compile; after a data-dependent construct, eagerly (warning once)."""

    def __init__(self, fn: Callable, name: str, how: str) -> None:
        self.fn = fn
        self.name = name
        self.how = how  # "trace" or "script", for messages
        self.compiled = CompiledFunction(fn, fallback="raise", warmup=0, name=name, python_guards=False)
        self.eager_reason: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager_reason is not None:
            return self.fn(*args, **kwargs)
        try:
            _STATE["tracing"] += 1
            try:
                return self.compiled(*args, **kwargs)
            finally:
                _STATE["tracing"] -= 1
        except TracingError as error:
            self.eager_reason = str(error)
            warnings.warn(f"ember.jit.{self.how}({self.name}): it has data-dependent Python control flow, which a "
                          f"static graph cannot hold, so it runs eagerly from now on. The construct: {error}",
                          TracerWarning, stacklevel=3)
            return self.fn(*args, **kwargs)

    @property
    def graph(self) -> Graph | None:
        return self.compiled.graph


def _input_names(fn: Callable, count: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + [f"arg{k}" for k in range(len(names), count)]


def _label_graph(graph: Graph, fn: Callable, module: Module | None) -> None:
    """Readable names: inputs as the function's parameters, states as ``linear.weight``."""
    for v, name in zip(graph.inputs, _input_names(fn, len(graph.inputs))):
        if not v.name or v.name.startswith("arg"):
            v.name = name
    if module is not None:
        paths = {id(t): n for n, t in list(module.named_parameters()) + list(module.named_buffers())}
        for v in graph.states:
            if getattr(v, "tensor", None) is not None and id(v.tensor) in paths and not v.name:
                v.name = paths[id(v.tensor)]


class _GraphMixin:
    """``.graph``, ``.code``, ``.save`` for traced/scripted modules and functions."""

    _runner: _GraphRunner

    @property
    def graph(self) -> Graph:
        g = self._runner.graph
        if g is None:
            reason = self._runner.eager_reason
            raise RuntimeError(f"{self._runner.name}: no graph " + (f"(it runs eagerly: {reason})" if reason else
                                                                     "yet; call it once to compile it"))
        _label_graph(g, self._runner.fn, self._module())
        return g

    @property
    def inlined_graph(self) -> Graph:
        return self.graph

    @property
    def code(self) -> str:
        return graph_code(self.graph, "self" if self._module() is not None else None)

    def _module(self) -> Module | None:
        return None

    def save(self, path: str, **_: Any) -> None:
        _save(self, path)  # (the method warns nothing in torch)

    def graph_for(self, *args: Any, **kwargs: Any) -> Graph:
        self(*args, **kwargs)
        return self.graph


class ScriptFunction(_GraphMixin):
    """A function compiled by ``ember.jit.script`` or traced by ``ember.jit.trace``."""

    def __init__(self, fn: Callable, how: str) -> None:
        self._runner = _GraphRunner(fn, getattr(fn, "__name__", "fn"), how)
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner(*args, **kwargs)

    @property
    def name(self) -> str:
        return self.__name__

    def __repr__(self) -> str:
        return f"<ember.jit.ScriptFunction {self.__name__}>"


class ScriptModule(_GraphMixin, Module):
    """A module whose ``forward`` runs a compiled ember graph; parameters are the original module's."""

    def _module(self) -> Module | None:
        return self.__dict__["_jit_original"]

    def train(self, mode: bool = True) -> "ScriptModule":
        self.__dict__["_jit_original"].train(mode)  # the compiled forward runs the original module
        return Module.train(self, mode)


class TracedModule(ScriptModule):
    """What ``ember.jit.trace(module, inputs)`` returns."""


_WRAPPED_CLASSES: dict[tuple[type, type], type] = {}


def _wrap_module(module: Module, kind: type, how: str) -> ScriptModule:
    """A shallow copy of ``module`` (sharing parameters, buffers and submodules) whose forward is compiled."""
    cls = type(module)
    key = (cls, kind)
    if key not in _WRAPPED_CLASSES:
        _WRAPPED_CLASSES[key] = type(f"{kind.__name__}[{cls.__name__}]", (kind, cls), {"__module__": cls.__module__})
    wrapped = copy.copy(module)
    wrapped.__class__ = _WRAPPED_CLASSES[key]
    runner = _GraphRunner(module.forward, cls.__name__, how)
    wrapped.__dict__["_jit_original"] = module
    wrapped.__dict__["_runner"] = runner
    wrapped.__dict__["forward"] = runner
    return wrapped


def _as_tuple(example_inputs: Any) -> tuple:
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    return (example_inputs,)


def _check_against_eager(traced: Any, fn: Callable, args: tuple, kwargs: dict, tolerance: float) -> None:
    import numpy as np


    with no_grad():
        a_leaves: list = []
        b_leaves: list = []
        flatten(traced(*args, **kwargs), a_leaves)
        flatten(fn(*args, **kwargs), b_leaves)
    for a, b in zip(a_leaves, b_leaves):
        if isinstance(a, Tensor) and isinstance(b, Tensor) and a.is_floating_point():
            if not np.allclose(a.detach().numpy(), b.detach().numpy(), rtol=tolerance, atol=tolerance):
                warnings.warn("ember.jit.trace: the traced function's output differs from the Python function's "
                              "on the example inputs (random ops such as dropout in training mode do this)",
                              TracerWarning, stacklevel=3)
                return


def trace(func: Any, example_inputs: Any = None, optimize: Any = None, check_trace: bool = True,
          check_inputs: Any = None, check_tolerance: float = 1e-5, strict: bool = True, *,
          example_kwarg_inputs: dict | None = None, **_: Any) -> Any:
    """Trace ``func`` (a module or function) on ``example_inputs`` into a static ember graph.

    Returns a :class:`TracedModule` for a module and a :class:`ScriptFunction` for a function; both run the
    graph when called (a new input shape traces again) and show it as ``.graph`` and ``.code``.
    """
    deprecated("trace", "`torch.compile` or `torch.export`")
    if isinstance(func, Module) and not isinstance(func, ScriptModule):
        deprecated("trace_method", "`torch.compile` or `torch.export`")  # torch's trace goes through trace_module
    return _trace(func, example_inputs, check_trace, check_inputs, check_tolerance, example_kwarg_inputs)


def _trace(func: Any, example_inputs: Any = None, check_trace: bool = True, check_inputs: Any = None,
           check_tolerance: float = 1e-5, example_kwarg_inputs: dict | None = None) -> Any:
    """:func:`trace` without the deprecation warning (ember's own callers, ember.export's archives)."""
    args = () if example_inputs is None else _as_tuple(example_inputs)
    kwargs = dict(example_kwarg_inputs or {})
    if isinstance(func, ScriptModule) or isinstance(func, ScriptFunction):
        return func
    traced = _wrap_module(func, TracedModule, "trace") if isinstance(func, Module) else ScriptFunction(func, "trace")
    runner = traced._runner
    traced(*args, **kwargs)  # compiles now, on the example inputs
    if check_trace and runner.eager_reason is None:
        _check_against_eager(traced, func, args, kwargs, check_tolerance)
        for extra in check_inputs or ():
            _check_against_eager(traced, func, _as_tuple(extra), {}, check_tolerance)
    return traced


def trace_module(mod: Module, inputs: dict, **kwargs: Any) -> Any:
    """``torch.jit.trace_module``: trace ``mod`` with ``inputs = {"forward": example}``."""
    deprecated("trace_method", "`torch.compile` or `torch.export`")  # torch's words for trace_module
    keep = ("check_trace", "check_inputs", "check_tolerance", "example_kwarg_inputs")
    return _trace(mod, inputs.get("forward"), **{k: v for k, v in kwargs.items() if k in keep})


def script(obj: Any, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """Compile a module or function without example inputs; it compiles on its first call.

    Data-dependent control flow makes it run eagerly, with one warning naming the construct. Classes
    are returned unchanged (TorchScript classes have no meaning for ember).
    """
    deprecated("script", "`torch.compile` or `torch.export`")
    if isinstance(obj, (ScriptModule, ScriptFunction)) or isinstance(obj, type):
        return obj
    if isinstance(obj, Module):
        return _wrap_module(obj, ScriptModule, "script")
    if callable(obj):
        return ScriptFunction(obj, "script")
    raise TypeError(f"ember.jit.script: expected a module or a function, got {type(obj).__name__}")


_META = "jit.json"


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Write a traced/scripted module or function (ember's graph format, no pickle): into directory ``f``, or as
    one zip archive when ``f`` is a file object (``io.BytesIO``) -- as ``torch.jit.save`` takes both."""
    deprecated("save", "`torch.export`")
    _save(m, f)


def _save(m: Any, f: Any) -> None:
    """:func:`save` without the deprecation warning (ember's own callers)."""
    if not isinstance(m, _GraphMixin):
        raise TypeError(f"ember.jit.save: expected what ember.jit.trace/script returned, got {type(m).__name__}; "
                        "trace it first: ember.jit.trace(model, example_inputs)")
    if archive.is_file_like(f):
        archive.write_archive(lambda folder: _save_directory(m, folder), f)
        return
    _save_directory(m, os.fspath(f))


def _save_directory(m: Any, path: str) -> None:
    serialize.save(m.graph, path)
    tmp = os.path.join(path, _META + ".tmp")
    with open(tmp, "w") as out:
        json.dump({"outputs": len(m.graph.outputs)}, out)
    os.replace(tmp, os.path.join(path, _META))


class LoadedScriptModule(Module):
    """A graph loaded by :func:`load`: call it with tensors; one output comes back as a tensor."""

    def __init__(self, loaded: Any) -> None:
        super().__init__()
        self.__dict__["_loaded"] = loaded

    @property
    def graph(self) -> Graph:
        return self.__dict__["_loaded"].graph

    @property
    def code(self) -> str:
        return graph_code(self.graph, None)

    def forward(self, *inputs: Any) -> Any:
        outs = self.__dict__["_loaded"](*inputs)
        return outs[0] if len(outs) == 1 else tuple(outs)


def load(f: Any, map_location: Any = None, _extra_files: Any = None, **_: Any) -> LoadedScriptModule:
    """Read what :func:`save` wrote (a directory, or an archive file/file object), or a TorchScript archive written
    by ``torch.jit.save`` (run by ember's interpreter, :mod:`ember.jit.torchscript`); runs without the original
    Python code."""
    deprecated("load", "`torch.export`")
    return _load(f, map_location, _extra_files)


def _load(f: Any, map_location: Any = None, _extra_files: Any = None) -> LoadedScriptModule:
    """:func:`load` without the deprecation warning (ember's own callers)."""
    if _is_torchscript(f):
        return torchscript.load(f, map_location, _extra_files)
    if archive.is_archive(f):
        return archive.read_archive(f, lambda folder: LoadedScriptModule(serialize.load(folder)))
    path = os.fspath(f)
    if not os.path.isdir(path):
        raise ValueError(f"ember.jit.load: {path!r} is not a directory or archive saved by ember.jit.save, nor a "
                         "TorchScript archive saved by torch.jit.save")
    return LoadedScriptModule(serialize.load(path))


def _is_torchscript(f: Any) -> bool:
    """A zip written by ``torch.jit.save`` (its members name constants.pkl and code/); a file object is put back
    where it was."""
    try:
        if archive.is_file_like(f):
            start = f.tell()
            try:
                with zipfile.ZipFile(f) as zf:
                    return torchscript.is_torchscript_members(zf.namelist())
            finally:
                f.seek(start)
        path = os.fspath(f)
        if not os.path.isfile(path) or not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as zf:
            return torchscript.is_torchscript_members(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return _STATE["tracing"] > 0


def ignore(drop: Any = False, **_: Any) -> Any:
    """Decorator leaving a function to Python (everything is Python under ember)."""
    return drop if callable(drop) else (lambda fn: fn)


unused = ignore
export = ignore


def annotate(the_type: Any, the_value: Any) -> Any:
    return the_value


def interface(obj: Any) -> Any:
    return obj


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    return mod


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    return mod


def isinstance(obj: Any, target_type: Any) -> bool:  # noqa: A001 - torch.jit.isinstance
    return builtins.isinstance(obj, target_type)


class Attribute:
    """``torch.jit.Attribute(value, type)``: only the value matters outside TorchScript."""

    def __new__(cls, value: Any, type: Any = None) -> Any:  # noqa: A002
        return value


class _FinalType:
    def __getitem__(self, item: Any) -> Any:
        return item


Final = _FinalType()


class Future(_futures.Future):
    """What ``ember.jit.fork`` returns (a ``torch.futures.Future``): the call already ran, as ember has no
    TorchScript thread pool."""

    def __init__(self, value: Any = None) -> None:
        super().__init__()
        self.set_result(value)


def fork(func: Callable, *args: Any, **kwargs: Any) -> Future:
    """``torch.jit.fork``: run ``func`` (eagerly, at once) and return a future holding its result."""
    return Future(func(*args, **kwargs))


def wait(future: Future) -> Any:
    return future.wait()


_ONEDNN = {"enabled": False}


def enable_onednn_fusion(enabled: bool) -> None:
    """Accepted: ember's CPU fusion is its own (ember.compile), oneDNN is not used."""
    _ONEDNN["enabled"] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    return _ONEDNN["enabled"]
