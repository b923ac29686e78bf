"""Unpickling with PyTorch's ``weights_only=True`` promise: nothing outside an allow-list is built.

:class:`Unpickler` reads a pickle opcode by opcode (Python's own pickle machine) with four gates:

* ``GLOBAL``/``STACK_GLOBAL`` resolve only names in :func:`ember.serialization.torch_names.allowed`
  (tensor rebuild functions, storages, dtypes, ``torch.Size``/``device``, ``OrderedDict``, ...)
  and names the user allowed (:mod:`ember.serialization.safe_globals`); nothing is imported. Any
  other name raises :class:`UnsafeGlobalError` naming it and the two ways to opt in;
* ``REDUCE`` calls only callables that came from those names;
* ``BUILD`` sets state only on ``OrderedDict``s (string keys) and on instances of user-allowed
  classes; ``NEWOBJ`` makes only allowed classes; ``SETITEM(S)``/``APPEND(S)``/``ADDITEMS`` act
  only on real dicts/lists/sets (so a pickle cannot call a tensor's ``__setitem__``);
* persistent ids must be ``('storage', <storage type>, key, location, numel[, view])``, and the
  storage comes from the container's loader, which checks it against the file.

With ``weights_only=False`` the same class runs as a full unpickler (any importable global), still
mapping torch's names to ember's so PyTorch files load without torch.

Example:
    >>> import io, pickle
    >>> Unpickler(io.BytesIO(pickle.dumps({"lr": 0.1})), where="x").load()
    {'lr': 0.1}
"""
from __future__ import annotations

import _compat_pickle
import collections
import pickle
import struct
from typing import Any, Callable

from ember import return_types
from ember.serialization import safe_globals, torch_names
from ember.serialization.errors import CheckpointError, UnsafeGlobalError

_OPT_IN = ("If you trust the file, load it with weights_only=False (which can run arbitrary code from it), or allow "
           "this global with "
           "ember.serialization.add_safe_globals([{obj}]) or `with ember.serialization.safe_globals([{obj}]):`.")


class Unpickler(pickle._Unpickler):  # the pure-Python machine, so each opcode can be gated
    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: Any, where: Any, storage: Callable[..., Any] | None = None,
                 weights_only: bool = True, encoding: str = "utf-8") -> None:
        super().__init__(file, encoding=encoding)
        self.where = where
        self.storage = storage
        self.weights_only = weights_only
        self._callables: set[int] = set()  # ids of objects find_class handed out (REDUCE may call them)
        self._classes: set[int] = set()  # user-allowed classes (BUILD/NEWOBJ may use them)

    def refuse(self, full: str, why: str | None = None) -> None:
        """Refuse global ``full``, in torch's words ("Weights only load failed ... Unsupported global: GLOBAL x"),
        naming the file and both ways to opt in."""
        if why:
            raise UnsafeGlobalError(self.where, f"global {full!r}", why)
        raise UnsafeGlobalError(self.where, None, f"Weights only load failed. Unsupported global: GLOBAL {full} was "
                                "not an allowed global by default: weights_only=True (the default) builds only tensors, "
                                "storages, dtypes, devices, containers and numbers. " + _OPT_IN.format(obj=full))

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:  # Python 2 names (protocol 2 writes __builtin__.set)
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        table = torch_names.allowed()
        if module in ("torch.return_types", "ember.return_types") and return_types.is_return_type(
                getattr(return_types, name, None)):
            obj = self._return_type(full, getattr(return_types, name))
        elif full in table:
            obj = table[full]
        elif full in torch_names.UNSUPPORTED:
            self.refuse(full, torch_names.UNSUPPORTED[full])
        else:
            allowed, obj = safe_globals.lookup(full)
            if allowed:
                if isinstance(obj, type):
                    self._classes.add(id(obj))
            elif self.weights_only:
                self.refuse(full)
            else:
                obj = _ember_counterpart(module, name)
                if obj is None:
                    obj = super().find_class(module, name)
                if isinstance(obj, type):
                    self._classes.add(id(obj))
        self._callables.add(id(obj))
        return obj

    def _return_type(self, full: str, cls: type) -> type:
        """``torch.return_types.max``: ember's class, allowed as torch allows it (by the user, under either name)."""
        if self.weights_only and not (safe_globals.lookup(full)[0]
                                      or safe_globals.lookup(f"ember.return_types.{cls.__name__}")[0]):
            self.refuse(full)
        self._classes.add(id(cls))
        return cls

    def persistent_load(self, pid: Any) -> Any:
        if (not self.weights_only and isinstance(pid, tuple) and len(pid) == 4 and pid[0] == "module"
                and isinstance(pid[1], type)):
            # the legacy format names each pickled module's class with its source file and text (torch compares
            # them to warn about changed code); the class itself came through find_class, so it is the answer
            return pid[1]
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise CheckpointError(self.where, "persistent id", f"{pid!r:.100} is not ('storage', type, key, "
                                  "location, numel)")
        _, kind, key, location, numel = pid[:5]
        view = pid[5] if len(pid) == 6 else None
        if not isinstance(kind, torch_names.StorageType):
            raise CheckpointError(self.where, "persistent id", f"storage type {kind!r:.60} is not a torch storage type")
        if not isinstance(key, str) or not isinstance(location, str) or isinstance(numel, bool) \
                or not isinstance(numel, int) or numel < 0:
            raise CheckpointError(self.where, "persistent id", f"{pid!r:.100} has a bad key, location or numel")
        if view is not None and not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
                                     and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                             for v in view[1:])):
            raise CheckpointError(self.where, f"storage {key!r}", f"view {view!r:.60} is not (key, offset, size)")
        if self.storage is None:
            raise CheckpointError(self.where, "persistent id", "a plain pickle cannot refer to storages")
        return self.storage(key, kind, location, numel, view)

    # ---- gated opcodes ---------------------------------------------------------------------
    def load_reduce(self) -> None:
        args = self.stack[-1]
        func = self.stack[-2]
        if self.weights_only and id(func) not in self._callables:
            raise UnsafeGlobalError(self.where, "REDUCE", f"calls {type(func).__name__} {func!r:.60}, which did not "
                                    "come from an allowed global")
        if not isinstance(args, tuple):
            raise CheckpointError(self.where, "REDUCE", f"arguments are a {type(args).__name__}, not a tuple")
        super().load_reduce()

    dispatch[pickle.REDUCE[0]] = load_reduce

    def _check_class(self, cls: Any, opcode: str) -> None:
        if not self.weights_only:
            return
        if not isinstance(cls, type) or id(cls) not in self._callables:
            raise UnsafeGlobalError(self.where, opcode, f"makes {cls!r:.60}, which is not an allowed class")

    def load_newobj(self) -> None:
        self._check_class(self.stack[-2], "NEWOBJ")
        super().load_newobj()

    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self) -> None:
        self._check_class(self.stack[-3], "NEWOBJ_EX")
        super().load_newobj_ex()

    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_build(self) -> None:
        state, inst = self.stack[-1], self.stack[-2]
        if self.weights_only:
            if isinstance(inst, collections.OrderedDict):
                if not (isinstance(state, dict) and all(isinstance(k, str) and not k.startswith("__") for k in state)):
                    raise UnsafeGlobalError(self.where, "BUILD", "state of an OrderedDict must be a dict of plain "
                                            "attribute names")
            elif id(type(inst)) not in self._classes:
                raise UnsafeGlobalError(self.where, "BUILD", f"sets the state of a {type(inst).__name__}, which is not "
                                        "an allowed class. " + _OPT_IN.format(obj=type(inst).__qualname__))
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build

    def _container(self, kinds: tuple, opcode: str, depth: int) -> None:
        """SETITEM(S)/APPEND(S)/ADDITEMS act only on real dicts/lists/sets (never on a tensor's __setitem__)."""
        if not self.weights_only:
            return
        target = self.stack[-depth] if depth else self.metastack[-1][-1] if self.metastack else None
        if not isinstance(target, kinds):
            raise UnsafeGlobalError(self.where, opcode, f"applied to a {type(target).__name__}, not a "
                                    f"{'/'.join(k.__name__ for k in kinds)}")

    def load_setitem(self) -> None:
        self._container((dict,), "SETITEM", 3)
        super().load_setitem()

    def load_setitems(self) -> None:
        self._container((dict,), "SETITEMS", 0)
        super().load_setitems()

    def load_append(self) -> None:
        self._container((list,), "APPEND", 2)
        super().load_append()

    def load_appends(self) -> None:
        self._container((list,), "APPENDS", 0)
        super().load_appends()

    def load_additems(self) -> None:
        self._container((set,), "ADDITEMS", 0)
        super().load_additems()

    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.ADDITEMS[0]] = load_additems

    for _opcode in (pickle.INST, pickle.OBJ):  # protocol 0/1 class calls: find_class gates the class; forbid here
        def _refuse_old(self: "Unpickler", _name: str = _opcode.decode("latin1")) -> None:
            if self.weights_only:
                raise UnsafeGlobalError(self.where, f"opcode {_name!r}", "protocol 0/1 object creation is not allowed")
            pickle._Unpickler.dispatch[_name.encode("latin1")[0]](self)

        dispatch[_opcode[0]] = _refuse_old
    del _opcode


    def load(self) -> Any:
        """Unpickle; a malformed pickle raises CheckpointError instead of whatever the machine hit."""
        try:
            return super().load()
        except CheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, KeyError, IndexError, ValueError, TypeError, AttributeError,
                RecursionError, MemoryError, OverflowError, UnicodeDecodeError, struct.error) as error:
            if not self.weights_only and not isinstance(error, (pickle.UnpicklingError, EOFError, KeyError, struct.error)):
                raise  # the full unpickler: let the object's own errors through
            raise CheckpointError(self.where, "pickle", f"is malformed ({type(error).__name__}: {error!s:.200})") \
                from None


def _ember_counterpart(module: str, name: str) -> Any:
    """For the full unpickler: ember's object for a ``torch.*``/``torchvision.*`` global (``torch.nn.modules.linear
    Linear`` -> ``ember.nn.Linear``), so a whole model saved by torch loads as an ember module even where torch is
    installed (a torch module holding ember tensors would not run); None when ember has no such name."""
    if module.split(".")[0] not in ("torch", "torchvision"):
        return None
    from ember.run import alias  # ember.run.alias imports the ember package, which imports this module: a real cycle
    try:
        return getattr(alias.module_for(module), name, None)
    except ImportError:
        return None


def restricted_loads(data: bytes, where: Any, weights_only: bool = True) -> Any:
    """Unpickle ``data`` (no storages) through the gates above."""
    import io

    return Unpickler(io.BytesIO(data), where, weights_only=weights_only).load()
