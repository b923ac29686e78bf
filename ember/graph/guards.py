"""The Python state a compiled function's graph depends on: what ``ember.compile`` guards besides its arguments.

A trace runs the function's Python once and keeps only the tensor ops: a Python number it read (a global
``SCALE``, ``cfg.scale``, ``table[0]``) is baked into the graph as a constant. ``torch.compile``'s dynamo guards
every such value it read and recompiles when one changes; ember cannot see individual reads (it runs the
Python), so it guards what the code *names*:

* **Whose code.** The compiled function, the user functions it reaches through its globals and closures
  (helpers calling helpers, nested ``def``s and lambdas; up to :data:`MAX_FUNCTIONS`), and every function
  defined on the classes of the user's own modules it reaches (``forward`` and its helper methods). Library
  code (``ember.*``) is not scanned: its Python reads only its arguments and module attributes, which the
  module's own ``config_key`` guards.
* **What of it.** Every global and closure variable those codes name. Numbers and strings by value (a float
  by its ``repr``: ``-0.0``, ``nan``), lists/tuples/dicts by identity, length and (up to
  :data:`MAX_ITEMS` entries) their items, plain objects (an ``argparse.Namespace``, a config class)
  by identity and the attributes the codes name (``cfg.scale``: ``scale`` is in the code's names), items and
  attributes looked into :data:`DEPTH` levels (``CFG.opts["p"]``). Anything else (a tensor, a module, a
  function) by identity: rebinding it retraces.
* **Side effects.** A trace that changes any of these values (``losses.append(loss)``, ``acc.n += 1``,
  ``global step; step += 1``) has Python side effects a graph cannot replay (dynamo replays them); the
  compiled function then restores what the trace changed and runs that signature eagerly, so the Python
  state evolves exactly as in eager code (:func:`snapshot` / :func:`restore`).

Not guarded (documented): values three levels down (``cfg.sub.opts["p"]``), items of containers over
:data:`MAX_ITEMS` entries (their length still is), functions reached only through objects' attributes.
``torch._dynamo.reset()`` drops every graph when such a value changed.

Example:
    >>> from ember.graph import guards
    >>> SCALE = 2.0
    >>> def f(x): return x * SCALE
    >>> entries, names = guards.watched(f, [])
    >>> guards.values(entries, names)
    ((<class 'float'>, '2.0'),)
"""
from __future__ import annotations

import types
from typing import Any, Iterable

import numpy as np

from ember import random as _random

MAX_FUNCTIONS = 64  # user functions scanned for names, per compiled function
MAX_ITEMS = 64  # container entries / object attributes guarded by value (larger ones: identity and length)
DEPTH = 2  # levels looked into below a global: CFG.opts["p"]

_SCALARS = (int, bool, str, type(None))
_FLOATS = (float, complex)
_MODULE_TYPE = types.ModuleType
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
_CONTAINERS = (list, tuple, dict)
_ABSENT = object()


def _library(obj: Any) -> bool:
    """Code of ember itself or of a library outside the user's program: not scanned for names."""
    name = getattr(obj, "__module__", None) or ""
    return name == "ember" or name.startswith(("ember.", "numpy", "builtins", "typing", "functools", "torch"))


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    """A code object and those nested in it (inner ``def``s, lambdas, comprehensions): they share its globals."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions_of(fn: Any, modules: list) -> list:
    """The plain Python functions whose reads a trace of ``fn`` bakes in: ``fn`` (a module's methods when ``fn``
    is a module), the methods of the user's module classes, and the user functions those reach."""
    start: list = []
    f = getattr(fn, "__func__", fn)
    if isinstance(f, types.FunctionType):
        start.append(f)
    for m in modules:
        for cls in type(m).__mro__:
            if _library(cls) or cls is object:
                break
            start.extend(v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                         for v in vars(cls).values() if isinstance(v, (types.FunctionType, staticmethod, classmethod)))
    seen: dict = {}
    todo = start
    while todo and len(seen) < MAX_FUNCTIONS:
        f = todo.pop()
        if not isinstance(f, types.FunctionType) or id(f) in seen:
            continue
        seen[id(f)] = f
        globs = f.__globals__
        reached = [globs.get(n) for c in _codes(f.__code__) for n in c.co_names]
        reached += [c.cell_contents for c in (f.__closure__ or ()) if cell_filled(c)]
        todo.extend(r for r in reached if isinstance(r, types.FunctionType) and not _library(r) and id(r) not in seen)
    return list(seen.values())


def cell_filled(cell: Any) -> bool:
    """Whether a closure cell holds a value yet (reading an empty one raises)."""
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False


def watched(fn: Any, modules: list) -> tuple[list, frozenset]:
    """``(entries, names)``: where the function's code reads globals and closure variables (``(deep, dict, name)``
    or ``(deep, cell, None)``, each once) and every name its codes use (the attributes of plain objects worth
    guarding). ``deep`` is False for ember's own functions (an optimizer's compiled update closes over its param
    group, whose numbers it passes as graph inputs): their bindings are guarded by identity only."""
    entries: list = []
    seen: set = set()
    names: set = set()
    for f in _functions_of(fn, modules):
        globs = f.__globals__
        deep = not _library(f)
        for code in _codes(f.__code__):
            if deep:
                names.update(code.co_names)
            for n in code.co_names:
                if n in globs and (id(globs), n) not in seen:
                    seen.add((id(globs), n))
                    entries.append((deep, globs, n))
        for cell in f.__closure__ or ():
            if id(cell) not in seen:
                seen.add(id(cell))
                entries.append((deep, cell, None))
    return entries, frozenset(names)


def _read(entry: tuple) -> Any:
    if entry[2] is not None:
        return entry[1].get(entry[2], _ABSENT)
    try:
        return entry[1].cell_contents
    except ValueError:  # an empty cell (assigned later in the enclosing function)
        return _ABSENT


def _plain_object(value: Any) -> bool:
    """An instance holding configuration (a Namespace, a dataclass, a user class): its named attributes are read."""
    if isinstance(value, _FUNCTION_TYPES) or type(value) is _MODULE_TYPE:
        return False
    d = getattr(value, "__dict__", None)
    if type(d) is not dict:
        return False
    # tensors, modules and optimizers have guards of their own (identity, config_key, hyperparameters)
    return not (hasattr(value, "_version") or hasattr(value, "_parameters") or hasattr(value, "param_groups"))


_KINDS: dict = {}  # type -> how its values are guarded (decided once per type: this runs on every call)


def _kind(value: Any) -> str:
    kind = type(value)
    tag = _KINDS.get(kind)
    if tag is None:
        tag = ("scalar" if kind in _SCALARS else "float" if kind in _FLOATS else "skip" if kind is _MODULE_TYPE
               else "container" if kind in _CONTAINERS else "object" if _plain_object(value) else "identity")
        _KINDS[kind] = tag
    return tag


def fingerprint(value: Any, names: frozenset, depth: int = DEPTH) -> Any:
    """The cache-key part of one watched value (see the module docstring); containers and objects are looked
    into ``depth`` levels (``CFG.opts["p"]``: the global, its attribute, the dict's item)."""
    tag = _kind(value)
    if tag == "scalar":
        return (type(value), value)
    if tag == "float":
        return (type(value), repr(value))
    if tag == "identity" or depth == 0:
        return id(value)
    if tag == "skip":
        return None
    if tag == "container":
        if len(value) > MAX_ITEMS:
            return (id(value), len(value))
        if type(value) is dict:
            return (id(value), tuple([(k if type(k) in _SCALARS else id(k), fingerprint(v, names, depth - 1))
                                      for k, v in value.items()]))
        return (id(value), tuple([fingerprint(v, names, depth - 1) for v in value]))
    d = value.__dict__
    if len(d) > MAX_ITEMS:
        return (id(value), len(d))
    return (id(value), tuple([(k, fingerprint(v, names, depth - 1)) for k, v in d.items() if k in names]))


def inside(objects: list, depth: int = DEPTH) -> list:
    """``objects`` and what their containers and plain objects hold, ``depth`` levels down (a model or optimizer
    kept in a namespace, a trainer object, a list of modules), each once."""
    found: dict = {}
    level = list(objects)
    for _ in range(depth + 1):
        nxt: list = []
        for o in level:
            if id(o) in found:
                continue
            found[id(o)] = o
            kind = type(o)
            if kind in _CONTAINERS and len(o) <= MAX_ITEMS:
                nxt.extend(o.values() if kind is dict else o)
            elif _plain_object(o) and len(o.__dict__) <= MAX_ITEMS:
                nxt.extend(o.__dict__.values())
        level = nxt
    return list(found.values())


def values(entries: list, names: frozenset) -> tuple:
    """The cache-key part for the watched entries (runs on every call of a compiled function: kept flat)."""
    out = []
    kinds = _KINDS
    for deep, where, name in entries:
        if name is not None:
            v = where.get(name, _ABSENT)
        else:
            try:
                v = where.cell_contents
            except ValueError:  # an empty cell (assigned later in the enclosing function)
                v = _ABSENT
        tag = kinds.get(type(v)) or _kind(v)
        if tag == "identity":
            out.append(id(v))
        elif tag != "skip":
            out.append(fingerprint(v, names, DEPTH if deep else 0))
    return tuple(out)


def snapshot(entries: list, modules: list) -> list:
    """What :func:`restore` needs to undo a trace's Python side effects: each watched binding, shallow copies
    of the containers and objects they hold, and each module's own attributes."""
    saved: list = []
    for e in entries:
        value = _read(e)
        kind = type(value)
        copy = list(value) if kind is list else dict(value) if kind is dict else \
            dict(value.__dict__) if _plain_object(value) else None
        saved.append((e, value, copy))
    for m in modules:
        copy = dict(m.__dict__)
        if type(copy.get("_config_changes")) is dict:  # (changed in place by Module.__setattr__)
            copy["_config_changes"] = dict(copy["_config_changes"])
        saved.append((m, None, copy))
    return saved


def restore(saved: list) -> None:
    """Put back the bindings, container contents and object attributes :func:`snapshot` recorded."""
    for e, value, copy in saved:
        if not isinstance(e, tuple):  # a module: its attributes (numbers, flags, bookkeeping)
            e.__dict__.clear()
            e.__dict__.update(copy)
            continue
        if _read(e) is not value:
            if e[2] is not None:
                if value is _ABSENT:
                    e[1].pop(e[2], None)
                else:
                    e[1][e[2]] = value
            elif value is not _ABSENT:
                e[1].cell_contents = value
        if copy is None:
            continue
        if type(value) is list:
            value[:] = copy
        elif type(value) is dict:
            value.clear()
            value.update(copy)
        else:
            value.__dict__.clear()
            value.__dict__.update(copy)


def rng_states(entries: list) -> list:
    """``(generator, state bytes)`` of ember's default generator and every CPU generator the watched bindings hold:
    a trace never draws from them (random nodes draw at run time), so a change during the trace is the function's
    own (``manual_seed`` inside it, a sampler that draws eagerly) and a graph would not repeat it."""
    gens = [_random.default_generator]
    for e in entries:
        for v in inside([_read(e)]):
            if isinstance(v, _random.Generator) and v.stream is not None and all(v is not g for g in gens):
                gens.append(v)
    return [(g, g.stream.state_bytes()) for g in gens if g.stream is not None]


def rng_restore(saved: list) -> bool:
    """Put back generators the trace moved; True when one had moved."""
    moved = False
    for g, state in saved:
        if g.stream.state_bytes() != state:
            g.set_state(np.frombuffer(state, dtype=np.uint8))
            moved = True
    return moved
