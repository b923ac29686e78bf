"""A differential sweep: ops x dtypes x layouts x special values, ember against torch 2.13.

Every case builds the same values in both libraries in one of six layouts (contiguous, transposed, expanded with a
zero stride, sliced with a step, 0-d, empty) from a block of special values (0, -0, +-inf, NaN, +-large, +-1, 0.5,
integer limits), runs one op and compares: raises or not, dtype, shape, and values (NaN where NaN, the sign of every
zero, float32 within 2 ulp-ish for transcendental functions, exact elsewhere). A layout must not change a result:
comparing each layout against torch covers stride-independence too. ``cases()`` lists them all (the slow test);
``sample()`` a fixed spread of them (the default test).

    python tests/trust/trust_layout_sweep.py            # every case, differences printed
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterator

import numpy as np

DTYPES = ("float32", "float64", "int32", "int64", "bool", "complex64")
LAYOUTS = ("contiguous", "transposed", "expanded", "stepped", "0-d", "empty")
_FLOAT = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1.0, -1.0, 0.5, -2.5, 3.0]


def values(dtype: str) -> np.ndarray:
    """A (3, 4) block of special values of ``dtype``."""
    if dtype == "bool":
        return np.array([True, False, True, True, False, False, True, False, True, True, False, True]).reshape(3, 4)
    if dtype in ("int32", "int64"):
        info = np.iinfo(dtype)
        return np.array([0, -1, 1, 2, -7, 5, info.max, info.min, 3, -3, 100, 0], dtype=dtype).reshape(3, 4)
    base = np.array(_FLOAT, dtype="float64")
    if dtype == "complex64":
        return (base + 1j * np.roll(base, 5)).astype("complex64").reshape(3, 4)
    return base.astype(dtype).reshape(3, 4)


def make(lib: Any, dtype: str, layout: str, block: np.ndarray) -> Any:
    """``block``'s values in ``layout`` (the expanded layout repeats row 0; 0-d takes element [0, 0])."""
    t = lambda a: lib.tensor(np.ascontiguousarray(a))  # noqa: E731
    if layout == "contiguous":
        return t(block)
    if layout == "transposed":
        return t(block.T).t()
    if layout == "expanded":
        return t(block[:1]).expand(3, 4)
    if layout == "stepped":
        return t(np.repeat(block, 2, axis=1))[:, ::2]
    if layout == "0-d":
        return t(block[0, 0])
    return t(block[:0])


# name -> fn(lib, x). Unary functions, binary ones against a second layout-matched operand or a number, reductions.
def _u(name: str) -> Callable:
    return lambda lib, x: getattr(lib, name)(x)


UNARY = ["abs", "neg", "sign", "sgn", "sqrt", "exp", "log", "sin", "tanh", "sigmoid", "relu", "floor", "ceil",
         "round", "trunc", "frac", "reciprocal", "rsqrt", "square", "isnan", "isinf", "isfinite", "signbit",
         "logical_not", "bitwise_not", "nan_to_num", "exp2", "expm1", "log1p", "erf", "sinc", "deg2rad", "positive",
         "isposinf", "isneginf", "isreal", "angle", "conj_physical", "atan", "asinh", "cosh"]
OPS: dict = {name: _u(name) for name in UNARY}
OPS.update({
    "clamp_min0": lambda lib, x: lib.clamp(x, min=0),
    "clamp_pm1": lambda lib, x: lib.clamp(x, -1, 1),
    "add": lambda lib, x: x + x.flip(-1) if x.ndim else x + x,
    "sub_scalar": lambda lib, x: x - 1,
    "mul": lambda lib, x: x * x,
    "mul_neg0": lambda lib, x: x * -0.0,
    "div": lambda lib, x: x / 2,
    "div_self": lambda lib, x: x / x,
    "floor_divide": lambda lib, x: lib.floor_divide(x, 2),
    "remainder": lambda lib, x: lib.remainder(x, -3),
    "fmod": lambda lib, x: lib.fmod(x, 3),
    "pow2": lambda lib, x: x ** 2,
    "pow_half": lambda lib, x: x ** 0.5,
    "maximum": lambda lib, x: lib.maximum(x, lib.zeros_like(x)),
    "minimum": lambda lib, x: lib.minimum(x, lib.zeros_like(x)),
    "fmax": lambda lib, x: lib.fmax(x, lib.zeros_like(x)),
    "atan2": lambda lib, x: lib.atan2(x, lib.ones_like(x)),
    "eq0": lambda lib, x: x == 0,
    "lt": lambda lib, x: x < 1,
    "logical_and": lambda lib, x: lib.logical_and(x, x),
    "bitwise_and": lambda lib, x: x & x,
    "copysign": lambda lib, x: lib.copysign(lib.ones_like(x), x),
    "where": lambda lib, x: lib.where(x == x, x, lib.zeros_like(x)),
    "sum": lambda lib, x: x.sum(),
    "sum0": lambda lib, x: x.sum(0),
    "prod": lambda lib, x: x.prod(-1),
    "mean": lambda lib, x: x.mean(),
    "amax": lambda lib, x: x.amax(-1),
    "amin0": lambda lib, x: x.amin(0),
    "argmax": lambda lib, x: x.argmax(-1),
    "max_dim": lambda lib, x: x.max(-1),
    "all": lambda lib, x: x.all(-1),
    "any": lambda lib, x: x.any(),
    "cumsum": lambda lib, x: x.cumsum(-1),
    "cumprod": lambda lib, x: x.cumprod(0),
    "logsumexp": lambda lib, x: lib.logsumexp(x, -1),
    "std": lambda lib, x: x.std(-1),
    "var0": lambda lib, x: x.var(0),
    "norm": lambda lib, x: lib.linalg.vector_norm(x, dim=-1),
    "nansum": lambda lib, x: lib.nansum(x, -1),
    "nanmean": lambda lib, x: lib.nanmean(x),
    "median": lambda lib, x: x.median(-1),
    "sort": lambda lib, x: x.sort(dim=-1, stable=True),
    "argsort": lambda lib, x: x.argsort(dim=0, stable=True),
    "flip": lambda lib, x: x.flip(-1),
    "clone": lambda lib, x: x.clone(),
    "contiguous": lambda lib, x: x.contiguous(),
    "to_float64": lambda lib, x: x.to(lib.float64),
    "to_int32": lambda lib, x: x.to(lib.int32) if not (x.is_floating_point() or x.is_complex()) else x.isnan(),
    "count_nonzero": lambda lib, x: lib.count_nonzero(x, -1),
    "diff": lambda lib, x: lib.diff(x),
    "unique": lambda lib, x: lib.unique(x),
})


def _other(lib: Any, x: Any, layout: str) -> Any:
    """A second operand of ``x``'s dtype in another layout (reversed values), broadcastable to ``x``."""
    dtype = str(x.dtype).split(".")[-1]
    block = values(dtype)[::-1, ::-1]
    if tuple(x.shape) != (3, 4):
        return make(lib, dtype, "0-d", block)
    return make(lib, dtype, layout, block)


OPS.update({  # two operands in different layouts (torch's TensorIterator and NumPy's broadcasting)
    "add_transposed": lambda lib, x: x + _other(lib, x, "transposed"),
    "mul_stepped": lambda lib, x: x * _other(lib, x, "stepped"),
    "sub_expanded": lambda lib, x: x - _other(lib, x, "expanded") if x.dtype != lib.bool else x ^ _other(lib, x, "expanded"),
    "maximum_transposed": lambda lib, x: lib.maximum(x, _other(lib, x, "transposed")),
    "where_stepped": lambda lib, x: lib.where(_other(lib, x, "stepped") != 0, x, _other(lib, x, "transposed")),
    "eq_transposed": lambda lib, x: x == _other(lib, x, "transposed"),
    "atan2_stepped": lambda lib, x: lib.atan2(x, _other(lib, x, "stepped")),
    "add_inplace_transposed": lambda lib, x: x.clone().add_(_other(lib, x, "transposed")),
    "copy_into_transposed": lambda lib, x: _other(lib, x, "transposed").clone().copy_(x) if x.ndim else x.clone(),
})
# float32 results of these go through transcendental kernels (SLEEF in torch, NumPy's in ember): a few ulp apart
_INEXACT = {"exp", "log", "sin", "tanh", "sigmoid", "sqrt", "rsqrt", "exp2", "expm1", "log1p", "erf", "sinc",
            "atan", "asinh", "cosh", "angle", "atan2", "pow_half", "logsumexp", "std", "var0", "norm", "mean",
            "nanmean", "deg2rad", "reciprocal", "sum", "sum0", "nansum", "cumsum", "prod", "cumprod", "div_self",
            "atan2_stepped"}


def cases() -> Iterator[tuple]:
    for name in OPS:
        for dtype in DTYPES:
            for layout in LAYOUTS:
                yield name, dtype, layout


def sample(every: int = 11) -> list:
    """A fixed spread over the cases (every op, dtype and layout appears)."""
    return list(cases())[::every]


def _arrays(lib: Any, result: Any) -> list:
    items = result if isinstance(result, tuple) else (result,)
    return [(np.asarray(r.detach().resolve_conj().numpy() if lib.__name__ == "torch" else r.detach().numpy()),
             str(r.dtype).split(".")[-1], tuple(r.shape)) for r in items]


def run(lib: Any, name: str, dtype: str, layout: str) -> Any:
    x = make(lib, dtype, layout, values(dtype))
    try:
        with np.errstate(all="ignore"):
            return _arrays(lib, OPS[name](lib, x))
    except Exception as ex:  # noqa: BLE001 (raising or not is compared)
        return f"raises {type(ex).__name__}: {str(ex)[:120]}"


def compare(want: Any, got: Any, name: str, dtype: str) -> str | None:
    """None when ember's result is torch's, else what differs."""
    if isinstance(want, str) or isinstance(got, str):
        if isinstance(want, str) and isinstance(got, str):
            return None
        return f"torch {want if isinstance(want, str) else 'computes'}; ember {got if isinstance(got, str) else 'computes'}"
    for i, ((a, da, sa), (b, db, sb)) in enumerate(zip(want, got)):
        if da != db or sa != sb:
            return f"output {i}: torch {da}{list(sa)}, ember {db}{list(sb)}"
        if name == "unique" and a.dtype.kind in "fc":
            continue  # (NaN handling of unique is checked by the fuzzer's own cases)
        if a.dtype.kind in "fc":
            an, bn = np.isnan(a), np.isnan(b)
            if not np.array_equal(an, bn):
                return f"output {i}: NaN positions differ: torch {a.tolist()}, ember {b.tolist()}"
            fin = ~an
            if a.dtype.kind == "f":
                zero = fin & (a == 0) & (b == 0)
                if not np.array_equal(np.signbit(a[zero]), np.signbit(b[zero])):
                    return f"output {i}: signs of zeros differ: torch {a.tolist()}, ember {b.tolist()}"
            inexact = name in _INEXACT or dtype == "complex64"
            rtol = (4e-6 if a.dtype.itemsize <= 8 else 1e-13) if inexact else 0.0
            if not np.allclose(a[fin], b[fin], rtol=rtol, atol=0.0, equal_nan=True) and not all(
                    (x == y) or (math.isinf(abs(x)) and x == y) for x, y in zip(a[fin].tolist(), b[fin].tolist())):
                return f"output {i}: values differ: torch {a.tolist()}, ember {b.tolist()}"
        elif not np.array_equal(a, b):
            return f"output {i}: values differ: torch {a.tolist()}, ember {b.tolist()}"
    return None


# Differences that are decisions (tests/trust/trust_allow.py and docs/special-points.md give the reasons at length)
_NO_TORCH_KERNEL = re.compile(r"torch raises (NotImplementedError: \"\w+\" not implemented for '(Bool|Int|Long|Complex"
                              r"Float)'|RuntimeError: (argmax\(\): does not support bool|nansum on CPU does not "
                              r"support complex))")
ALLOW = [
    ("ember computes where torch has no kernel (bool abs/floor/ceil/trunc/argmax/median, integer frac, complex "
     "nansum/unique): ember returns the defined value (trust_allow.py)",
     lambda name, dtype, layout, problem: bool(_NO_TORCH_KERNEL.match(problem))),
    ("which zero wins a tie of +0 and -0 in maximum/minimum (torch's own answer depends on the size: its scalar loop "
     "keeps the first operand, its vector loop the second; no value differs)",
     lambda name, dtype, layout, problem: name in ("maximum", "minimum", "maximum_transposed")
     and "signs of zeros differ" in problem),
    ("sign(nan) is NaN in ember, 0 in torch: a documented decision (docs/special-points.md)",
     lambda name, dtype, layout, problem: name in ("sign", "sgn") and "NaN positions differ" in problem),
    ("complex arithmetic with infinite parts has no single convention (trust_allow.py 'complex infinities')",
     lambda name, dtype, layout, problem: dtype == "complex64" and name in ("add", "pow_half", "cumprod", "diff",
                                                                            "add_transposed", "mul_stepped",
                                                                            "sub_expanded", "add_inplace_transposed")
     and ("NaN positions differ" in problem or "values differ" in problem)),
    ("ember refuses to order complex numbers even in an empty amax, and complex logsumexp (trust_allow.py)",
     lambda name, dtype, layout, problem: dtype == "complex64" and name in ("amax", "logsumexp")
     and "ember raises RuntimeError" in problem),
]


def allowed(name: str, dtype: str, layout: str, problem: str) -> str | None:
    """The reason a difference is a decision, or None."""
    for reason, test in ALLOW:
        if test(name, dtype, layout, problem):
            return reason
    return None


def check(name: str, dtype: str, layout: str) -> str | None:
    """A difference no decision allows, or None (imports torch and ember: for the tests and the CLI)."""
    import torch

    import ember

    problem = compare(run(torch, name, dtype, layout), run(ember, name, dtype, layout), name, dtype)
    if problem and not allowed(name, dtype, layout, problem):
        return f"{name} [{dtype}, {layout}]: {problem[:600]}"
    return None


def main() -> None:
    import torch

    import ember

    found = 0
    for name, dtype, layout in cases():
        problem = check(name, dtype, layout)
        if problem:
            found += 1
            print(problem[:400])
    print(f"{found} differences no decision allows ({torch.__version__})")


if __name__ == "__main__":
    main()
