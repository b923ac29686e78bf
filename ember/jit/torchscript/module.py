"""What ``ember.jit.load`` returns for a TorchScript archive: an ``nn.Module`` whose ``forward`` is interpreted.

A :class:`TorchScriptModule` holds its parameters, buffers and submodules as any ember module does (so
``parameters()``, ``state_dict()``, ``load_state_dict``, ``named_modules()``, ``train()``/``eval()``, ``to()`` and
optimizers work), its other TorchScript attributes (ints, lists, strings, tensors that are neither) in its own
store, and its class's parsed code. Calling it runs the class's ``forward`` through
:class:`ember.jit.torchscript.interpreter.Interpreter` on ember tensors, so autograd records every op and gradients
reach the loaded parameters.

* ``.code`` is the TorchScript source of ``forward`` as the archive holds it (what ``torch.jit.load(...).code``
  prints, both being TorchScript's printer output); ``.code_of(name)`` gives any other method's.
* ``.graph`` raises :class:`NoTorchScriptGraph` (an AttributeError): ember does not build TorchScript's IR. To get
  an ember graph, trace the loaded module: ``ember.jit.trace(loaded, example)``.
* ``.save(f)`` writes a TorchScript archive again (:mod:`ember.jit.torchscript.writer`): the original code members
  and the current values of every attribute, so ``torch.jit.load`` reads a model trained further in ember.

Example:
    >>> import ember  # doctest: +SKIP
    >>> m = ember.jit.load("model_scripted.pt")  # doctest: +SKIP
    >>> print(m.code)  # doctest: +SKIP
"""
from __future__ import annotations

import textwrap
from typing import Any

from ember.jit.torchscript import writer
from ember.jit.torchscript.interpreter import Interpreter, TSObject
from ember.jit.torchscript.program import ClassDef, Function
from ember.nn.modules.module import Module


class NoTorchScriptGraph(AttributeError):
    """A TorchScript module loaded by ember has no TorchScript IR graph (see :class:`TorchScriptModule`)."""


class TorchScriptModule(TSObject, Module):
    """A module loaded from a TorchScript archive (see the module docstring)."""

    def __init__(self, cls: ClassDef, interpreter: Interpreter) -> None:
        Module.__init__(self)
        d = self.__dict__
        d["ts_class"] = cls
        d["_ts_interpreter"] = interpreter
        d["_ts_attrs"] = {}
        d["_ts_archive"] = None
        d["_ts_order"] = []  # attribute names in the order of the class's slots (as data.pkl held them)

    # ---- the interpreter's view: TorchScript attributes ------------------------------------------------------
    def ts_getattr(self, name: str) -> Any:
        if name == "training":
            return self.training
        for store in (self._parameters, self._buffers, self._modules, self.__dict__["_ts_attrs"],
                      self.ts_class.constants):
            if name in store:
                return store[name]
        raise KeyError(name)

    def ts_setattr(self, name: str, value: Any) -> None:
        if name == "training":
            self.training = bool(value)
        elif name in self._parameters:
            self._parameters[name] = value
        elif name in self._buffers:
            self._buffers[name] = value
        elif name in self._modules:
            if not isinstance(value, TorchScriptModule):
                raise TypeError(f"{self.ts_class.qualname}.{name} holds a module; cannot assign a "
                                f"{type(value).__name__}")
            self._modules[name] = value
        elif name in self.ts_class.constants:
            raise TypeError(f"{self.ts_class.qualname}.{name} is a Final constant")
        else:
            self.__dict__["_ts_attrs"][name] = value

    # ---- the Python view ------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in ("graph", "inlined_graph") and "ts_class" in d:
            raise self._no_graph()
        if "ts_class" in d and not name.startswith("__"):
            if name in d["_ts_attrs"]:
                return d["_ts_attrs"][name]
            if name in d["ts_class"].constants:
                return d["ts_class"].constants[name]
            if name in d["ts_class"].methods and name != "forward":
                return lambda *args, **kwargs: d["_ts_interpreter"].call_method(self, name, args, kwargs)
        return Module.__getattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_ts_interpreter"].call(self._forward_function(args), [self, *args], kwargs)

    def _forward_function(self, args: tuple) -> Function:
        """``forward``, or the first of TorchScript's overloads ``forward__0``, ``forward__1``... whose annotated
        parameter types match ``args``."""
        methods = self.ts_class.methods
        if "forward" in methods:
            return methods["forward"]
        overloads = [methods[n] for n in sorted(methods) if n.startswith("forward__") and n[9:].isdigit()]
        interpreter = self.__dict__["_ts_interpreter"]
        for fn in overloads:
            if _accepts(interpreter, fn, args):
                return fn
        raise TypeError(f"{self.ts_class.qualname} has no forward method accepting "
                        f"({', '.join(type(a).__name__ for a in args)})")

    @property
    def original_name(self) -> str:
        return self.ts_class.qualname.rsplit(".", 1)[-1]

    @property
    def code(self) -> str:
        """The TorchScript source of ``forward`` (``code_of`` gives other methods')."""
        methods = self.ts_class.methods
        name = "forward" if "forward" in methods else min((n for n in methods if n.startswith("forward")), default=None)
        if name is None:
            raise AttributeError(f"{self.ts_class.qualname} has no forward method")
        return self.code_of(name)

    def code_of(self, method: str) -> str:
        fn = self.ts_class.methods[method]
        return textwrap.dedent(" " * fn.node.col_offset + fn.source) + "\n"

    def _no_graph(self) -> NoTorchScriptGraph:
        # raised from __getattr__: an AttributeError raised by a property would be replaced by __getattr__'s own
        return NoTorchScriptGraph(
            f"{self.original_name}: a TorchScript module loaded by ember has no TorchScript IR graph (ember runs its "
            "code with an interpreter). Read .code for its TorchScript source, or trace it into an ember graph: "
            "ember.jit.trace(module, example_inputs).graph")

    def save(self, f: Any, _extra_files: dict | None = None) -> None:
        """Write this module as a TorchScript archive that ``torch.jit.load`` reads (see the module docstring)."""
        writer.save(self, f, _extra_files)

    def _get_name(self) -> str:
        return self.original_name

    def extra_repr(self) -> str:
        return "original_name=" + self.original_name


def _accepts(interpreter: Interpreter, fn: Function, args: tuple) -> bool:
    for name, value in zip(fn.params[1:], args):
        annotation = fn.annotations.get(name)
        if annotation is None:
            continue
        try:
            if not interpreter.matches(value, annotation, _Probe(fn)):
                return False
        except Exception:
            return False
    return True


class _Probe:
    """The minimal frame ``Interpreter.matches`` needs for its error messages."""

    def __init__(self, fn: Function) -> None:
        self.fn, self.line, self.locals = fn, fn.node.lineno, {}

