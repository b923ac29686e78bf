"""The code of a TorchScript archive, parsed (never executed) into classes and functions.

Each ``code/__torch__/<path>.py`` member holds TorchScript's printed source for the classes and functions of the
qualified module ``__torch__.<path>``: ``class Linear(Module):`` with its attribute declarations (``weight :
Tensor``), ``__parameters__``/``__buffers__`` lists, ``Final`` constants and methods; ``class P(NamedTuple):`` with
its fields; module-level ``def`` functions. The text is parsed with :mod:`ast`; only those shapes are accepted at
the top of a file and in a class body (anything else raises :class:`TorchScriptError` naming the file and line).
Function bodies are checked when they run (:mod:`ember.jit.torchscript.interpreter`). Default values and constants
are literals read by :func:`literal`, which builds only numbers, strings, booleans, None, tuples and lists.

Example:
    >>> unit = Program({"__torch__": "class M(Module):\\n  __parameters__ = []\\n  __buffers__ = []\\n"
    ...                 "  n : Final[int] = 3\\n  def forward(self, x: Tensor) -> Tensor:\\n    return x\\n"})
    >>> unit.classes["__torch__.M"].constants, sorted(unit.classes["__torch__.M"].methods)
    ({'n': 3}, ['forward'])
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ember.jit.torchscript.errors import TorchScriptError

_KINDS = {"Module": "module", "NamedTuple": "namedtuple", "Enum": "enum", "Interface": "interface",
          "ModuleInterface": "interface"}


@dataclass
class Function:
    """A ``def`` of the archive: its AST, argument names, annotations and literal defaults."""

    qualname: str
    file: str
    node: ast.FunctionDef
    params: list[str]
    annotations: dict[str, ast.expr | None]
    defaults: dict[str, Any]
    source: str


@dataclass
class ClassDef:
    """A TorchScript class: its kind, attribute declarations, parameter/buffer names, constants and methods."""

    qualname: str
    file: str
    kind: str                                     # module, namedtuple, enum, interface or class
    attributes: dict[str, ast.expr] = field(default_factory=dict)
    parameters: list[str] = field(default_factory=list)
    buffers: list[str] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)
    methods: dict[str, Function] = field(default_factory=dict)
    fields: list[str] = field(default_factory=list)  # NamedTuple fields, in order
    field_defaults: dict[str, Any] = field(default_factory=dict)


def literal(node: ast.expr, file: str) -> Any:
    """A literal of TorchScript's source: numbers, strings, bools, None, negative numbers, tuples and lists of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = literal(node.operand, file)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, ast.Tuple):
        return tuple(literal(e, file) for e in node.elts)
    if isinstance(node, ast.List):
        return [literal(e, file) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
        return float(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and len(
            node.args) == 1 and not node.keywords:
        value = literal(node.args[0], file)
        if isinstance(value, str) and value in ("inf", "-inf", "nan"):
            return float(value)
    raise TorchScriptError(file, getattr(node, "lineno", None), ast.dump(node)[:60], "is not a literal constant")


def _function(node: ast.FunctionDef, qualname: str, file: str, text: str) -> Function:
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs or node.decorator_list:
        raise TorchScriptError(file, node.lineno, f"def {node.name}", "uses *args, **kwargs, positional-only "
                               "arguments or decorators, which TorchScript never prints")
    params = [a.arg for a in args.args] + [a.arg for a in args.kwonlyargs]
    annotations = {a.arg: a.annotation for a in args.args + args.kwonlyargs}
    defaults: dict[str, Any] = {}
    for a, d in zip(args.args[len(args.args) - len(args.defaults):], args.defaults):
        defaults[a.arg] = literal(d, file)
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if d is not None:
            defaults[a.arg] = literal(d, file)
    return Function(qualname, file, node, params, annotations, defaults, ast.get_source_segment(text, node) or "")


def _class(node: ast.ClassDef, module: str, file: str, text: str) -> ClassDef:
    qualname = f"{module}.{node.name}"
    if node.keywords or node.decorator_list or len(node.bases) > 1:
        raise TorchScriptError(file, node.lineno, f"class {node.name}", "has keywords, decorators or several bases")
    base = node.bases[0] if node.bases else None
    if base is not None and not (isinstance(base, ast.Name) and base.id in _KINDS):
        raise TorchScriptError(file, node.lineno, f"class {node.name}", f"base {ast.dump(base)[:40]} is not one of "
                               f"{sorted(_KINDS)}")
    cls = ClassDef(qualname, file, _KINDS[base.id] if base is not None else "class")
    for item in node.body:
        where = (file, item.lineno)
        if isinstance(item, ast.FunctionDef):
            cls.methods[item.name] = _function(item, f"{qualname}.{item.name}", file, text)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            name = item.target.id
            cls.attributes[name] = item.annotation
            if cls.kind == "namedtuple":
                cls.fields.append(name)
                if item.value is not None:
                    cls.field_defaults[name] = literal(item.value, file)
            elif item.value is not None:
                cls.constants[name] = literal(item.value, file)
        elif isinstance(item, ast.Assign) and len(item.targets) == 1:
            target = item.targets[0]
            if isinstance(target, ast.Name) and target.id in ("__parameters__", "__buffers__"):
                names = literal(item.value, file)
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise TorchScriptError(*where, target.id, "must be a list of attribute names")
                (cls.parameters if target.id == "__parameters__" else cls.buffers).extend(names)
            elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                  and target.value.id == "__annotations__"):
                key = literal(target.slice, file)
                if not isinstance(key, str):
                    raise TorchScriptError(*where, "__annotations__", "keys must be strings")
                cls.attributes[key] = item.value
            elif isinstance(target, ast.Name) and cls.kind == "enum":
                cls.constants[target.id] = literal(item.value, file)
            else:
                raise TorchScriptError(*where, "class body assignment", "only __parameters__, __buffers__, "
                                       "__annotations__[...] and Enum values may be assigned in a class body")
        elif isinstance(item, ast.Pass) or (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
            continue
        else:
            raise TorchScriptError(*where, type(item).__name__, "is not allowed in a TorchScript class body")
    return cls


class Program:
    """Every class and function of an archive's code, by qualified name (``__torch__.torch.nn.functional.relu``)."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.classes: dict[str, ClassDef] = {}
        self.functions: dict[str, Function] = {}
        for module, text in sorted(sources.items()):
            file = "code/" + module.replace(".", "/") + ".py"
            try:
                tree = ast.parse(text, filename=file)
            except SyntaxError as error:
                raise TorchScriptError(file, error.lineno, "source", f"does not parse ({error.msg})") from None
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    cls = _class(node, module, file, text)
                    self.classes[cls.qualname] = cls
                elif isinstance(node, ast.FunctionDef):
                    fn = _function(node, f"{module}.{node.name}", file, text)
                    self.functions[fn.qualname] = fn
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    raise TorchScriptError(file, node.lineno, "import", "TorchScript code never imports; refused")
                else:
                    raise TorchScriptError(file, node.lineno, type(node).__name__, "only classes and functions may "
                                           "appear at the top of a TorchScript source file")
