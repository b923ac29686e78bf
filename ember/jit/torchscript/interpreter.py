"""Run the TorchScript code of an archive by walking its Python-syntax AST: no ``exec``, no ``eval``, no imports.

The interpreter knows a fixed set of constructs (everything TorchScript's printer emits) and refuses anything else
with :class:`TorchScriptError` naming the file, the line and the construct:

* statements: assignment (to names, tuples, ``list[i]``, ``self.attr``), ``+=``-style updates, ``if``, ``for`` over
  ranges/lists/tuples/dicts/strings/tensors, ``while``, ``break``, ``continue``, ``return``, ``pass``, ``assert``,
  expression statements;
* expressions: literals, tuples/lists/dicts, arithmetic, comparisons, ``and``/``or``/``not``, ``a if c else b``,
  indexing and slicing of lists/tuples/strings/dicts/tensors;
* names: local variables, ``torch``/``ops``/``__torch__`` dotted names (inert until called: a call resolves the whole
  name through the allow-list of :mod:`ember.jit.torchscript.builtins`, or to a function or class of the archive's
  own code), ``CONSTANTS.c<i>``, and the forms ``annotate``, ``unchecked_cast``, ``uninitialized``, ``isinstance``,
  ``int``/``float``/``bool``/``str``, ``getattr``/``hasattr`` with a string literal, ``range``, ``len``,
  ``print``, ``enumerate``, ``zip``;
* attributes: only on the loaded objects themselves (their parameters, buffers, submodules, attributes, constants
  and methods, never a Python attribute: no ``__class__``, no ``__dict__``), on NamedTuple values (their fields)
  and on ``CONSTANTS``. Tensors, strings and numbers have no attributes here (TorchScript prints methods as
  ``torch.<op>(x, ...)``).

Operands of arithmetic and comparisons must be data (numbers, strings, None, tensors, lists, tuples, dicts,
dtypes, devices), so no operator of another Python object is ever called.

Example:
    >>> from ember.jit.torchscript.program import Program
    >>> unit = Program({"__torch__": "def f(n: int) -> int:\\n  s = 0\\n  for i in range(n):\\n    s = torch.add(s, i)\\n"
    ...                               "  return s\\n"})
    >>> Interpreter(unit, ()).call(unit.functions["__torch__.f"], (4,), {})
    6
"""
from __future__ import annotations

import ast
import operator
from typing import Any, Callable

from ember import dtypes
from ember.device import device as Device
from ember.jit.torchscript import builtins
from ember.jit.torchscript.errors import TorchScriptError
from ember.jit.torchscript.program import ClassDef, Function, Program
from ember.tensor import Tensor

_MAX_DEPTH = 48  # nested TorchScript calls (real models nest under 12; each costs ~10 Python frames)
_MAX_NAME = 24  # parts of a dotted name


class TSObject:
    """An object of a TorchScript class (a loaded module or a class instance): attributes live in its own stores."""

    ts_class: ClassDef

    def ts_getattr(self, name: str) -> Any:  # raises KeyError when the object has no such attribute
        raise KeyError(name)

    def ts_setattr(self, name: str, value: Any) -> None:
        raise KeyError(name)


class ScriptObject(TSObject):
    """An instance of a (non-module) TorchScript class."""

    def __init__(self, cls: ClassDef, attrs: dict | None = None) -> None:
        self.ts_class = cls
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.order: list[str] = list(self.attrs)

    def ts_getattr(self, name: str) -> Any:
        if name in self.attrs:
            return self.attrs[name]
        return self.ts_class.constants[name]

    def ts_setattr(self, name: str, value: Any) -> None:
        self.attrs[name] = value

    def __repr__(self) -> str:
        return f"<TorchScript object {self.ts_class.qualname}>"


class NamedTupleValue(tuple):
    """A value of a TorchScript NamedTuple class: a tuple whose fields the interpreter can read by name."""

    qualname: str
    fields: tuple

    def __new__(cls, qualname: str, fields: list[str], values: list) -> "NamedTupleValue":
        out = super().__new__(cls, values)
        out.qualname, out.fields = qualname, tuple(fields)
        return out


class Namespace:
    """A dotted name (``torch.nn``, ``ops.prim``, ``__torch__.torch.nn.functional.relu``); inert until called."""

    __slots__ = ("path",)

    def __init__(self, path: tuple) -> None:
        self.path = path

    def __repr__(self) -> str:
        return ".".join(self.path)


class BoundMethod:
    __slots__ = ("obj", "fn")

    def __init__(self, obj: TSObject, fn: Function) -> None:
        self.obj, self.fn = obj, fn


class _Constants:
    """``CONSTANTS``: the tuple of constants.pkl, read as ``CONSTANTS.c0``, ``CONSTANTS.c1``, ..."""

    def __init__(self, values: tuple) -> None:
        self.values = values


class _Uninitialized:
    def __repr__(self) -> str:
        return "uninitialized"


UNINITIALIZED = _Uninitialized()
_DATA = (int, float, bool, str, type(None), Tensor, list, tuple, dict, dtypes.dtype, Device, complex)

# builtins that compare identity or unwrap an Optional, so may see a loaded object (an Optional submodule)
_ANY_ARGUMENT = frozenset({"torch.__is__", "torch.__isnot__", "ops.prim.unchecked_unwrap_optional"})


def _is_data(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (list, tuple)):
        return depth < 8 and all(_is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < 8 and all(_is_data(k, depth + 1) and _is_data(v, depth + 1) for k, v in value.items())
    return isinstance(value, _DATA)


_BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.MatMult: operator.matmul,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift}
_COMPARE: dict[type, Callable] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNARY: dict[type, Callable] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                                ast.Invert: operator.invert}


class _Return(Exception):
    pass


_BREAK, _CONTINUE = object(), object()


class Frame:
    __slots__ = ("fn", "locals", "line")

    def __init__(self, fn: Function, local: dict) -> None:
        self.fn, self.locals, self.line = fn, local, fn.node.lineno


class Interpreter:
    """Runs functions and methods of one archive's :class:`Program` (see the module docstring for what it allows)."""

    def __init__(self, program: Program, constants: tuple) -> None:
        self.program = program
        self.constants = _Constants(constants)
        self.depth = 0
        self.make_module: Callable[[ClassDef], TSObject] | None = None

    # ---- calls ------------------------------------------------------------------------------------------------
    def call(self, fn: Function, args: tuple | list, kwargs: dict) -> Any:
        """Run ``fn`` with ``args``/``kwargs`` bound to its parameters (missing ones take their literal defaults)."""
        if len(args) > len(fn.params):
            raise TypeError(f"{fn.qualname}() takes {len(fn.params)} arguments, got {len(args)}")
        local = dict(zip(fn.params, args))
        for key, value in kwargs.items():
            if key not in fn.params or key in local:
                raise TypeError(f"{fn.qualname}() got an unexpected or repeated argument {key!r}")
            local[key] = value
        for name in fn.params:
            if name not in local:
                if name not in fn.defaults:
                    raise TypeError(f"{fn.qualname}() missing argument {name!r}")
                default = fn.defaults[name]
                local[name] = list(default) if isinstance(default, list) else default
        if self.depth >= _MAX_DEPTH:
            raise TorchScriptError(fn.file, fn.node.lineno, f"call of {fn.qualname}", f"nests deeper than {_MAX_DEPTH} "
                                   "calls (TorchScript has no recursion)")
        frame = Frame(fn, local)
        self.depth += 1
        try:
            self.block(fn.node.body, frame)
        except _Return as done:
            return done.args[0]
        finally:
            self.depth -= 1
        return None

    def call_method(self, obj: TSObject, name: str, args: tuple | list, kwargs: dict) -> Any:
        method = obj.ts_class.methods.get(name)
        if method is None:
            raise AttributeError(f"{obj.ts_class.qualname} has no method {name!r}")
        return self.call(method, [obj, *args], kwargs)

    def _invoke(self, func: Any, args: list, kwargs: dict, node: ast.AST, frame: Frame) -> Any:
        if isinstance(func, BoundMethod):
            return self.call(func.fn, [func.obj, *args], kwargs)
        if isinstance(func, Function):
            return self.call(func, args, kwargs)
        if isinstance(func, Namespace):
            dotted = ".".join(func.path)
            if func.path[0] == "__torch__":
                if dotted in self.program.functions:
                    return self.call(self.program.functions[dotted], args, kwargs)
                if dotted in self.program.classes:
                    return self._construct(self.program.classes[dotted], args, kwargs, node, frame)
                owner = dotted[: -len(".__new__")] if dotted.endswith(".__new__") else None
                if owner in self.program.classes and self.program.classes[owner].kind == "class" and len(args) == 1 \
                        and isinstance(args[0], Namespace) and ".".join(args[0].path) == owner and not kwargs:
                    return ScriptObject(self.program.classes[owner])  # TorchScript prints Cls(...) as __new__ + __init__
                self._refuse(frame, node, f"call to {dotted}", "names no function or class of this archive's code")
            target = builtins.resolve(dotted)
            if target is None:
                self._refuse(frame, node, f"call to {dotted}", "is not a TorchScript builtin ember knows (the "
                             "allow-list is ember.jit.torchscript.builtins.known_names())")
            if dotted not in _ANY_ARGUMENT:  # builtins see only data, never a loaded object or a dotted name
                for value in list(args) + list(kwargs.values()):
                    if not _is_data(value):
                        self._refuse(frame, node, f"call to {dotted}", f"a {type(value).__name__} cannot be passed "
                                     "to a builtin")
            return target(*args, **kwargs)
        self._refuse(frame, node, "call", f"a {type(func).__name__} value is not callable here")

    def _construct(self, cls: ClassDef, args: list, kwargs: dict, node: ast.AST, frame: Frame) -> Any:
        if cls.kind == "namedtuple":
            values = list(args) + [None] * (len(cls.fields) - len(args))
            for k, name in enumerate(cls.fields):
                if k >= len(args):
                    if name in kwargs:
                        values[k] = kwargs.pop(name)
                    elif name in cls.field_defaults:
                        values[k] = cls.field_defaults[name]
                    else:
                        raise TypeError(f"{cls.qualname}() missing field {name!r}")
            if kwargs or len(args) > len(cls.fields):
                raise TypeError(f"{cls.qualname}() got unexpected arguments")
            return NamedTupleValue(cls.qualname, cls.fields, values)
        if cls.kind == "class" and "__init__" in cls.methods:
            obj = ScriptObject(cls)
            self.call(cls.methods["__init__"], [obj, *args], kwargs)
            return obj
        self._refuse(frame, node, f"construction of {cls.qualname}", f"a TorchScript {cls.kind} cannot be created "
                     "by the code here")

    # ---- statements -------------------------------------------------------------------------------------------
    def block(self, body: list, frame: Frame) -> Any:
        for stmt in body:
            frame.line = stmt.lineno
            handler = self._STATEMENTS.get(type(stmt))
            if handler is None:
                self._refuse(frame, stmt, f"statement {type(stmt).__name__}", "is not part of TorchScript's printed "
                             "code; refused")
            signal = handler(self, stmt, frame)
            if signal is not None:
                return signal
        return None

    def _s_expr(self, stmt: ast.Expr, frame: Frame) -> None:
        self.eval(stmt.value, frame)

    def _s_pass(self, stmt: ast.Pass, frame: Frame) -> None:
        return None

    def _s_assign(self, stmt: ast.Assign, frame: Frame) -> None:
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)

    def _s_annassign(self, stmt: ast.AnnAssign, frame: Frame) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)

    def _s_augassign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        op = _BINOPS.get(type(stmt.op))
        current = self.eval(stmt.target if not isinstance(stmt.target, ast.Name) else ast.Name(
            stmt.target.id, ast.Load(), lineno=stmt.lineno, col_offset=0), frame)
        value = self.eval(stmt.value, frame)
        self.assign(stmt.target, self._binary(op, current, value, stmt, frame), frame)

    def _s_if(self, stmt: ast.If, frame: Frame) -> Any:
        return self.block(stmt.body if self._truth(self.eval(stmt.test, frame), stmt, frame) else stmt.orelse, frame)

    def _s_for(self, stmt: ast.For, frame: Frame) -> Any:
        if stmt.orelse:
            self._refuse(frame, stmt, "for ... else", "is not TorchScript")
        iterable = self.eval(stmt.iter, frame)
        if not isinstance(iterable, (range, list, tuple, dict, str, Tensor)):
            self._refuse(frame, stmt, "for loop", f"cannot iterate over a {type(iterable).__name__}")
        for item in iterable:
            self.assign(stmt.target, item, frame)
            signal = self.block(stmt.body, frame)
            if signal is _BREAK:
                break
            if signal is not None and signal is not _CONTINUE:
                return signal
        return None

    def _s_while(self, stmt: ast.While, frame: Frame) -> Any:
        if stmt.orelse:
            self._refuse(frame, stmt, "while ... else", "is not TorchScript")
        while self._truth(self.eval(stmt.test, frame), stmt, frame):
            signal = self.block(stmt.body, frame)
            if signal is _BREAK:
                break
            if signal is not None and signal is not _CONTINUE:
                return signal
        return None

    def _s_break(self, stmt: ast.Break, frame: Frame) -> Any:
        return _BREAK

    def _s_continue(self, stmt: ast.Continue, frame: Frame) -> Any:
        return _CONTINUE

    def _s_return(self, stmt: ast.Return, frame: Frame) -> Any:
        raise _Return(None if stmt.value is None else self.eval(stmt.value, frame))

    def _s_assert(self, stmt: ast.Assert, frame: Frame) -> None:
        if not self._truth(self.eval(stmt.test, frame), stmt, frame):
            message = "" if stmt.msg is None else self.eval(stmt.msg, frame)
            raise AssertionError(builtins._str(message))

    _STATEMENTS: dict[type, Callable] = {
        ast.Expr: _s_expr, ast.Pass: _s_pass, ast.Assign: _s_assign, ast.AnnAssign: _s_annassign,
        ast.AugAssign: _s_augassign, ast.If: _s_if, ast.For: _s_for, ast.While: _s_while, ast.Break: _s_break,
        ast.Continue: _s_continue, ast.Return: _s_return, ast.Assert: _s_assert}

    def assign(self, target: ast.expr, value: Any, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                self._refuse(frame, target, "unpacking", f"expected {len(target.elts)} values, got "
                             f"{len(value) if isinstance(value, (tuple, list)) else type(value).__name__}")
            for t, v in zip(target.elts, value):
                self.assign(t, v, frame)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            if not isinstance(container, (list, dict, Tensor)):
                self._refuse(frame, target, "item assignment", f"a {type(container).__name__} cannot be assigned into")
            container[self._index(target.slice, frame)] = value
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            if not isinstance(obj, TSObject) or target.attr.startswith("__"):
                self._refuse(frame, target, f"assignment to .{target.attr}", "only attributes of the loaded "
                             "objects can be set")
            obj.ts_setattr(target.attr, value)
        else:
            self._refuse(frame, target, f"assignment to {type(target).__name__}", "is not TorchScript")

    # ---- expressions ------------------------------------------------------------------------------------------
    def eval(self, node: ast.expr, frame: Frame) -> Any:
        handler = self._EXPRESSIONS.get(type(node))
        if handler is None:
            self._refuse(frame, node, f"expression {type(node).__name__}", "is not part of TorchScript's printed "
                         "code; refused")
        return handler(self, node, frame)

    def _e_constant(self, node: ast.Constant, frame: Frame) -> Any:
        if not isinstance(node.value, (int, float, str, bool, type(None), complex)):
            self._refuse(frame, node, f"constant {node.value!r:.30}", "is not a TorchScript literal")
        return node.value

    _GLOBALS = {"torch": ("torch",), "ops": ("ops",), "__torch__": ("__torch__",)}

    def _e_name(self, node: ast.Name, frame: Frame) -> Any:
        name = node.id
        if name in frame.locals:
            return frame.locals[name]  # may be UNINITIALIZED: TorchScript passes such placeholders along unused
        if name in self._GLOBALS:
            return Namespace(self._GLOBALS[name])
        if name == "CONSTANTS":
            return self.constants
        if name in ("inf", "nan"):
            return float(name)
        self._refuse(frame, node, f"name {name!r}", "is not a variable of this function or a TorchScript global")

    def _e_attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        base = self.eval(node.value, frame)
        attr = node.attr
        if isinstance(base, Namespace):
            if len(base.path) >= _MAX_NAME:
                self._refuse(frame, node, "dotted name", "is too long")
            return Namespace(base.path + (attr,))
        if isinstance(base, TSObject):
            if attr in base.ts_class.methods:
                return BoundMethod(base, base.ts_class.methods[attr])
            if attr.startswith("__") and attr.endswith("__"):
                self._refuse(frame, node, f"attribute {attr}", "Python's special attributes are never reachable")
            try:
                return base.ts_getattr(attr)
            except KeyError:
                self._refuse(frame, node, f"attribute {attr}", f"{base.ts_class.qualname} has no attribute {attr!r}")
        if isinstance(base, NamedTupleValue) and attr in base.fields:
            return base[base.fields.index(attr)]
        if isinstance(base, _Constants):
            if attr.startswith("c") and attr[1:].isdigit() and int(attr[1:]) < len(base.values):
                return base.values[int(attr[1:])]
            self._refuse(frame, node, f"CONSTANTS.{attr}", f"there are {len(base.values)} constants")
        self._refuse(frame, node, f"attribute {attr}", f"attribute access on a {type(base).__name__} is not allowed "
                     "(only on the loaded modules and objects, NamedTuples and CONSTANTS)")

    def _e_call(self, node: ast.Call, frame: Frame) -> Any:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in frame.locals and func.id in self._FORMS:
            return self._FORMS[func.id](self, node, frame)
        target = self.eval(func, frame)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                self._refuse(frame, a, "*args", "is not TorchScript")
            args.append(self.eval(a, frame))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                self._refuse(frame, k, "**kwargs", "is not TorchScript")
            kwargs[k.arg] = self.eval(k.value, frame)
        try:
            return self._invoke(target, args, kwargs, node, frame)
        except (TorchScriptError, _Return):
            raise
        except Exception as error:
            self._note(error, frame, node)
            raise

    def _e_tuple(self, node: ast.Tuple, frame: Frame) -> tuple:
        return tuple(self.eval(e, frame) for e in node.elts)

    def _e_list(self, node: ast.List, frame: Frame) -> list:
        return [self.eval(e, frame) for e in node.elts]

    def _e_dict(self, node: ast.Dict, frame: Frame) -> dict:
        if any(k is None for k in node.keys):
            self._refuse(frame, node, "**dict", "is not TorchScript")
        return {self._data(self.eval(k, frame), node, frame): self.eval(v, frame) for k, v in zip(node.keys,
                                                                                                node.values)}

    def _index(self, node: ast.expr, frame: Frame) -> Any:
        if isinstance(node, ast.Slice):
            return slice(*(None if part is None else self._data(self.eval(part, frame), node, frame)
                           for part in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Tuple):
            return tuple(self._index(e, frame) for e in node.elts)
        return self._data(self.eval(node, frame), node, frame)

    def _e_subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        value = self.eval(node.value, frame)
        if not isinstance(value, (list, tuple, str, dict, Tensor)):
            self._refuse(frame, node, "indexing", f"a {type(value).__name__} cannot be indexed here")
        try:
            return value[self._index(node.slice, frame)]
        except (TorchScriptError, _Return):
            raise
        except Exception as error:
            self._note(error, frame, node)
            raise

    def _e_binop(self, node: ast.BinOp, frame: Frame) -> Any:
        return self._binary(_BINOPS.get(type(node.op)), self.eval(node.left, frame), self.eval(node.right, frame),
                            node, frame)

    def _binary(self, op: Callable | None, a: Any, b: Any, node: ast.AST, frame: Frame) -> Any:
        if op is None:
            self._refuse(frame, node, "operator", "is not supported")
        return op(self._data(a, node, frame), self._data(b, node, frame))

    def _e_unaryop(self, node: ast.UnaryOp, frame: Frame) -> Any:
        value = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return not self._truth(value, node, frame)
        return _UNARY[type(node.op)](self._data(value, node, frame))

    def _e_compare(self, node: ast.Compare, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, frame)
            if isinstance(op, (ast.Is, ast.IsNot)):
                outcome = _COMPARE[type(op)](left, right)
            else:
                outcome = _COMPARE[type(op)](self._data(left, node, frame), self._data(right, node, frame))
            if len(node.ops) == 1:
                return outcome
            if not self._truth(outcome, node, frame):
                return False
            left = right
        return result

    def _e_boolop(self, node: ast.BoolOp, frame: Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for part in node.values:
            value = self.eval(part, frame)
            if self._truth(value, node, frame) != is_and:
                return value
        return value

    def _e_ifexp(self, node: ast.IfExp, frame: Frame) -> Any:
        return self.eval(node.body if self._truth(self.eval(node.test, frame), node, frame) else node.orelse, frame)

    _EXPRESSIONS: dict[type, Callable] = {
        ast.Constant: _e_constant, ast.Name: _e_name, ast.Attribute: _e_attribute, ast.Call: _e_call,
        ast.Tuple: _e_tuple, ast.List: _e_list, ast.Dict: _e_dict, ast.Subscript: _e_subscript,
        ast.BinOp: _e_binop, ast.UnaryOp: _e_unaryop, ast.Compare: _e_compare, ast.BoolOp: _e_boolop,
        ast.IfExp: _e_ifexp}

    # ---- the named forms (their first argument may be a type, not a value) ------------------------------------
    def _f_annotate(self, node: ast.Call, frame: Frame) -> Any:
        self._arity(node, 2, frame)
        return self.eval(node.args[1], frame)

    def _f_uninitialized(self, node: ast.Call, frame: Frame) -> Any:
        self._arity(node, 1, frame)
        return UNINITIALIZED

    def _f_isinstance(self, node: ast.Call, frame: Frame) -> bool:
        self._arity(node, 2, frame)
        return self.matches(self.eval(node.args[0], frame), node.args[1], frame)

    def _convert(kind: type) -> Callable:  # noqa: N805 - a decorator factory used in the class body
        def form(self: "Interpreter", node: ast.Call, frame: Frame) -> Any:
            self._arity(node, 1, frame)
            value = self._data(self.eval(node.args[0], frame), node, frame)
            if kind is str:
                return builtins._str(value)
            return kind(value.item()) if isinstance(value, Tensor) else kind(value)
        return form

    def _f_getattr(self, node: ast.Call, frame: Frame) -> Any:
        if len(node.args) not in (2, 3) or not isinstance(node.args[1], ast.Constant) or not isinstance(
                node.args[1].value, str):
            self._refuse(frame, node, "getattr", "takes an object and a string literal")
        return self._e_attribute(ast.Attribute(node.args[0], node.args[1].value, ast.Load(), lineno=node.lineno,
                                               col_offset=node.col_offset), frame)

    def _f_hasattr(self, node: ast.Call, frame: Frame) -> bool:
        if len(node.args) != 2 or not isinstance(node.args[1], ast.Constant) or not isinstance(node.args[1].value, str):
            self._refuse(frame, node, "hasattr", "takes an object and a string literal")
        obj, name = self.eval(node.args[0], frame), node.args[1].value
        if not isinstance(obj, TSObject) or name.startswith("__"):
            return False
        try:
            obj.ts_getattr(name)
            return True
        except KeyError:
            return name in obj.ts_class.methods

    def _values(self, node: ast.Call, frame: Frame) -> list:
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            self._refuse(frame, node, "call", "takes positional arguments only here")
        return [self._data(self.eval(a, frame), node, frame) for a in node.args]

    def _f_range(self, node: ast.Call, frame: Frame) -> range:
        return range(*self._values(node, frame))

    def _f_len(self, node: ast.Call, frame: Frame) -> int:
        return builtins._len(*self._values(node, frame))

    def _f_print(self, node: ast.Call, frame: Frame) -> None:
        print(*(builtins._str(v) for v in self._values(node, frame)))

    def _f_enumerate(self, node: ast.Call, frame: Frame) -> list:
        return list(enumerate(*self._values(node, frame)))

    def _f_zip(self, node: ast.Call, frame: Frame) -> list:
        return list(zip(*self._values(node, frame)))

    _FORMS: dict[str, Callable] = {
        "annotate": _f_annotate, "unchecked_cast": _f_annotate, "uninitialized": _f_uninitialized,
        "isinstance": _f_isinstance, "int": _convert(int), "float": _convert(float), "bool": _convert(bool),
        "str": _convert(str), "getattr": _f_getattr, "hasattr": _f_hasattr, "range": _f_range, "len": _f_len,
        "print": _f_print, "enumerate": _f_enumerate, "zip": _f_zip}
    del _convert

    # ---- types ------------------------------------------------------------------------------------------------
    def matches(self, value: Any, t: ast.expr, frame: Frame) -> bool:
        """``isinstance(value, T)`` for a TorchScript type expression ``T``."""
        if isinstance(t, ast.Tuple):
            return any(self.matches(value, e, frame) for e in t.elts)
        if isinstance(t, ast.Constant) and t.value is None:
            return value is None
        if isinstance(t, ast.Name):
            simple = {"Tensor": Tensor, "int": int, "float": float, "str": str, "bool": bool, "NoneType": type(None),
                      "Device": Device, "complex": complex}
            if t.id == "Any":
                return True
            if t.id in simple:
                if t.id in ("int", "float") and isinstance(value, bool):
                    return False
                return isinstance(value, simple[t.id])
            if t.id in ("number", "Scalar"):
                return isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
            head, args = t.value.id, (t.slice.elts if isinstance(t.slice, ast.Tuple) else [t.slice])
            if head == "Optional":
                return value is None or self.matches(value, args[0], frame)
            if head == "Union":
                return any(self.matches(value, a, frame) for a in args)
            if head == "List":
                return isinstance(value, list) and all(self.matches(v, args[0], frame) for v in value)
            if head == "Tuple":
                return isinstance(value, tuple) and len(value) == len(args) and all(
                    self.matches(v, a, frame) for v, a in zip(value, args))
            if head == "Dict":
                return isinstance(value, dict) and all(self.matches(k, args[0], frame) and self.matches(
                    v, args[1], frame) for k, v in value.items())
            if head == "Final":
                return self.matches(value, args[0], frame)
        dotted = _dotted(t)
        if dotted is not None and dotted.startswith("__torch__."):
            if isinstance(value, TSObject):
                return value.ts_class.qualname == dotted
            return isinstance(value, NamedTupleValue) and value.qualname == dotted
        self._refuse(frame, t, "type", f"{ast.dump(t)[:60]} is not a TorchScript type ember knows")

    # ---- checks -----------------------------------------------------------------------------------------------
    def _data(self, value: Any, node: ast.AST, frame: Frame) -> Any:
        if not isinstance(value, _DATA):
            self._refuse(frame, node, "operand", f"a {type(value).__name__} is not a value operators apply to here")
        return value

    def _truth(self, value: Any, node: ast.AST, frame: Frame) -> bool:
        return bool(self._data(value, node, frame))

    def _arity(self, node: ast.Call, count: int, frame: Frame) -> None:
        if len(node.args) != count or node.keywords:
            self._refuse(frame, node, f"{getattr(node.func, 'id', 'call')}()", f"takes {count} positional arguments")

    def _refuse(self, frame: Frame, node: ast.AST, construct: str, problem: str) -> None:
        raise TorchScriptError(frame.fn.file, getattr(node, "lineno", frame.line), construct, problem)

    @staticmethod
    def _note(error: BaseException, frame: Frame, node: ast.AST) -> None:
        """Say where in the archive's code an ember error happened (once, at the innermost call)."""
        if getattr(error, "_torchscript_noted", False) or not hasattr(error, "add_note"):
            return
        error.add_note(f"(in TorchScript {frame.fn.file}, line {getattr(node, 'lineno', frame.line)}, "
                       f"{frame.fn.qualname})")
        try:
            error._torchscript_noted = True  # type: ignore[attr-defined]
        except AttributeError:
            pass


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
