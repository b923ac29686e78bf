"""Compare torch 2.13's call signatures with ember's, name by name (used by test_signatures_match_torch.py).

Python-level torch callables are read with ``inspect.signature``; torch's C builtins (``torch.add``,
``Tensor.add``) have none, so their signatures are read from the first lines of their docstrings
(``add(input, other, *, alpha=1, out=None) -> Tensor``, and each ``.. function::`` overload). A difference is
a short stable string: ``missing alpha``, ``alpha kw-only``, ``alpha=1 vs 2``, ``order [a, b] vs [b, a]``,
``requires extra [x]``. Keyword-only in torch but positional in ember is not a difference (ember accepts more);
neither is ember's ``None`` default where torch's is the value ``None`` stands for (``layout=torch.strided``).

Example:
    >>> import torch, ember
    >>> sweep_namespace(torch.nn, ember.nn, "nn")  # doctest: +SKIP
    {'nn.Foo': ['missing bar']}
"""
from __future__ import annotations

import inspect
import math
import re
from typing import Any

EMPTY = inspect.Parameter.empty
# Parameters whose None default in ember stands for torch's explicit default (same behaviour).
NONE_MEANS_DEFAULT = {"layout", "memory_format", "device", "dtype", "pin_memory"}


def aten_overloads(torch_mod: Any, op: str, method: bool) -> list[list[tuple[str, str, Any]]]:
    """torch's ATen schemas for ``op`` as Python sees them: [(param, 'pos'|'kw', default or EMPTY)] per overload.

    ``out=`` overloads are left out (ember's ``out=`` is checked by test_out_keyword_like_torch.py); ``self`` is
    ``input`` for the function form and dropped for the method form.
    """
    overloads = []
    schemas = torch_mod._C._jit_get_schemas_for_operator(f"aten::{op}")
    # TorchScript-only overloads on Python numbers and lists (add.int(int a, int b), sort(t[] self, bool reverse))
    # are not bound to Python: where the op has Tensor overloads, only those count.
    tensor_ones = [s for s in schemas if any("Tensor" in str(a.type) for a in s.arguments)]
    self_ones = [s for s in tensor_ones if any(a.name == "self" for a in s.arguments)]
    for schema in self_ones or tensor_ones or schemas:
        args = list(schema.arguments)
        if "out" in schema.overload_name or any(a.kwarg_only and not a.has_default_value() for a in args):
            continue
        if any(str(a.type) in ("t", "t[]", "List[t]") for a in args) or any(
                a.name == "self" and (not str(a.type).startswith("Tensor") or str(a.type).endswith("[]")) for a in args):
            continue  # (list.sort(self, reverse), str.split(self, separator): TorchScript's own overloads)
        params = []
        for a in args:
            name = a.name
            if name == "self":
                if method:  # (the method's receiver: first, or where(condition, self, other)'s middle)
                    continue
                name = "input"
            params.append((name, "kw" if a.kwarg_only else "pos",
                           a.default_value if a.has_default_value() else EMPTY))
        overloads.append(params)
    return overloads


def _same_default(theirs: Any, ours: Any, pname: str) -> bool:
    if pname in NONE_MEANS_DEFAULT and (ours is None or theirs is None):
        return True
    if ours is None and (theirs is None or (isinstance(theirs, list) and not theirs)):
        return True  # ATen's empty list default (stride=[], dims=[]) is Python's None
    if isinstance(theirs, list) and theirs and not isinstance(ours, (list, tuple)) and all(
            _equal_values(v, ours) for v in theirs):
        return True  # ATen's stride=[1, 1] is Python's stride=1 (an int expands to every dim)
    return _equal_values(theirs, ours)


def _equal_values(theirs: Any, ours: Any) -> bool:
    if isinstance(theirs, float) and isinstance(ours, float) and math.isnan(theirs) and math.isnan(ours):
        return True
    if callable(theirs) and callable(ours) and not isinstance(theirs, type) and not isinstance(ours, type):
        return getattr(theirs, "__name__", None) == getattr(ours, "__name__", None)  # F.relu and F.relu
    numbers = (int, float)
    if isinstance(theirs, numbers) and isinstance(ours, numbers) and not isinstance(theirs, bool) \
            and not isinstance(ours, bool):
        return theirs == ours  # 1 and 1.0: the same default for a Python caller
    if isinstance(theirs, (list, tuple)) and isinstance(ours, (list, tuple)):
        return len(theirs) == len(ours) and all(_equal_values(a, b) for a, b in zip(theirs, ours))
    if type(theirs).__name__ != type(ours).__name__:
        return False
    if type(theirs).__name__ == "Generator":
        return True  # torch.default_generator and ember's: the same role
    if callable(theirs) and callable(ours) and not isinstance(theirs, type):
        return getattr(theirs, "__name__", None) == getattr(ours, "__name__", None)
    if type(theirs) is type(ours):
        try:
            return bool(theirs == ours)
        except Exception:
            pass
    # torch.float32 vs ember.float32, a torch function vs ember's of the same name: compare by printed name
    return _printed(theirs) == _printed(ours)


def _printed(value: Any) -> str:
    if inspect.ismodule(value):
        return value.__name__
    text = getattr(value, "__qualname__", None) if callable(value) else None
    text = text or repr(value)
    return re.sub(r" at 0x[0-9a-f]+", "", text).replace("torch.", "").replace("ember.", "")


def compare_to_aten(overloads: list, ours: inspect.Signature, drop_first: bool) -> list[str]:
    """Differences between torch's ATen overloads (as Python binds them) and ember's Python signature."""
    ep = list(ours.parameters.values())[1 if drop_first else 0:]
    by_name = {p.name: p for p in ep}
    varkw = any(p.kind == p.VAR_KEYWORD for p in ep)
    varpos = any(p.kind == p.VAR_POSITIONAL for p in ep)
    diffs: list[str] = []
    names = list(dict.fromkeys(n for o in overloads for n, _, _ in o))
    epos = [p.name for p in ep if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for pname in names:
        uses = [(k, d) for o in overloads for n, k, d in o if n == pname]
        q = by_name.get(pname)
        if q is None:
            if not varkw:
                diffs.append(f"missing {pname}")
            continue
        # keyword-only in ember where torch takes it positionally, and no ember parameter at that position
        # (torch.max(x, other) lands in ember's dim slot, which takes a tensor: not a difference)
        slots = [[n for n, k, _ in o if k == "pos"].index(pname) for o in overloads
                 if any(n == pname and k == "pos" for n, k, _ in o)]
        if all(k == "pos" for k, _ in uses) and q.kind == q.KEYWORD_ONLY and not varpos and any(
                i >= len(epos) for i in slots):
            diffs.append(f"{pname} kw-only")
        defaults = [d for _, d in uses if d is not EMPTY]
        if defaults and all(d is not EMPTY for _, d in uses) and q.default is EMPTY and q.kind != q.VAR_POSITIONAL:
            diffs.append(f"{pname} required")
        elif defaults and q.default is not EMPTY and not any(_same_default(d, q.default, pname) for d in defaults):
            diffs.append(f"{pname}={_printed(defaults[0])} vs {_printed(q.default)}")
    # a reordering: a positional parameter both sides name, at another position in ember, in every overload
    orders = [[n for n, k, _ in o if k == "pos"] for o in overloads]
    if not varpos and orders and all(any(n in epos and epos.index(n) != i for i, n in enumerate(o))
                                     for o in orders):
        diffs.append(f"order {orders[0]} vs {epos}")
    return diffs


def compare_signatures(theirs: inspect.Signature, ours: inspect.Signature, drop_first: bool = False) -> list[str]:
    """Differences between two Python signatures (torch's read by inspect)."""
    tp = [p for p in theirs.parameters.values() if p.name != "self"]
    ep = list(ours.parameters.values())[1 if drop_first else 0:]
    ep = [p for p in ep if p.name != "self"]
    by_name = {p.name: p for p in ep}
    t_varkw = any(p.kind == p.VAR_KEYWORD for p in tp)
    e_varkw = any(p.kind == p.VAR_KEYWORD for p in ep)
    e_varpos = any(p.kind == p.VAR_POSITIONAL for p in ep)
    diffs: list[str] = []
    if e_varkw and not t_varkw:
        diffs.append("takes **kwargs")
    for p in tp:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        q = by_name.get(p.name)
        if q is None:
            if not e_varkw:
                diffs.append(f"missing {p.name}")
            continue
        if p.kind != p.KEYWORD_ONLY and q.kind == q.KEYWORD_ONLY:
            diffs.append(f"{p.name} kw-only")
        if p.default is EMPTY and q.default is not EMPTY:
            diffs.append(f"{p.name} optional")
        elif p.default is not EMPTY and q.default is EMPTY:
            diffs.append(f"{p.name} required")
        elif p.default is not EMPTY and not _same_default(p.default, q.default, p.name):
            diffs.append(f"{p.name}={_printed(p.default)} vs {_printed(q.default)}")
    tpos = [p.name for p in tp if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    epos = [p.name for p in ep if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if tpos != epos[:len(tpos)] and not e_varpos and set(tpos) <= set(by_name):
        diffs.append(f"order {tpos} vs {epos}")
    names = {p.name for p in tp}
    extra = [p.name for p in ep if p.name not in names and p.default is EMPTY
             and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if extra and not t_varkw:
        diffs.append(f"requires extra {extra}")
    return diffs


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


# ATen operator prefix of the builtins of each namespace (torch.special.i0 is aten::special_i0).
ATEN_PREFIX = {"special": "special_", "linalg": "linalg_", "fft": "fft_"}


def sweep_namespace(theirs_ns: Any, ours_ns: Any, label: str, torch_mod: Any, names: Any = None) -> dict:
    """{'label.name': [differences]} for every public callable both namespaces have.

    ``label == "Tensor"`` compares methods: the first parameter (``self``) of both sides is dropped.
    """
    method = label == "Tensor"
    out = {}
    for name in sorted(names if names is not None else dir(theirs_ns)):
        if name.startswith("_"):
            continue
        theirs, ours = getattr(theirs_ns, name, None), getattr(ours_ns, name, None)
        if not callable(theirs) or ours is None or not callable(ours) or inspect.ismodule(theirs):
            continue
        if isinstance(theirs, type):
            if not isinstance(ours, type):
                continue
            ts, es = _signature(theirs.__init__), _signature(ours.__init__)
            if ts is None or es is None or ts == inspect.signature(object.__init__):
                continue
            diffs = compare_signatures(ts, es)
        else:
            es = _signature(ours)
            if es is None:
                continue
            drop = method and not isinstance(inspect.getattr_static(ours_ns, name, None), (staticmethod, classmethod))
            ts = _signature(theirs)
            if ts is not None:
                diffs = compare_signatures(ts, es, drop_first=drop)
            else:
                overloads = aten_overloads(torch_mod, ATEN_PREFIX.get(label, "") + name, method)
                if not overloads:
                    continue
                diffs = compare_to_aten(overloads, es, drop)
        if diffs:
            out[f"{label}.{name}" if label else name] = diffs
    return out
