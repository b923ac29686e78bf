"""Every function with PyTorch's ``out=`` keyword, called by ember and by torch 2.13 with outs of eight dtypes.

For each name of ``ember.ops.out_arg.OUT_FUNCTIONS`` the first argument list torch accepts (one to three small
float32, int64 or complex64 tensors, a dim) is called with an empty ``out`` of float32, float64, float16, int64,
int32, bool, complex64 and uint8: where torch raises ember must raise, and where torch writes ember must write
the same values into ``out`` and return it. This holds the one set of out= rules (ember/ops/out_arg.py) to
PyTorch's per-function dtype rules: exact dtypes (matrix products, rounding, sign, softmax, quantile, ...),
PyTorch's cast rule elsewhere, bool-only and int64-only outs, and the reductions without an out= overload.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.ops.out_arg import OUT_FUNCTIONS

torch = pytest.importorskip("torch")

# sampling and uninitialized memory: the values cannot be compared
SKIP = {"empty", "normal", "bernoulli", "rand", "randn", "randint", "randperm", "multinomial"}
# ember's decisions that differ from torch beside out= (each documented where it is made)
DIFFERS = {
    ("torch", "chain_matmul"): "deprecated; torch's one-matrix form copies into an out of any dtype (float into int)",
    ("torch", "logsumexp"): "ember refuses complex logsumexp (docs/testing.md, deliberate differences)",
    ("special", "logsumexp"): "ember refuses complex logsumexp (docs/testing.md, deliberate differences)",
}
OUT_DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool", "complex64", "uint8")
# single calls where torch's answer is its own quirk: all/any of a complex input into a uint8 out casts the input
# to uint8 first (0.5j reads as 0, so all() of a matrix without zeros is 0)
QUIRKS = {("all", "complex64", "uint8"), ("any", "complex64", "uint8")}
SOURCES = {
    "float32": np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 4.0]], np.float32),
    "int64": np.array([[2, -1, 0], [1, 3, 5], [0, 5, 4]]),
    # a valid complex Cholesky factor (real positive diagonal) without zeros (complex 0 ** 0 is torch's NaN)
    "complex64": np.array([[2, 1 + 1j, 0.5j], [1 - 1j, 3, 0.5 + 0.5j], [0.25j, 0.5, 4]], np.complex64),
}
ARGS = [lambda m: (m,), lambda m: (m, m), lambda m: (m, 0), lambda m: (m, m, m), lambda m: (m, 2),
        lambda m: (m[0],), lambda m: (m[0], m[0]), lambda m: (m, 1, 0)]


def _names() -> list:
    return [pytest.param(ns, name, id=f"{ns}.{name}") for ns, names in OUT_FUNCTIONS.items() for name in names
            if name not in SKIP and (ns, name) not in DIFFERS]


def _outcome(lib, fn, args: tuple, dtype: str):
    out = lib.empty(0, dtype=getattr(lib, dtype))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fn(*args, out=out)
    except Exception as e:  # noqa: BLE001 - the error class is compared (both raise), not its text
        return ("raises", type(e).__name__)
    assert got is out, f"{fn} did not return out"
    return ("writes", out.numpy().copy())


def _same(want, got) -> bool:
    if want[0] != got[0]:
        return False
    if want[0] == "raises":
        return True
    a, b = want[1], got[1]
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        tol = 2e-3 if a.dtype == np.float16 else 1e-5
        return bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    return bool(np.array_equal(a, b))


@pytest.mark.parametrize("ns,name", _names())
def test_out_dtype_rules_match_torch(ns: str, name: str) -> None:
    t_fn = getattr(torch if ns == "torch" else getattr(torch, ns), name, None)
    e_fn = getattr(ember if ns == "torch" else getattr(ember, ns), name, None)
    if t_fn is None or e_fn is None:
        pytest.skip(f"{ns}.{name}: not in both libraries")
    problems, compared = [], 0
    for src_name, src in SOURCES.items():
        for make in ARGS:
            try:
                result = t_fn(*make(torch.tensor(src)))
            except Exception:  # noqa: BLE001 - not a call torch accepts: try the next argument list
                continue
            if not isinstance(result, torch.Tensor):
                break  # multi-output functions: tests/torch_surface/test_out_keyword_like_torch.py
            for dtype in OUT_DTYPES:
                if (name, src_name, dtype) in QUIRKS:
                    continue
                want = _outcome(torch, t_fn, make(torch.tensor(src)), dtype)
                got = _outcome(ember, e_fn, make(ember.tensor(src)), dtype)
                compared += 1
                if not _same(want, got):
                    problems.append(f"{src_name} input, {dtype} out: torch {str(want)[:90]}, ember {str(got)[:90]}")
            break
    assert not problems, f"{ns}.{name} ({compared} calls): " + "\n".join(problems[:6])
