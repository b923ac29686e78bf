"""Differential runner for the trust fuzzer: one snippet of code, run by ember and by torch, compared.

A *case* is a few Python statements that read the names ``L`` (the library: ``ember`` or ``torch``),
``np`` and the inputs, and leave the result in ``out``. Inputs are NumPy arrays turned into tensors of
a named dtype on each side (``("x", array, "int8")``); a name ending in ``_g`` requires grad. After the
code runs, the runner also reads every input tensor back (an in-place write through a view must change
the base exactly as in torch) and, when ``grad=True``, calls ``backward`` on a fixed weighting of the
floating results and reads the inputs' gradients.

Both outcomes are normalized to plain data (dtype names, shapes, NumPy values, Python scalars with their
types, exception classes) and compared: torch is the only source of expected values.

Example:
    >>> from trust_diff import Case, compare
    >>> compare(Case("out = x // -2", {"x": (np.arange(-3, 4), "int64")}))   # None: both agree
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

import ember

try:
    import torch
except ImportError:  # the tests importorskip torch first; this keeps the module importable for docs
    torch = None


@dataclasses.dataclass
class Case:
    """``code`` run with ``L`` bound to each library; ``inputs``: name -> (array, dtype name)."""

    code: str
    inputs: dict = dataclasses.field(default_factory=dict)
    grad: bool = False          # backward through the floating results, compare input gradients
    zero_sign: bool = True      # compare the signs of zeros in floating results (never in gradients: a
                                # gradient's -0 vs 0 is the order of a sum of zeros, which no program can see)
    rtol: float | None = None   # None: by dtype (exact for integers and bool)
    floor: float = 1e-3         # absolute tolerance as a fraction of rtol * max|torch|: composite ops (attention,
                                # normalizations) cancel to analytic zeros whose noise is relative to the whole

    def __str__(self) -> str:
        shapes = ", ".join(f"{k}: {v[1]}{list(np.shape(v[0]))}" for k, v in self.inputs.items())
        return f"{self.code!r} with {shapes or 'no inputs'}"


def make_tensor(lib: Any, array: Any, dtype: str, requires_grad: bool = False) -> Any:
    """``array`` as a tensor of ``dtype`` (bfloat16 goes through float32; 0-d arrays stay 0-d)."""
    array = np.asarray(array)
    with np.errstate(over="ignore", invalid="ignore"):  # 1e30 -> float16 is inf on both sides
        array = array.astype(np.float32) if dtype == "bfloat16" else array.astype(dtype)
    if dtype == "bfloat16":
        t = lib.tensor(array.astype(np.float32)).to(lib.bfloat16)
    else:
        t = lib.tensor(array.astype(dtype), dtype=getattr(lib, dtype if dtype != "bool" else "bool"))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _dtype_name(dt: Any) -> str:
    return str(dt).split(".")[-1]


def normalize(lib: Any, value: Any) -> Any:
    """Plain data for ``value``: tensors become ("T", dtype, shape, array), containers recurse."""
    if isinstance(value, lib.Tensor):
        t = value.detach()
        if lib is torch:
            t = t.resolve_conj().resolve_neg()
        name = _dtype_name(t.dtype)
        if name == "bfloat16":
            t = t.to(lib.float32)
        elif name == "complex32":  # torch's half complex (ember has none): compared as complex64
            t = t.to(lib.complex64)
        return ("T", name, tuple(t.shape), np.array(t.cpu().numpy(), copy=True))
    if isinstance(value, (lib.dtype,)):
        return ("dtype", _dtype_name(value))
    if isinstance(value, (bool, int, float, complex)) or value is None:
        return ("S", type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("S", type(value).__name__, value.item())
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, lib.Size):
        return ("size", tuple(int(v) for v in value))
    if isinstance(value, (tuple, list)):  # namedtuples (values, indices) compare as tuples
        return ("seq", tuple(normalize(lib, v) for v in value))
    return ("other", type(value).__name__)


def run(lib: Any, case: Case) -> tuple:
    """("ok", result, inputs after, grads) or ("raise", exception class name, message)."""
    env: dict = {"L": lib, "np": np}
    for name, spec in case.inputs.items():
        array, dtype = spec[0], spec[1]
        env[name] = make_tensor(lib, array, dtype, requires_grad=name.endswith("_g"))
    tensors_in = {k: env[k] for k in case.inputs}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(case.code, env)  # noqa: S102 - the fuzzer's own generated snippets
            out = env["out"]
            grads = None
            if case.grad:
                grads = _backward(lib, out, tensors_in)
    except Exception as error:  # noqa: BLE001 - any error: the other library must raise too
        return ("raise", type(error).__name__, str(error).split("\n")[0][:300])
    after = {k: normalize(lib, v) for k, v in tensors_in.items()}
    return ("ok", normalize(lib, out), after, grads)


def _floats(lib: Any, value: Any) -> list:
    if isinstance(value, lib.Tensor):
        return [value] if value.requires_grad and value.dtype.is_floating_point else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _floats(lib, v)]
    return []


def _backward(lib: Any, out: Any, inputs: dict) -> dict:
    """Gradients of sum(w_k * out_k) with fixed weights 1, 1.25, 1.5, ... (no analytic zeros by symmetry)."""
    total = None
    for t in _floats(lib, out):
        w = 1.0 + 0.25 * np.arange(t.numel(), dtype=np.float64).reshape(tuple(t.shape)) % 7
        term = (t * lib.tensor(w, dtype=t.dtype)).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()
    return {k: (None if not v.requires_grad or v.grad is None else normalize(lib, v.grad))
            for k, v in inputs.items() if k.endswith("_g")}


_RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-12,
         "complex64": 2e-6, "complex128": 1e-12}


def _same_values(g: np.ndarray, w: np.ndarray, dtype: str, case: Case) -> str | None:
    if dtype in ("bool", "uint8", "int8", "int16", "int32", "int64"):
        return None if np.array_equal(g, w) else "values differ"
    rtol = case.rtol if case.rtol is not None else _RTOL[dtype]
    g = np.asarray(g, dtype=np.complex128 if dtype.startswith("complex") else np.float64)
    w = np.asarray(w, dtype=g.dtype)
    for part in ((g.real, w.real), (g.imag, w.imag)) if g.dtype.kind == "c" else ((g, w),):
        a, b = part
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            return "NaN positions differ"
        fin = np.isfinite(b)
        if not np.array_equal(a[~fin & ~np.isnan(b)], b[~fin & ~np.isnan(b)]) or not np.array_equal(
                np.isfinite(a), fin):
            return "infinities differ"
        scale = max(float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)), 1e-30)
        # complex results are compared by magnitude (a part near 0 next to a large one carries rounding noise)
        # an absolute floor near the dtype's epsilon: analytic zeros computed as 1e-17 vs 0 are rounding noise
        atol = max(rtol * scale * (1.0 if g.dtype.kind == "c" else case.floor), rtol * case.floor)
        if not np.allclose(a[fin], b[fin], rtol=rtol, atol=atol):
            return "values differ"
        if case.zero_sign:
            zeros = (b == 0) & (a == 0)  # both exact zeros (1e-17 next to 0 is a value difference, within rtol)
            if not np.array_equal(np.signbit(a[zeros]), np.signbit(b[zeros])):
                return "signs of zeros differ"
    return None


def diff(got: Any, want: Any, case: Case, where: str = "out") -> str | None:
    """A description of the first difference between two normalized values, or None."""
    if got[0] != want[0]:
        return f"{where}: ember gives {_short(got)}, torch {_short(want)}"
    kind = want[0]
    if kind == "T":
        _, gd, gs, gv = got
        _, wd, ws, wv = want
        if gd != wd:
            return f"{where}: dtype ember {gd}, torch {wd}"
        if gs != ws:
            return f"{where}: shape ember {gs}, torch {ws}"
        problem = _same_values(gv, wv, wd, case)
        return None if problem is None else f"{where} ({wd}): {problem}\n  ember {gv!r}\n  torch {wv!r}"
    if kind == "S":
        if got[1] != want[1]:
            return f"{where}: Python type ember {got[1]}, torch {want[1]}"
        g, w = got[2], want[2]
        if isinstance(w, float) and isinstance(g, float):
            same = (np.isnan(g) and np.isnan(w)) or g == w or abs(g - w) <= 1e-6 * abs(w)
        else:
            same = g == w
        return None if same else f"{where}: ember {g!r}, torch {w!r}"
    if kind == "seq":
        if len(got[1]) != len(want[1]):
            return f"{where}: {len(got[1])} results in ember, {len(want[1])} in torch"
        for i, (g, w) in enumerate(zip(got[1], want[1])):
            found = diff(g, w, case, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if got == want else f"{where}: ember {got!r}, torch {want!r}"


def _short(value: Any) -> str:
    return f"{value[0]} {value[1:]!r}"[:200]


def outcomes(case: Case) -> tuple:
    return run(ember, case), run(torch, case)


def compare(case: Case) -> str | None:
    """None when ember agrees with torch on ``case``, else what differs (the first difference)."""
    got, want = outcomes(case)
    if want[0] == "raise" and want[1] in ("NameError", "SyntaxError", "KeyError"):
        raise AssertionError(f"the case itself is broken (torch: {want[1]}: {want[2]}): {case}")
    if want[0] == "raise":
        if got[0] == "raise":
            return None
        return f"torch raises {want[1]}: {want[2]}\n  ember returns {_short(got[1])}"
    if got[0] == "raise":
        return f"ember raises {got[1]}: {got[2]} (torch returns {_short(want[1])})"
    found = diff(got[1], want[1], case)
    if found:
        return found
    for name in want[2]:
        found = diff(got[2][name], want[2][name], case, f"input {name} after")
        if found:
            return found
    if case.grad:
        for name, w in want[3].items():
            g = got[3].get(name)
            if (g is None) != (w is None):
                return f"grad of {name}: ember {'None' if g is None else 'set'}, torch {'None' if w is None else 'set'}"
            if w is not None:
                found = diff(g, w, dataclasses.replace(case, zero_sign=False), f"grad of {name}")
                if found:
                    return found
    return None
