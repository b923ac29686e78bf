"""The torch.nn audit: every module class of torch.nn, built in ember and in torch 2.13 from the same
arguments (``nn_audit_cases.CASES`` plus generated defaults for classes no entry names), compared on

- ``repr``; parameter and buffer names, order, shapes, dtypes, ``requires_grad``;
- ``state_dict()`` keys, order and ``_metadata``; initial values under the same ``manual_seed`` (bit for bit);
- ``half()``/``double()``: the state's dtypes (integer buffers stay integer);
- forward outputs (torch's weights loaded into ember, float64) and gradients of inputs and parameters, in
  train and in eval mode (dropout draws included: ember's RNG is torch's), and the buffers after the train call.

Run ``python tests/nn/nn_audit.py`` for the report; the tests (``test_nn_audit_vs_torch.py``) assert it is empty.
Example::

    >>> from nn_audit import audit_case
    >>> audit_case("Linear", (4, 3), {"bias": False}, None)
    []
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np

import ember

try:
    import torch
except ImportError:  # the tests skip; the module stays importable
    torch = None

try:
    from nn_audit_cases import CASES, REQUIRED, Const
except ImportError:  # run as a script from the repository root
    from tests.nn.nn_audit_cases import CASES, REQUIRED, Const

SKIP_AUTO = {"Module", "Container", "RNNBase", "RNNCellBase"}  # abstract bases


def _lib_name(L) -> str:
    return L.__name__


def _build(L, name: str, args: tuple, kwargs: dict):
    L.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if callable(args):  # arguments that are modules: built by the library under test
            args = args(L)
        if isinstance(kwargs.get("dtype"), str):  # a dtype by name: the library's own
            kwargs = {**kwargs, "dtype": getattr(L, kwargs["dtype"])}
        return _class(L, name)(*args, **kwargs)


def _class(L, name: str) -> type:
    """``L.nn.<name>``; a dotted name reaches into ``nn.modules`` (``modules.linear.NonDynamicallyQuantizableLinear``)."""
    obj = L.nn
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _dtype(t) -> str:
    return str(t.dtype).split(".")[-1]


def _shape(t):
    try:
        return tuple(t.shape)
    except Exception:  # uninitialized (lazy) parameters
        return type(t).__name__


def _table(named) -> list:
    return [(n, _shape(t), _dtype(t), bool(getattr(t, "requires_grad", False))) for n, t in named]


def _np(t) -> np.ndarray:
    t = t.detach() if hasattr(t, "detach") else t
    if hasattr(t, "dtype") and "bfloat16" in str(t.dtype):
        t = t.float()
    return np.asarray(t.numpy())


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _structure(name: str, em, tm) -> list:
    diffs = []
    if repr(em).replace("ember.", "torch.") != repr(tm):
        diffs.append(f"repr: ember {repr(em)!r} torch {repr(tm)!r}")
    for what in ("named_parameters", "named_buffers"):
        a, b = _table(getattr(em, what)()), _table(getattr(tm, what)())
        if a != b:
            diffs.append(f"{what}: ember {a} torch {b}")
    es, ts = em.state_dict(), tm.state_dict()
    if list(es) != list(ts):
        diffs.append(f"state_dict keys: ember {list(es)} torch {list(ts)}")
    em_meta = dict(getattr(es, "_metadata", {}) or {})
    if em_meta != dict(ts._metadata):
        diffs.append(f"_metadata: ember {em_meta} torch {dict(ts._metadata)}")
    for k in ts:
        if k not in es or isinstance(_shape(ts[k]), str) or isinstance(_shape(es[k]), str):
            continue
        a, b = _np(es[k]), _np(ts[k])
        if a.shape != b.shape:
            continue
        if not np.array_equal(a, b, equal_nan=True):
            close = np.allclose(a, b, rtol=1e-6, atol=1e-7)
            diffs.append(f"init {k}: {'close, not bit-identical' if close else 'differs'} "
                         f"(max |d| {np.max(np.abs(a.astype(np.float64) - b)) if a.size else 0:.3g})")
    return diffs


def _conversions(name: str, args: tuple, kwargs: dict) -> list:
    diffs = []
    for conv in ("half", "double"):
        try:
            em, tm = _build(ember, name, args, kwargs), _build(torch, name, args, kwargs)
            getattr(em, conv)(), getattr(tm, conv)()
        except Exception as error:  # noqa: BLE001 - the comparison reports it
            diffs.append(f"{conv}(): raised {type(error).__name__}: {error}")
            continue
        a = [(k, _dtype(v)) for k, v in em.state_dict().items()]
        b = [(k, _dtype(v)) for k, v in tm.state_dict().items()]
        if a != b:
            diffs.append(f"{conv}() state dtypes: ember {a} torch {b}")
    return diffs


def _inputs(L, arrays) -> list:
    out = []
    for a in arrays:
        t = L.tensor(np.asarray(a))
        if a.dtype == np.float64 and not isinstance(a, Const):
            t.requires_grad_(True)
        out.append(t)
    return out


def _call(L, m, arrays, seed: int):
    xs = _inputs(L, arrays)
    L.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return m(*xs), xs


def _compare(tag: str, a, b, rtol: float = 1e-7, atol: float = 1e-9) -> list:
    if a is None or b is None:
        return [] if a is None and b is None else [f"{tag}: ember {type(a).__name__} torch {type(b).__name__}"]
    x, y = _np(a), _np(b)
    if x.shape != y.shape:
        return [f"{tag}: shape ember {x.shape} torch {y.shape}"]
    if _dtype(a) != _dtype(b):
        return [f"{tag}: dtype ember {_dtype(a)} torch {_dtype(b)}"]
    if not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
        return [f"{tag}: values differ (max |d| {np.nanmax(np.abs(x.astype(np.float64) - y)):.3g})"]
    return []


def _forward(name: str, args: tuple, kwargs: dict, inputs) -> list:
    diffs = []
    for mode in ("train", "eval"):
        em, tm = _build(ember, name, args, kwargs).double(), _build(torch, name, args, kwargs).double()
        em.load_state_dict({k: ember.tensor(_np(v)) for k, v in tm.state_dict().items()})
        getattr(em, mode)(), getattr(tm, mode)()
        arrays = inputs(np.random.default_rng(0))
        try:
            t_out, t_in = _call(torch, tm, arrays, 1)
        except Exception as error:  # noqa: BLE001
            try:
                _call(ember, em, arrays, 1)
                diffs.append(f"{mode} forward: torch raises {type(error).__name__}, ember does not")
            except Exception as mine:  # noqa: BLE001
                if type(mine).__name__ != type(error).__name__:
                    diffs.append(f"{mode} forward error: ember {type(mine).__name__} torch {type(error).__name__}")
            continue
        try:
            e_out, e_in = _call(ember, em, arrays, 1)
        except Exception as error:  # noqa: BLE001
            diffs.append(f"{mode} forward: ember raises {type(error).__name__}: {error}")
            continue
        a, b = _flat(e_out), _flat(t_out)
        if len(a) != len(b):
            diffs.append(f"{mode} outputs: ember {len(a)} torch {len(b)}")
            continue
        for k, (x, y) in enumerate(zip(a, b)):
            diffs += _compare(f"{mode} output {k}", x, y)
        pairs = [(x, y) for x, y in zip(a, b) if y is not None and y.requires_grad]
        if pairs:
            w = [np.random.default_rng(5 + k).standard_normal(tuple(y.shape)) for k, (_, y) in enumerate(pairs)]
            sum((x * ember.tensor(v)).sum() for (x, _), v in zip(pairs, w)).backward()
            sum((y * torch.tensor(v)).sum() for (_, y), v in zip(pairs, w)).backward()
            for k, (x, y) in enumerate(zip(e_in, t_in)):
                if y.requires_grad:
                    diffs += _compare(f"{mode} input {k} grad", x.grad, y.grad, 1e-6, 1e-9)
            for (n, x), (_, y) in zip(em.named_parameters(), tm.named_parameters()):
                diffs += _compare(f"{mode} {n}.grad", x.grad, y.grad, 1e-6, 1e-9)
        es, ts = em.state_dict(), tm.state_dict()
        for k in ts:
            if k in es and k not in dict(tm.named_parameters()):
                diffs += _compare(f"{mode} buffer {k} after forward", es[k], ts[k])
    return diffs


def audit_case(name: str, args: tuple, kwargs: dict, inputs) -> list:
    """The differences between ember's and torch's ``nn.<name>(*args, **kwargs)``; ``[]`` when none."""
    try:
        tm = _build(torch, name, args, kwargs)
    except Exception as error:  # noqa: BLE001
        try:
            _build(ember, name, args, kwargs)
            return [f"constructor: torch raises {type(error).__name__}, ember does not"]
        except Exception as mine:  # noqa: BLE001
            return [] if type(mine) is type(error) or type(mine).__name__ == type(error).__name__ else [
                f"constructor error: ember {type(mine).__name__} torch {type(error).__name__}"]
    try:
        em = _build(ember, name, args, kwargs)
    except Exception as error:  # noqa: BLE001
        return [f"constructor: ember raises {type(error).__name__}: {error}"]
    diffs = _structure(name, em, tm) + _conversions(name, args, kwargs)
    if inputs is not None:
        diffs += _forward(name, args, kwargs, inputs)
    return diffs


def module_classes() -> list:
    """Every torch.nn class that is a Module (introspected, so new classes of a later torch are seen), and the
    public Module classes of ``torch.nn.modules.*`` that torch.nn does not export, by dotted name."""
    import importlib
    import pkgutil

    names = {n for n in dir(torch.nn) if isinstance(getattr(torch.nn, n), type)
             and issubclass(getattr(torch.nn, n), torch.nn.Module)}
    exported = {getattr(torch.nn, n) for n in names}
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"torch.nn.modules.{info.name}")
        for n, c in vars(module).items():
            if isinstance(c, type) and issubclass(c, torch.nn.Module) and not n.startswith("_") \
                    and c not in exported and c.__module__ == module.__name__:
                names.add(f"modules.{info.name}.{n}")
    return sorted(names)


def auto_cases() -> list:
    """A default-argument case for each class the table does not name (structure only)."""
    named = {c[0] for c in CASES}
    cases = []
    for name in module_classes():
        if name in named or name in SKIP_AUTO:
            continue
        params = list(inspect.signature(_class(torch, name).__init__).parameters.values())[1:]
        required = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                                       p.VAR_KEYWORD)]
        if all(r in REQUIRED for r in required):
            cases.append((name, (), {r: REQUIRED[r] for r in required}, None))
    return cases


def all_cases() -> list:
    return list(CASES) + auto_cases()


def case_id(case) -> str:
    name, args, kwargs, _ = case
    if callable(args):
        args = args(torch)
    return f"{name}({', '.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kwargs.items()])})"


def main() -> None:
    cases = all_cases()
    found = 0
    for case in cases:
        diffs = audit_case(*case)
        if diffs:
            found += 1
            print(case_id(case))
            for d in diffs:
                print("   ", d[:400])
    covered = {c[0] for c in cases}
    print(f"{len(cases)} configurations of {len(covered)} classes "
          f"({len(module_classes())} in torch.nn); {found} differ; not built: "
          f"{sorted(set(module_classes()) - covered)}")


if __name__ == "__main__":
    main()
