"""``ember.jit.load`` of a TorchScript archive: read it, parse its code, turn the pickled objects into modules.

Steps: :func:`ember.jit.torchscript.archive.read` (checked members, weights-only unpickling), then
:class:`~ember.jit.torchscript.program.Program` (the code parsed, never executed), then :func:`build`: each pickled
object of a ``Module`` class becomes a :class:`~ember.jit.torchscript.module.TorchScriptModule` whose attributes are
sorted as the class declares them (``__parameters__`` -> ``nn.Parameter``, ``__buffers__`` -> buffers, module-typed
attributes -> submodules, the rest -> TorchScript attributes); objects of other classes become
:class:`~ember.jit.torchscript.interpreter.ScriptObject`. A tensor the pickle shares between a parameter and
another attribute (an LSTM's ``_flat_weights`` list) stays one object: every reference is replaced by the
Parameter. Classes whose code defines ``__setstate__`` get it called with their pickled state, as torch does.

Example:
    >>> import ember  # doctest: +SKIP
    >>> scripted = ember.jit.load("resnet18_traced.pt")  # doctest: +SKIP
    >>> scripted(ember.randn(1, 3, 224, 224)).shape  # doctest: +SKIP
    ember.Size([1, 1000])
"""
from __future__ import annotations

from typing import Any

from ember.jit.torchscript import archive as archive_reader
from ember.jit.torchscript.errors import TorchScriptError
from ember.jit.torchscript.interpreter import Interpreter, ScriptObject
from ember.jit.torchscript.module import TorchScriptModule
from ember.jit.torchscript.program import Program
from ember.jit.torchscript.unpickler import PickledObject
from ember.nn.parameter import Parameter
from ember.serialization.errors import CheckpointError
from ember.tensor import Tensor


def load(f: Any, map_location: Any = None, _extra_files: dict | None = None) -> TorchScriptModule:
    """Load the TorchScript archive ``f`` (a path or binary file object) as a :class:`TorchScriptModule`."""
    if map_location is not None and str(map_location) != "cpu":
        raise ValueError(f"ember.jit.load: map_location={map_location!r} is not supported for TorchScript archives; "
                         "load on the CPU and move the module with .to(device)")
    read = archive_reader.read(f, list(_extra_files or {}))
    program = Program(read.code)
    interpreter = Interpreter(program, read.constants)
    if not isinstance(read.data, PickledObject):
        raise CheckpointError(read.where, "data.pkl", f"holds a {type(read.data).__name__}, not a TorchScript module")
    root = _Builder(program, interpreter, read.where).build(read.data)
    if not isinstance(root, TorchScriptModule):
        raise CheckpointError(read.where, "data.pkl", f"its root object of {read.data.qualname} is not a Module")
    root.__dict__["_ts_archive"] = read
    for name in list(_extra_files or {}):
        _extra_files[name] = read.extra.get(name, b"")
    return root


class _Builder:
    def __init__(self, program: Program, interpreter: Interpreter, where: str) -> None:
        self.program, self.interpreter, self.where = program, interpreter, where
        self.built: dict[int, Any] = {}
        self.parameters: dict[int, Parameter] = {}  # id(pickled tensor) -> its Parameter

    def build(self, root: PickledObject) -> Any:
        out = self.value(root)
        self._share_parameters(out, set())
        return out

    def value(self, obj: Any) -> Any:
        key = id(obj)
        if key in self.built:
            return self.built[key]
        if isinstance(obj, PickledObject):
            return self._object(obj)
        if isinstance(obj, list):
            out: Any = []
            self.built[key] = out
            out.extend(self.value(v) for v in obj)
            return out
        if isinstance(obj, tuple):
            out = tuple(self.value(v) for v in obj)
        elif isinstance(obj, dict):
            out = {k: self.value(v) for k, v in obj.items()}
        else:
            return obj
        self.built[key] = out
        return out

    def _object(self, obj: PickledObject) -> Any:
        cls = self.program.classes.get(obj.qualname)
        if cls is None:
            raise CheckpointError(self.where, "data.pkl", f"has an object of class {obj.qualname}, which the archive's "
                                  "code does not define")
        if cls.kind == "module":
            made: Any = TorchScriptModule(cls, self.interpreter)
        elif cls.kind == "class":
            made = ScriptObject(cls)
        else:
            raise CheckpointError(self.where, "data.pkl", f"has an object of {cls.kind} class {obj.qualname}")
        self.built[id(obj)] = made
        if "__setstate__" in cls.methods:
            self.interpreter.call_method(made, "__setstate__", [self.value(obj.state)], {})
            return made
        state = obj.state
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise CheckpointError(self.where, "data.pkl", f"the state of a {obj.qualname} is not a dict of attributes")
        order = list(state)  # the class's attribute slots, in order (save writes them back so)
        if isinstance(made, TorchScriptModule):
            made.__dict__["_ts_order"] = order
        else:
            made.order = order
        for name, raw in state.items():
            if name.startswith("__"):
                raise CheckpointError(self.where, "data.pkl", f"{obj.qualname} has attribute {name!r}; names with "
                                      "leading double underscores are refused")
            value = self.value(raw)
            if isinstance(made, ScriptObject):
                made.attrs[name] = value
            elif name == "training":
                made.__dict__["training"] = bool(value)
            elif name in cls.parameters:
                made.register_parameter(name, self._parameter(value, obj.qualname, name))
            elif name in cls.buffers:
                self._check_tensor(value, obj.qualname, name)
                made.register_buffer(name, value)
            elif isinstance(value, TorchScriptModule):
                made.add_module(name, value)
            else:
                made.__dict__["_ts_attrs"][name] = value
        return made

    def _check_tensor(self, value: Any, owner: str, name: str) -> None:
        if value is not None and not isinstance(value, Tensor):
            raise CheckpointError(self.where, "data.pkl", f"{owner}.{name} is declared a parameter or buffer but "
                                  f"holds a {type(value).__name__}")

    def _parameter(self, value: Any, owner: str, name: str) -> Parameter | None:
        self._check_tensor(value, owner, name)
        if value is None:
            return None
        if id(value) not in self.parameters:
            self.parameters[id(value)] = Parameter(value.detach(), requires_grad=value.requires_grad)
        return self.parameters[id(value)]

    def _share_parameters(self, obj: Any, seen: set) -> None:
        """Replace every other reference to a tensor that became a Parameter by that Parameter."""
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, TorchScriptModule):
            attrs = obj.__dict__["_ts_attrs"]
            for name, value in attrs.items():
                attrs[name] = self._swap(value, seen)
            for child in obj._modules.values():
                self._share_parameters(child, seen)
        elif isinstance(obj, ScriptObject):
            for name, value in obj.attrs.items():
                obj.attrs[name] = self._swap(value, seen)

    def _swap(self, value: Any, seen: set) -> Any:
        if isinstance(value, Tensor):
            return self.parameters.get(id(value), value)
        if isinstance(value, list):
            value[:] = [self._swap(v, seen) for v in value]
            return value
        if isinstance(value, tuple):
            return tuple(self._swap(v, seen) for v in value)
        if isinstance(value, dict):
            for k in list(value):
                value[k] = self._swap(value[k], seen)
            return value
        if isinstance(value, (TorchScriptModule, ScriptObject)):
            self._share_parameters(value, seen)
        return value


__all__ = ["load", "TorchScriptError"]
