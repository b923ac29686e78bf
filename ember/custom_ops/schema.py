"""Operator schemas in PyTorch's text form (``"(Tensor x, SymInt n=2) -> Tensor"``): inferred from a Python
function's annotations (``torch.library.infer_schema``) and parsed back into arguments, so a custom op can
bind its call arguments, fill defaults and know which inputs it may mutate.

Example:
    >>> import ember
    >>> def scale(x: ember.Tensor, factor: float = 2.0) -> ember.Tensor: ...
    >>> infer_schema(scale, mutates_args=())
    '(Tensor x, float factor=2.0) -> Tensor'
"""
from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import re
import typing
from typing import Any, Callable, Iterable

from ember import dtypes
from ember.device import device as Device
from ember.tensor import Tensor

_Optional = typing.Optional
_SCALAR = typing.Union[int, float, bool]


def _sequences(item: Any) -> list:
    return [typing.Sequence[item], typing.List[item], collections.abc.Sequence[item], list[item]]


def _type_table() -> dict:
    table: dict = {Tensor: "Tensor", _Optional[Tensor]: "Tensor?"}
    for seq in _sequences(Tensor):
        table[seq] = "Tensor[]"
    for seq in _sequences(_Optional[Tensor]):
        table[seq] = "Tensor?[]"
    for py, name in ((int, "SymInt"), (float, "float"), (bool, "bool")):
        table[py] = name
        table[_Optional[py]] = name + "?"
        for seq in _sequences(py):
            table[seq] = name + "[]"
            table[_Optional[seq]] = name + "[]?"
    table[str] = "str"
    table[_Optional[str]] = "str?"
    table[_SCALAR] = "Scalar"
    table[_Optional[_SCALAR]] = "Scalar?"
    for seq in _sequences(_SCALAR):
        table[seq] = "Scalar[]"
    table[dtypes.dtype] = "ScalarType"
    table[_Optional[dtypes.dtype]] = "ScalarType?"
    table[Device] = "Device"
    table[_Optional[Device]] = "Device?"
    return table


_ARG_TYPES = _type_table()
_RETURN_TYPES = {Tensor: "Tensor", typing.List[Tensor]: "Tensor[]", list[Tensor]: "Tensor[]", int: "SymInt",
                 float: "float", bool: "bool", _SCALAR: "Scalar"}


def _default_text(name: str, value: Any) -> str:
    if value is None or isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dtypes.dtype):
        return str(value).replace("ember.", "torch.")
    if isinstance(value, Device):
        return f'"{value}"'
    raise ValueError(f"infer_schema(func): parameter {name} has an unsupported default value type {type(value)}; "
                     "use None, a bool, int, float, str, dtype or device")


def infer_schema(prototype_function: Callable, /, *, mutates_args: Any, op_name: str | None = None,
                 tags: Any = ()) -> str:
    """PyTorch's ``torch.library.infer_schema``: the schema text of a typed Python function. ``mutates_args`` names
    the parameters the function writes into (``"unknown"``: every Tensor parameter).

    Example:
        >>> def f(x: ember.Tensor, out: ember.Tensor) -> None: ...
        >>> infer_schema(f, mutates_args={"out"})
        '(Tensor x, Tensor(a1!) out) -> ()'
    """
    signature = inspect.signature(prototype_function)
    hints = typing.get_type_hints(prototype_function)
    params = []
    keyword_only_started = False
    mutable = set(mutates_args) if mutates_args != "unknown" else None
    for index, (name, param) in enumerate(signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(f"infer_schema(func): parameters of kind {param.kind} (*args, **kwargs) are not "
                             f"supported; got func with signature {signature}")
        if name not in hints:
            raise ValueError(f"infer_schema(func): parameter {name} must have a type annotation; got func with "
                             f"signature {signature}")
        annotation = hints[name]
        if annotation not in _ARG_TYPES:
            raise ValueError(f"infer_schema(func): parameter {name} has unsupported type {annotation}; supported: "
                             "Tensor, Optional[Tensor], Sequence[Tensor], int, float, bool, str, "
                             "Union[int, float, bool], dtype, device, their Optional and Sequence forms")
        kind = _ARG_TYPES[annotation]
        if kind.startswith("Tensor") and (mutable is None or name in mutable):
            kind = kind.replace("Tensor", f"Tensor(a{index}!)", 1)
        text = f"{kind} {name}"
        if param.default is not inspect.Parameter.empty:
            text += "=" + _default_text(name, param.default)
        if param.kind == param.KEYWORD_ONLY and not keyword_only_started:
            params.append("*")
            keyword_only_started = True
        params.append(text)
    if mutable is not None:
        unknown = mutable - set(signature.parameters)
        if unknown:
            raise ValueError(f"infer_schema(func): mutates_args names {sorted(unknown)}, which are not parameters of "
                             f"the function {signature}")
    returns = _return_text(hints.get("return", inspect.Signature.empty), signature)
    schema = f"({', '.join(params)}) -> {returns}"
    return f"{op_name}{schema}" if op_name else schema


def _return_text(annotation: Any, signature: inspect.Signature) -> str:
    if annotation is inspect.Signature.empty:
        raise ValueError(f"infer_schema(func): no return type annotation; got func with signature {signature}")
    if annotation is None or annotation is type(None):
        return "()"
    if typing.get_origin(annotation) is tuple:
        parts = typing.get_args(annotation)
        for part in parts:
            if part not in _RETURN_TYPES:
                raise ValueError(f"infer_schema(func): return has unsupported type {part}")
        return "(" + ", ".join(_RETURN_TYPES[p] for p in parts) + ")"
    if annotation not in _RETURN_TYPES:
        raise ValueError(f"infer_schema(func): return has unsupported type {annotation}; supported: Tensor, "
                         "list[Tensor], int, float, bool, Union[int, float, bool], a tuple of those, or None")
    return _RETURN_TYPES[annotation]


@dataclasses.dataclass(frozen=True)
class Argument:
    """One parsed schema argument."""

    name: str
    type: str
    has_default: bool = False
    default: Any = None
    keyword_only: bool = False
    mutable: bool = False


@dataclasses.dataclass(frozen=True)
class Schema:
    """A parsed schema: ``name`` (may be empty), ``overload``, arguments and return types."""

    name: str
    overload: str
    arguments: tuple
    returns: tuple

    def bind(self, op: str, args: tuple, kwargs: dict) -> dict:
        """Call arguments by name with defaults filled, or a TypeError naming the op and the problem."""
        bound: dict = {}
        positional = [a for a in self.arguments if not a.keyword_only]
        if len(args) > len(positional):
            raise TypeError(f"{op}: takes {len(positional)} positional arguments but {len(args)} were given")
        for arg, value in zip(positional, args):
            bound[arg.name] = value
        for key, value in kwargs.items():
            if key in bound:
                raise TypeError(f"{op}: got multiple values for argument {key!r}")
            if key not in {a.name for a in self.arguments}:
                raise TypeError(f"{op}: got an unexpected keyword argument {key!r}")
            bound[key] = value
        for arg in self.arguments:
            if arg.name not in bound:
                if not arg.has_default:
                    raise TypeError(f"{op}: missing required argument {arg.name!r}")
                bound[arg.name] = arg.default
        return bound


_ARG_RE = re.compile(r"^(?P<type>[A-Za-z_][\w]*(\([a-z0-9!]*\))?(\[\d*\])?\??(\[\])?\??)\s+(?P<name>\w+)"
                     r"(\s*=\s*(?P<default>.+))?$")


def _split_top(text: str) -> list:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _parse_default(text: str) -> Any:
    text = text.strip()
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith(("'", '"')):
        return text[1:-1]
    if text.startswith("["):
        return [_parse_default(p) for p in _split_top(text[1:-1])]
    if text.startswith("torch."):
        return getattr(dtypes, text.split(".", 1)[1], text)
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_schema(text: str) -> Schema:
    """``"ns::name.overload(Tensor x, *, int n=2) -> Tensor"`` (the name part is optional) as a :class:`Schema`.

    Example:
        >>> parse_schema("foo(Tensor x, float s=1.0) -> Tensor").arguments[1].default
        1.0
    """
    match = re.match(r"^\s*(?P<name>[\w:.]*)\s*\((?P<args>.*)\)\s*->\s*(?P<ret>.+?)\s*$", text, re.S)
    if match is None:
        raise ValueError(f"invalid operator schema {text!r}; expected 'name(Type arg, ...) -> Type'")
    full = match.group("name").split("::")[-1]
    name, _, overload = full.partition(".")
    arguments: list = []
    keyword_only = False
    for piece in _split_top(match.group("args")):
        if piece == "*":
            keyword_only = True
            continue
        arg = _ARG_RE.match(piece)
        if arg is None:
            raise ValueError(f"invalid argument {piece!r} in operator schema {text!r}")
        default = arg.group("default")
        arguments.append(Argument(arg.group("name"), arg.group("type"), default is not None,
                                  _parse_default(default) if default is not None else None, keyword_only,
                                  "!" in arg.group("type")))
    ret = match.group("ret").strip()
    returns = tuple(_split_top(ret[1:-1])) if ret.startswith("(") else (ret,)
    return Schema(name, overload, tuple(arguments), returns)


def mutated_names(schema: Schema) -> Iterable[str]:
    """The arguments the schema marks as written (``Tensor(a!)``)."""
    return [a.name for a in schema.arguments if a.mutable]
