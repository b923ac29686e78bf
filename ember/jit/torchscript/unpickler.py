"""The pickles of a TorchScript archive (``data.pkl``, ``constants.pkl``), read through the restricted unpickler.

A ``torch.jit.save`` archive pickles its module tree as objects of TorchScript classes: ``GLOBAL '__torch__.MLP'``,
``NEWOBJ`` with no arguments, then ``BUILD`` with a dict of attributes (parameters, buffers, submodules, plain
values). Nothing of that may run Python code, so a ``__torch__.*`` global resolves to a :class:`ClassRef` (a name,
not a class) and ``NEWOBJ`` of one makes a :class:`PickledObject` that only records its qualified name and state;
:mod:`ember.jit.torchscript.loader` turns those into modules once the archive's code has been parsed. The typed
list helpers torch writes (``torch.jit._pickle.build_intlist``, ``restore_type_tag``, ...) are allowed here and
only here; every other global goes through ember's weights-only allow-list.

Example:
    >>> import io, pickle
    >>> data = pickle.dumps({"n": 3})
    >>> TorchScriptUnpickler(io.BytesIO(data), "x.pt").load()
    {'n': 3}
"""
from __future__ import annotations

import re
from typing import Any, Callable

from ember.serialization.errors import CheckpointError, UnsafeGlobalError
from ember.serialization.restricted_unpickler import Unpickler
from ember.tensor import Tensor

# torch.jit._pickle's helpers: each returns its (already built) argument; the type tag is only checked
_TYPE_TAG = re.compile(r"[A-Za-z0-9_\[\], .]{1,200}")
_QUALNAME = re.compile(r"__torch__(\.[A-Za-z_][A-Za-z0-9_]*)*")


class ClassRef:
    """What ``GLOBAL '__torch__.<module> <Class>'`` unpickles to: the class's qualified name, nothing callable."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname

    def __repr__(self) -> str:
        return f"<TorchScript class {self.qualname}>"


class PickledObject:
    """An object of a TorchScript class as the pickle holds it: its class's qualified name and its state."""

    __slots__ = ("qualname", "state", "has_state")

    def __init__(self, qualname: str) -> None:
        self.qualname, self.state, self.has_state = qualname, None, False

    def __repr__(self) -> str:
        return f"<pickled {self.qualname}>"


def _list_of(check: Callable[[Any], bool], name: str) -> Callable[[Any], list]:
    def build(values: Any) -> list:
        if not isinstance(values, list) or not all(check(v) for v in values):
            raise CheckpointError("data.pkl", f"torch.jit._pickle.{name}", "expects a list of the right element type")
        return values
    return build


def _restore_type_tag(value: Any, tag: Any) -> Any:
    if not isinstance(tag, str) or not _TYPE_TAG.fullmatch(tag):
        raise CheckpointError("data.pkl", "torch.jit._pickle.restore_type_tag", f"type tag {tag!r:.60} is malformed")
    return value


HELPERS = {
    "build_intlist": _list_of(lambda v: isinstance(v, int) and not isinstance(v, bool), "build_intlist"),
    "build_doublelist": _list_of(lambda v: isinstance(v, float), "build_doublelist"),
    "build_boollist": _list_of(lambda v: isinstance(v, bool), "build_boollist"),
    "build_tensorlist": _list_of(lambda v: isinstance(v, Tensor), "build_tensorlist"),
    "restore_type_tag": _restore_type_tag,
}


class TorchScriptUnpickler(Unpickler):
    """ember's weights-only unpickler plus TorchScript's class names and typed-list helpers (see the module doc)."""

    dispatch = dict(Unpickler.dispatch)

    def __init__(self, file: Any, where: Any, storage: Callable[..., Any] | None = None) -> None:
        super().__init__(file, where, storage=storage, weights_only=True)

    def find_class(self, module: str, name: str) -> Any:
        if module == "__torch__" or module.startswith("__torch__."):
            qualname = f"{module}.{name}"
            if not _QUALNAME.fullmatch(qualname) or ".torch.classes." in qualname + ".":
                raise UnsafeGlobalError(self.where, f"global {qualname!r:.80}", "is not the name of a TorchScript "
                                        "class ember can load (C++ custom classes, torch.classes.*, are not)")
            ref = ClassRef(qualname)
            self._callables.add(id(ref))
            return ref
        if module == "torch.jit._pickle" and name in HELPERS:
            obj = HELPERS[name]
            self._callables.add(id(obj))
            return obj
        return super().find_class(module, name)

    def load_newobj(self) -> None:
        args, cls = self.stack[-1], self.stack[-2]
        if isinstance(cls, ClassRef):
            if args != ():
                raise CheckpointError(self.where, f"object of {cls.qualname}", "is created with arguments; "
                                      "TorchScript objects are created empty and then given their state")
            del self.stack[-2:]
            self.append(PickledObject(cls.qualname))
            return
        super().load_newobj()

    dispatch[b"\x81"[0]] = load_newobj

    def load_build(self) -> None:
        state, inst = self.stack[-1], self.stack[-2]
        if isinstance(inst, PickledObject):
            if inst.has_state:
                raise CheckpointError(self.where, f"object of {inst.qualname}", "is given its state twice")
            inst.state, inst.has_state = state, True
            self.stack.pop()
            return
        super().load_build()

    dispatch[b"b"[0]] = load_build

    def load_reduce(self) -> None:
        if isinstance(self.stack[-2], ClassRef):
            raise UnsafeGlobalError(self.where, "REDUCE", f"calls {self.stack[-2].qualname}; TorchScript objects are "
                                    "made with NEWOBJ and BUILD only")
        super().load_reduce()

    dispatch[b"R"[0]] = load_reduce
