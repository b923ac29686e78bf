"""Differential fuzzing of small random programs: ember against torch, statement by statement.

Each seed gives one program (tools/fuzz_program_gen.py: 1-4 inputs of random dtype, shape, layout and special
values, then 3-8 statements: ops with Python scalars and 0-d tensors, views, in-place ops and ``out=`` on
views, writes through aliases). The program runs on torch and on ember; after every statement each live
tensor is compared: dtype, shape, ``requires_grad``, values (dtype-aware tolerance, NaN and infinity positions,
signs of zeros), ``is_contiguous()``, which variables share memory (view or copy), and optionally
``stride()``; a statement that raises on one side only, or with another exception class, is a mismatch too.
Programs drafted with ``requires_grad`` inputs end with a backward of a weighted sum of every floating result,
and the inputs' gradients are compared.

A mismatch's class is its kind and the template of the first statement where it shows; each class is shrunk
to a minimal program (statements dropped while the class persists) and printed as a script that runs both
libraries. torch is only the reference: nothing in ember imports it.

    python tools/fuzz_vs_torch.py 2000                # seeds 0..1999, summary and one reproducer per class
    python tools/fuzz_vs_torch.py 1 --start 1234      # one seed
    python tools/fuzz_vs_torch.py 5000 --strides      # stride() compared too (a known, listed difference)
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import time
import warnings
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_known import SILENT, known  # noqa: E402
from fuzz_program_gen import Program, _fresh_env, generate  # noqa: E402

_RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-11, "complex64": 1e-5,
         "complex128": 1e-11}
# kinds in order of severity; a program's first value-family difference is reported with its worst kind
VALUE_KINDS = ("ember raises", "ember returns", "type", "dtype", "shape", "requires_grad", "nan", "inf", "values",
               "zero sign")
OTHER_KINDS = ("aliasing", "contiguity", "strides", "error type")


@dataclasses.dataclass
class Mismatch:
    kind: str
    line: int          # index into program.lines (len(lines) for the backward)
    tag: str
    var: str
    detail: str
    carried: bool = False  # an operand of the statement already differed in its bits (within tolerance) before it

    @property
    def key(self) -> str:
        return f"{self.kind} @ {self.tag}"


def _storage_key(t: Any) -> Any:
    if t.numel() == 0:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - a tensor without one storage (sparse): never aliased here
        return id(t)


def _norm(lib: Any, t: Any) -> tuple:
    d = t.detach()
    name = str(d.dtype).split(".")[-1]
    if name == "bfloat16":
        d = d.float()
    elif name == "complex32":  # torch's half complex (ember has none): compared as complex64
        d = d.to(lib.complex64)
    if hasattr(d, "resolve_conj"):
        d = d.resolve_conj().resolve_neg()
    vals = np.array(d.cpu().numpy(), copy=True)
    return name, tuple(d.shape), vals, bool(t.is_contiguous()), tuple(t.stride()), bool(t.requires_grad)


def snapshot(lib: Any, env: dict) -> dict:
    """Every tensor in ``env`` as plain data, with the first earlier variable sharing its memory."""
    out, owners = {}, {}
    for name, v in env.items():
        if isinstance(v, lib.Tensor):
            key = _storage_key(v)
            leader = owners.setdefault(key, name) if key is not None else name
            out[name] = _norm(lib, v) + (leader,)
        elif isinstance(v, (tuple, list)) and name.startswith("v"):
            out[name] = ("seq", len(v))
    return out


def execute(lib: Any, prog: Program) -> tuple:
    """[per line: ("ok", snapshot) | ("raise", class, message)], then the backward's outcome or None."""
    env = _fresh_env(lib, prog.inputs)
    steps = []
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        for i, (code, _) in enumerate(prog.lines):
            try:
                exec(code, env)  # noqa: S102 - the fuzzer's own generated statements
            except Exception as error:  # noqa: BLE001 - compared with the other library's outcome
                steps.append(("raise", type(error).__name__, str(error).split("\n")[0][:160]))
                return steps, None
            if prog.resized_at is None and any("was resized" in str(w.message) for w in caught):
                prog.resized_at = i  # torch's deprecated resize of a non-empty out= (see fuzz_known)
            caught.clear()
            steps.append(("ok", snapshot(lib, env)))
        if not prog.grad:
            return steps, None
        try:
            return steps, ("ok", _backward(lib, env, prog))
        except Exception as error:  # noqa: BLE001
            return steps, ("raise", type(error).__name__, str(error).split("\n")[0][:160])


def _backward(lib: Any, env: dict, prog: Program) -> dict:
    """Gradients of sum(w * v) over the floating results that require grad (weights 1, 1.25, ... 2.5)."""
    total = None
    for name, v in env.items():
        if name.startswith(("v", "x")) and isinstance(v, lib.Tensor) and v.requires_grad and v.is_floating_point():
            w = 1.0 + 0.25 * (np.arange(v.numel(), dtype=np.float64) % 7).reshape(tuple(v.shape))
            term = (v.double() * lib.tensor(w)).sum()
            total = term if total is None else total + term
    if total is None:
        return {}
    total.backward()
    return {name: (None if env[name].grad is None else _norm(lib, env[name].grad))
            for name, _, _, rg in prog.inputs if rg}


def _values(g: np.ndarray, w: np.ndarray, dtype: str, signs: bool) -> tuple | None:
    """(kind, detail) when the values differ beyond ``dtype``'s tolerance, else None."""
    with np.errstate(all="ignore"):
        return _values_quiet(g, w, dtype, signs)


def _values_quiet(g: np.ndarray, w: np.ndarray, dtype: str, signs: bool) -> tuple | None:
    if dtype in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"):
        if np.array_equal(g, w):
            return None
        bad = np.argwhere(g != w)[:3].tolist()
        return "values", f"at {bad}: ember {g[tuple(np.array(bad).T)].tolist()} torch {w[tuple(np.array(bad).T)].tolist()}"
    rtol = _RTOL.get(dtype, 1e-5)
    g = np.asarray(g, dtype=np.complex128 if dtype.startswith("complex") else np.float64)
    w = np.asarray(w, dtype=g.dtype)
    parts = ((g.real, w.real), (g.imag, w.imag)) if g.dtype.kind == "c" else ((g, w),)
    # complex parts are compared against the magnitude (1e-8 next to 0 beside a part of 1 is rounding)
    magnitude = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)) if g.dtype.kind == "c" else None
    for a, b in parts:
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            i = np.argwhere(np.isnan(a) != np.isnan(b))[0].tolist()
            return "nan", f"at {i}: ember {a[tuple(i)]} torch {b[tuple(i)]}"
        inf_a, inf_b = np.isinf(a), np.isinf(b)
        if not np.array_equal(inf_a, inf_b) or not np.array_equal(a[inf_b], b[inf_b]):
            i = np.argwhere((inf_a != inf_b) | (inf_b & (a != b)))[0].tolist()
            return "inf", f"at {i}: ember {a[tuple(i)]} torch {b[tuple(i)]}"
        fin = np.isfinite(b)
        scale = float(np.max(np.abs(b[fin]), initial=0.0))
        atol = rtol * max(scale * 1e-3, 1e-30) if magnitude is None else rtol * max(magnitude, 1e-30)
        err = np.abs(a - b) - rtol * np.abs(b)
        if (err[fin] > atol).any():
            i = np.argwhere(fin & (err > atol))[0].tolist()
            rel = float(np.max(np.abs(a[fin] - b[fin]) / np.maximum(np.abs(b[fin]), atol / rtol)))
            return "values", f"at {i}: ember {a[tuple(i)]!r} torch {b[tuple(i)]!r} (max rel {rel:.2g})"
        if signs:
            zeros = (a == 0) & (b == 0)
            if not np.array_equal(np.signbit(a[zeros]), np.signbit(b[zeros])):
                i = np.argwhere(zeros & (np.signbit(a) != np.signbit(b)))[0].tolist()
                return "zero sign", f"at {i}: ember {a[tuple(i)]} torch {b[tuple(i)]}"
    return None


def _compare_tensor(g: tuple, w: tuple, signs: bool, strides: bool, low: bool = False) -> list:
    """[(kind, detail)] for one variable's two snapshots."""
    if g[0] == "seq" or w[0] == "seq":
        return [] if g == w else [("type", f"ember {g[:2]} torch {w[:2]}")]
    out = []
    if g[0] != w[0]:
        return [("dtype", f"ember {g[0]} torch {w[0]}")]
    if g[1] != w[1]:
        return [("shape", f"ember {g[1]} torch {w[1]}")]
    if g[5] != w[5]:
        out.append(("requires_grad", f"ember {g[5]} torch {w[5]}"))
    # a float64 value computed from float32/half/integer inputs carries their last-ulp differences (NumPy's float32
    # exp vs SLEEF's, docs/pytorch-compat.md): compared at float32's tolerance
    dtype = {"float64": "float32", "complex128": "complex64"}.get(w[0], w[0]) if low else w[0]
    found = _values(g[2], w[2], dtype, signs)
    if found:
        out.append(found)
    if g[3] != w[3]:
        out.append(("contiguity", f"is_contiguous ember {g[3]} torch {w[3]} (strides {g[4]} / {w[4]})"))
    elif strides and g[4] != w[4] and 0 not in w[1] and np.prod(w[1]) > 1:
        out.append(("strides", f"ember {g[4]} torch {w[4]}"))
    return out


def _bit_equal(g: tuple, w: tuple) -> bool:
    """The same dtype, shape and values, NaN matching NaN (the bits a later op sees, up to NaN payloads)."""
    if g[0] != w[0] or g[1] != w[1]:
        return False
    a, b = g[2], w[2]
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True)) and bool(np.array_equal(np.signbit(a.real), np.signbit(b.real)))
    return bool(np.array_equal(a, b))


def classify(prog: Program, torch: Any, ember: Any, strides: bool = False) -> list:
    """Every mismatch class found in ``prog``: the first value-family one and the first of each other kind."""
    prog.resized_at = None
    t_steps, t_grad = execute(torch, prog)
    resized_at = prog.resized_at
    e_steps, e_grad = execute(ember, prog)
    prog.resized_at = resized_at
    low = any(dt != "float64" for _, _, dt, _ in prog.inputs)
    found: list = []
    dirty: set = set()  # variables whose values differ in any bit (within tolerance) after the previous statement
    for i, (code, tag) in enumerate(prog.lines):
        if i >= len(t_steps) or i >= len(e_steps):
            break
        t, e = t_steps[i], e_steps[i]
        if t[0] == "raise" or e[0] == "raise":
            if t[0] == "raise" and e[0] == "raise":
                if t[1] != e[1]:
                    found.append(Mismatch("error type", i, tag, "", f"ember {e[1]}: {e[2]} | torch {t[1]}: {t[2]}"))
            elif t[0] == "raise":
                found.append(Mismatch("ember returns", i, tag, "", f"torch raises {t[1]}: {t[2]}"))
            else:
                found.append(Mismatch("ember raises", i, tag, "", f"{e[1]}: {e[2]}"))
            break
        words = set(code.replace("(", " ").replace(")", " ").replace(".", " ").replace(",", " ").replace("[", " ")
                    .replace("]", " ").replace("=", " ").split())
        carried = bool(words & dirty)
        dirty = set()
        for var, w in t[1].items():
            g = e[1].get(var)
            if g is None:
                found.append(Mismatch("type", i, tag, var, "not a tensor in ember"))
                continue
            if w[0] != "seq" and g[0] != "seq" and not _bit_equal(g, w):
                dirty.add(var)
            for kind, detail in _compare_tensor(g, w, True, strides, low):
                found.append(Mismatch(kind, i, tag, var, f"{var}: {detail}", carried))
            if w[0] != "seq" and g[0] != "seq" and g[-1] != w[-1]:
                found.append(Mismatch("aliasing", i, tag, var,
                                      f"{var} shares memory with: ember {g[-1]}, torch {w[-1]} (itself: none)"))
    else:
        if prog.grad and t_grad is not None and e_grad is not None:
            n = len(prog.lines)
            if t_grad[0] != e_grad[0]:
                kind = "ember raises" if e_grad[0] == "raise" else "ember returns"
                found.append(Mismatch(kind, n, "backward", "", f"ember {e_grad[1:]} torch {t_grad[1:]}"))
            elif t_grad[0] == "ok":
                for var, w in t_grad[1].items():
                    g = e_grad[1].get(var)
                    if (g is None) != (w is None):
                        found.append(Mismatch("requires_grad", n, "backward", var, f"grad of {var}: ember {g is None} "
                                              f"torch {w is None} (None)"))
                    elif w is not None:
                        for kind, detail in _compare_tensor(g, w, False, False, low):
                            if kind not in ("contiguity", "strides", "requires_grad"):
                                found.append(Mismatch(kind, n, "backward", var, f"grad of {detail}", bool(dirty)))
    return _firsts(found)


def _firsts(found: list) -> list:
    """The first value-family mismatch (its worst kind at that line) and the first of each other kind."""
    out = []
    values = [m for m in found if m.kind in VALUE_KINDS]
    if values:
        line = min(m.line for m in values)
        at = [m for m in values if m.line == line]
        out.append(min(at, key=lambda m: VALUE_KINDS.index(m.kind)))
    for kind in OTHER_KINDS:
        first = [m for m in found if m.kind == kind]
        if first:
            out.append(first[0])
    return out


def shrink(prog: Program, target: Mismatch, torch: Any, ember: Any, strides: bool = False) -> Program:
    """Drop statements (and requires_grad) while a mismatch of ``target``'s kind stays at the same statement."""
    code = prog.lines[target.line][0] if target.line < len(prog.lines) else None

    def keeps(p: Program) -> bool:
        for m in classify(p, torch, ember, strides):
            here = p.lines[m.line][0] if m.line < len(p.lines) else None
            if m.kind == target.kind and here == code:
                return True
        return False

    best = prog
    changed = True
    while changed:
        changed = False
        for j in range(len(best.lines) - 1, -1, -1):
            if best.lines[j][0] == code:
                continue
            trial = dataclasses.replace(best, lines=best.lines[:j] + best.lines[j + 1:])
            if keeps(trial):
                best, changed = trial, True
        unused = [inp for inp in best.inputs if not any(inp[0] in c for c, _ in best.lines)]
        if unused:
            trial = dataclasses.replace(best, inputs=[i for i in best.inputs if i not in unused])
            if keeps(trial):
                best, changed = trial, True
    return best


def run(seeds: range, strides: bool = False, budget_s: float | None = None) -> dict:
    """key -> [(seed, program, mismatch)] over ``seeds`` (stops early after ``budget_s`` seconds)."""
    import torch

    import ember

    classes: dict = collections.defaultdict(list)
    start = time.time()
    ran = 0
    for seed in seeds:
        if budget_s is not None and time.time() - start > budget_s:
            break
        prog = generate(np.random.default_rng(seed), torch)
        prog.seed = seed
        ran += 1
        for m in classify(prog, torch, ember, strides):
            classes[m.key].append((seed, prog, m))
    classes["__ran__"] = ran
    return classes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int, nargs="?", default=500)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--strides", action="store_true", help="compare stride() too")
    parser.add_argument("--time", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--kinds", default=None, help="comma-separated kinds to show (default: all)")
    parser.add_argument("--new", action="store_true", help="show only silent classes not in fuzz_known.KNOWN")
    args = parser.parse_args()
    import torch

    import ember

    started = time.time()
    classes = run(range(args.start, args.start + args.count), args.strides, args.time)
    ran = classes.pop("__ran__")
    kinds = set(args.kinds.split(",")) if args.kinds else None
    tally = collections.Counter()
    for key, hits in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        unexplained = [h for h in hits if h[2].kind in SILENT and known(h[2], h[1]) is None]
        label = "new" if unexplained else ("known" if hits[0][2].kind in SILENT else "not silent")
        tally[label] += 1
        hits = unexplained or hits
        seed, prog, m = hits[0]
        if (kinds and m.kind not in kinds) or (args.new and label != "new"):
            continue
        note = f"[known: {known(m, prog)}]" if label == "known" else f"[{label}]"
        print(f"\n== {len(hits)} x {key} {note}  (seeds {[h[0] for h in hits[:8]]})")
        print(f"   {m.detail[:300]}")
        small = prog if args.no_shrink else shrink(prog, m, torch, ember, args.strides)
        print("   " + small.source().replace("\n", "\n   "))
    total = sum(len(v) for v in classes.values())
    print(f"\n{total} mismatches in {len(classes)} classes over {ran} programs ({time.time() - started:.0f} s): "
          f"{tally['new']} silent and unexplained, {tally['known']} known (tools/fuzz_known.py), "
          f"{tally['not silent']} not silent (errors, strides)")


if __name__ == "__main__":
    main()
