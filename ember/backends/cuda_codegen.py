"""CUDA C for fused elementwise kernels, generated from the fuser's kernel source.

The fuser (:mod:`ember.graph.passes.fuse`) hands a backend's ``fuse`` hook the *kernel source*: one
line per step, ``t3 = multiply(t1, 0.5)``, in NumPy ufunc names, inputs ``in0..``, outputs named in
a ``# outputs:`` header. This module turns that text into the body of a ``cupy.ElementwiseKernel``
for given input dtypes, without CuPy (so it is tested on machines without a GPU).

Safety: the text is parsed with :mod:`ast` (never evaluated) and every token is checked. Names must
be names the fuser makes (``in3``, ``t12``, :mod:`ember.graph.passes.kernel_text`), functions must
be in :data:`FUNCTIONS`, constants must be numbers (``float('inf')`` allowed), a ``dtype=`` keyword
must name a known dtype. The C written out holds only those names, C type names chosen here,
function names chosen here and numbers formatted here.

Numerics follow NumPy step by step: each step's loop dtype is NumPy's (``ufunc.resolve_dtypes``,
Python numbers weak as in NEP 50), every temporary is stored in its NumPy dtype (so float16 and
bfloat16 round after each step, as eager does), and float16/bfloat16 steps compute in float32 as
NumPy's loops do. Transcendental functions are the CUDA math library's (a few ulp from NumPy's).

Example:
    >>> k = generate("# inputs: in0\\n# outputs: t2\\nt1 = multiply(in0, 2.0)\\nt2 = exp(t1)", ["float32"])
    >>> k.in_params, k.out_params
    ('float32 in0', 'float32 out0')
    >>> print(k.body)
    const float t1 = (float)((((float)in0) * ((float)(2.0))));
    const float t2 = (float)(expf(((float)t1)));
    out0 = t2;
"""
from __future__ import annotations

import ast
import re
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ember.graph.passes import kernel_text

try:  # bfloat16 is a core dependency of ember (ml_dtypes); keep the module importable without it
    import ml_dtypes

    _BF16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BF16 = None

# NumPy dtype name -> the C type CuPy's kernels use for it.
C_TYPES = {
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float", "float64": "double",
}
_HALF = ("float16", "bfloat16")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # stored as 16 bits, computed in float32 (as NumPy's loops)

# Unary float functions: NumPy name -> (float32 C name, float64 C name).
_UNARY_MATH = {
    "exp": ("expf", "exp"), "exp2": ("exp2f", "exp2"), "expm1": ("expm1f", "expm1"), "log": ("logf", "log"),
    "log2": ("log2f", "log2"), "log10": ("log10f", "log10"), "log1p": ("log1pf", "log1p"),
    "sqrt": ("sqrtf", "sqrt"), "cbrt": ("cbrtf", "cbrt"), "sin": ("sinf", "sin"), "cos": ("cosf", "cos"),
    "tan": ("tanf", "tan"), "arcsin": ("asinf", "asin"), "arccos": ("acosf", "acos"), "arctan": ("atanf", "atan"),
    "sinh": ("sinhf", "sinh"), "cosh": ("coshf", "cosh"), "tanh": ("tanhf", "tanh"), "arcsinh": ("asinhf", "asinh"),
    "arccosh": ("acoshf", "acosh"), "arctanh": ("atanhf", "atanh"), "floor": ("floorf", "floor"),
    "ceil": ("ceilf", "ceil"), "trunc": ("truncf", "trunc"), "rint": ("rintf", "rint"), "erf": ("erff", "erf"),
    "erfc": ("erfcf", "erfc"),
    "fabs": ("fabsf", "fabs"),
}
_BINARY_MATH = {"arctan2": ("atan2f", "atan2"), "hypot": ("hypotf", "hypot"), "fmod": ("fmodf", "fmod"),
                "power": ("powf", "pow"), "copysign": ("copysignf", "copysign")}
_INFIX = {"add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "divide": "/", "less": "<",
          "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!=",
          "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "logical_and": "&&", "logical_or": "||",
          "logical_xor": "!="}
_HELPERS = {"maximum": "ember_maximum", "minimum": "ember_minimum", "fmax": "ember_fmax", "fmin": "ember_fmin",
            "remainder": "ember_remainder", "floor_divide": "ember_floor_divide"}
_OTHER = ("round", "negative", "positive", "abs", "absolute", "sign", "square", "reciprocal", "invert", "logical_not",
          "isnan", "isinf", "isfinite", "cast", "copy", "where", "clip")
FUNCTIONS = frozenset((*_UNARY_MATH, *_BINARY_MATH, *_INFIX, *_HELPERS, *_OTHER, "fma"))

# Device helpers shared by every generated kernel (the ``preamble``). NaN rules are NumPy's:
# maximum/minimum propagate NaN, fmax/fmin ignore it; remainder/floor_divide are Python's (sign of
# the divisor, floor), computed from fmod as NumPy's npy_divmod does.
PREAMBLE = r"""
#ifndef EMBER_DEVICE
#define EMBER_DEVICE __device__
#endif
#ifndef EMBER_INF
#define EMBER_INF __longlong_as_double(0x7ff0000000000000ULL)
#define EMBER_NAN __longlong_as_double(0x7ff8000000000000ULL)
#endif
template <typename T> EMBER_DEVICE inline T ember_maximum(T a, T b) { return (a >= b || a != a) ? a : b; }
template <typename T> EMBER_DEVICE inline T ember_minimum(T a, T b) { return (a <= b || a != a) ? a : b; }
template <typename T> EMBER_DEVICE inline T ember_fmax(T a, T b) { return (a >= b || b != b) ? a : b; }
template <typename T> EMBER_DEVICE inline T ember_fmin(T a, T b) { return (a <= b || b != b) ? a : b; }
EMBER_DEVICE inline double ember_fmod(double a, double b) { return fmod(a, b); }
EMBER_DEVICE inline float ember_fmod(float a, float b) { return fmodf(a, b); }
EMBER_DEVICE inline double ember_floor(double a) { return floor(a); }
EMBER_DEVICE inline float ember_floor(float a) { return floorf(a); }
EMBER_DEVICE inline double ember_copysign(double a, double b) { return copysign(a, b); }
EMBER_DEVICE inline float ember_copysign(float a, float b) { return copysignf(a, b); }
template <typename T> EMBER_DEVICE inline T ember_remainder(T a, T b) {
  T mod = ember_fmod(a, b);
  if (b == (T)0) return mod;
  if (mod != (T)0) { if ((b < (T)0) != (mod < (T)0)) mod += b; }
  else mod = ember_copysign((T)0, b);
  return mod;
}
template <typename T> EMBER_DEVICE inline T ember_floor_divide(T a, T b) {
  if (b == (T)0) return a / b;
  T mod = ember_fmod(a, b);
  T div = (a - mod) / b;
  if (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) div -= (T)1;
  T result;
  if (div != (T)0) { result = ember_floor(div); if (div - result > (T)0.5) result += (T)1; }
  else result = ember_copysign((T)0, a / b);
  return result;
}
template <typename T> EMBER_DEVICE inline T ember_int_floor_divide(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
template <typename T> EMBER_DEVICE inline T ember_int_remainder(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T> EMBER_DEVICE inline T ember_int_power(T a, T b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);  /* eager NumPy refuses these */
  T result = 1;
  while (b > 0) { if (b & 1) result *= a; a *= a; b >>= 1; }
  return result;
}
template <typename T> EMBER_DEVICE inline T ember_sign(T a) {
  return a > (T)0 ? (T)1 : (a < (T)0 ? (T)-1 : (a == (T)0 ? (T)0 : a));
}
"""


class UnsupportedKernel(ValueError):
    """The source uses something this generator does not translate; the backend runs the generic path."""


@dataclass(frozen=True)
class Step:
    name: str
    fn: str
    operands: tuple  # kernel names (str) or Python numbers / None
    kwargs: tuple  # sorted (key, value) pairs


@dataclass(frozen=True)
class Program:
    """A parsed kernel source: inputs, outputs and steps."""

    inputs: tuple
    outputs: tuple
    steps: tuple

    @property
    def fns(self) -> set:
        return {s.fn for s in self.steps}


@dataclass(frozen=True)
class KernelSource:
    """What ``cupy.ElementwiseKernel(in_params, out_params, body, name, preamble=...)`` takes."""

    in_params: str
    out_params: str
    body: str
    name: str
    preamble: str
    out_dtypes: tuple  # NumPy dtypes of the outputs, in order

    @property
    def key(self) -> str:
        return hashlib.sha256("\0".join((self.in_params, self.out_params, self.body)).encode()).hexdigest()[:16]


# ---- parsing -------------------------------------------------------------------------------------
def _constant(node: ast.AST, where: str) -> Any:
    """A number from the source: int/float/bool/None literals, a negated one, float('inf'|'-inf'|'nan')."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand, where)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("inf", "-inf", "nan")):
        return float(node.args[0].value)
    raise kernel_text.UnsafeKernelValue(f"fused kernel source: {where} is not a name or a number")


def _header(line: str, label: str) -> tuple:
    prefix = f"# {label}:"
    if not line.startswith(prefix):
        raise UnsupportedKernel(f"fused kernel source: expected a '{prefix}' header line, got {line[:60]!r}")
    names = [n.strip() for n in line[len(prefix):].split(",") if n.strip()]
    return tuple(kernel_text.name(n) for n in names)


def parse(source: str) -> Program:
    """The steps of a fuser kernel source; raises UnsupportedKernel / UnsafeKernelValue on anything else."""
    lines = [line for line in source.splitlines() if line.strip()]
    if len(lines) < 2:
        raise UnsupportedKernel("fused kernel source: missing the inputs/outputs header")
    inputs, outputs = _header(lines[0], "inputs"), _header(lines[1], "outputs")
    steps = []
    for line in lines[2:]:
        try:
            tree = ast.parse(line, mode="exec")
        except SyntaxError:
            raise kernel_text.UnsafeKernelValue(f"fused kernel source: cannot parse step {line[:80]!r}") from None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
            raise kernel_text.UnsafeKernelValue(f"fused kernel source: step {line[:80]!r} is not an assignment")
        stmt = tree.body[0]
        call = stmt.value
        if (len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or not isinstance(call, ast.Call)
                or not isinstance(call.func, ast.Name)):
            raise kernel_text.UnsafeKernelValue(f"fused kernel source: step {line[:80]!r} is not 'tK = fn(...)'")
        target = kernel_text.name(stmt.targets[0].id)
        fn = call.func.id
        if not _IDENTIFIER.match(fn):
            raise kernel_text.UnsafeKernelValue(f"fused kernel source: function name {fn[:40]!r}")
        operands = []
        for arg in call.args:
            operands.append(kernel_text.name(arg.id) if isinstance(arg, ast.Name) else _constant(arg, f"an operand of {fn}"))
        kwargs = []
        for kw in call.keywords:
            if kw.arg == "dtype":
                if isinstance(kw.value, ast.Constant) and kw.value.value in ("complex64", "complex128"):
                    raise UnsupportedKernel(f"fused kernel source: {kw.value.value} (complex numbers have no CUDA "
                                            "translation here; the generic path runs them)")
                if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
                        and kw.value.value in C_TYPES):
                    raise kernel_text.UnsafeKernelValue(f"fused kernel source: dtype of {fn} is not a known dtype name")
                kwargs.append(("dtype", kw.value.value))
            elif kw.arg == "axis" and isinstance(kw.value, ast.Tuple):
                axes = tuple(_constant(e, f"axis of {fn}") for e in kw.value.elts)
                if not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
                    raise kernel_text.UnsafeKernelValue(f"fused kernel source: axis of {fn} is not a tuple of ints")
                kwargs.append(("axis", axes))
            elif kw.arg in ("axis", "keepdims"):
                kwargs.append((kw.arg, _constant(kw.value, f"{kw.arg} of {fn}")))
            else:
                raise UnsupportedKernel(f"fused kernel source: keyword {kw.arg!r} of {fn}")
        steps.append(Step(target, fn, tuple(operands), tuple(sorted(kwargs))))
    return Program(inputs, outputs, tuple(steps))


# ---- dtypes --------------------------------------------------------------------------------------
def dtype_of(name: str) -> np.dtype:
    if name == "bfloat16":
        if _BF16 is None:
            raise UnsupportedKernel("bfloat16 needs ml_dtypes")
        return _BF16
    return np.dtype(name)


def _name(dtype: np.dtype) -> str:
    text = "bfloat16" if _BF16 is not None and dtype == _BF16 else dtype.name
    if text not in C_TYPES:
        raise UnsupportedKernel(f"no CUDA kernel type for dtype {dtype}")
    return text


def _weak(value: Any) -> Any:
    """What NumPy's resolve_dtypes takes for a Python number (weak) operand."""
    if isinstance(value, bool):
        return np.dtype(bool)
    return type(value)


def _loop(fn: str, operand_types: Sequence[Any]) -> tuple:
    """NumPy's loop dtypes for ufunc ``fn``: (input dtypes..., output dtype)."""
    ufunc = getattr(np, fn)
    try:
        return tuple(ufunc.resolve_dtypes((*operand_types, None)))
    except (TypeError, ValueError, np.exceptions.DTypePromotionError) as error:  # type: ignore[attr-defined]
        raise UnsupportedKernel(f"{fn} has no NumPy loop for {operand_types}: {error}") from None


def _result_type(fn: str, types: Sequence[Any], values: Sequence[Any]) -> np.dtype:
    """NumPy's result dtype of ``where``/``clip`` on one-element witnesses of these dtypes and the Python
    numbers themselves (weak), i.e. what eager NumPy computes (ml_dtypes' bfloat16 promotes with a Python
    float to float32, for instance)."""
    args = [np.ones(1, t) if isinstance(t, np.dtype) else v for t, v in zip(types, values)]
    with np.errstate(all="ignore"):
        return np.asarray(getattr(np, fn)(*args)).dtype


# ---- emission ------------------------------------------------------------------------------------
def _c(dtype: np.dtype) -> str:
    return C_TYPES[_name(dtype)]


def _compute(dtype: np.dtype) -> str:
    """The C type a step computes in: float for the 16-bit floats, else the type itself."""
    return "float" if _name(dtype) in _HALF else _c(dtype)


def _literal(value: Any, ctype: str) -> str:
    if value is None:
        raise UnsupportedKernel("None operand")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        if not -2**63 <= value < 2**64:
            raise UnsupportedKernel(f"integer constant {value} does not fit 64 bits")
        text = f"{value}LL" if value < 2**63 else f"{value}ULL"
    else:
        f = float(value)
        if math.isnan(f):
            text = "EMBER_NAN"
        elif math.isinf(f):
            text = "EMBER_INF" if f > 0 else "(-EMBER_INF)"
        else:
            text = repr(f)  # round-trips; a double literal in C
    return f"(({ctype})({text}))"


def _operand(value: Any, types: dict, loop: Any) -> str:
    """Operand ``value`` in the compute type of NumPy loop dtype ``loop`` (a C type name is taken as is).
    A Python number goes to the loop dtype first (NEP 50: float16 rounds it to half, then computes in float)."""
    if isinstance(loop, str):
        ctype, half = loop, None
    else:
        ctype, half = _compute(loop), (_c(loop) if _name(loop) in _HALF else None)
    if isinstance(value, str):
        return f"(({ctype}){value})"
    if half is not None:
        return f"(({ctype})(({half}){_literal(value, 'double')}))"
    return _literal(value, ctype)


def _math(fn: str, table: dict, loop: np.dtype) -> str:
    ct = _compute(loop)
    if ct not in ("float", "double"):
        raise UnsupportedKernel(f"{fn} on {loop}")
    return table[fn][0 if ct == "float" else 1]


def _expression(step: Step, types: dict) -> tuple[str, np.dtype]:
    """C expression of one step (in its compute type) and its NumPy result dtype."""
    fn, ops = step.fn, step.operands
    kwargs = dict(step.kwargs)
    in_types = [types[o] if isinstance(o, str) else _weak(o) for o in ops]
    if fn == "cast":
        out = dtype_of(kwargs["dtype"])
        (x,) = ops
        src = types[x] if isinstance(x, str) else None
        if src is not None and _name(src) in _HALF and _name(out) not in _HALF:
            return f"(({_c(out)})((float){x}))", out  # through float: the 16-bit classes convert to float only
        if src is not None and _name(out) in _HALF:
            return f"((float){_operand(x, types, _compute(src) if src is not None else 'double')})", out
        return _operand(x, types, _c(out)), out
    if fn == "copy":
        (x,) = ops
        if not isinstance(x, str):
            raise UnsupportedKernel("copy of a constant")
        return f"(({_compute(types[x])}){x})", types[x]
    if fn == "where":
        cond, a, b = ops
        out = _result_type("where", [np.dtype(bool)] + list(in_types[1:]), [True] + list(ops[1:]))
        ct = _compute(out)
        c = f"((bool){cond})" if isinstance(cond, str) else ("true" if cond else "false")
        return f"({c} ? {_operand(a, types, out)} : {_operand(b, types, out)})", out
    if fn == "clip":
        x, lo, hi = (tuple(ops) + (None, None))[:3]
        out = _result_type("clip", in_types, ops)
        ct = _compute(out)
        expr = _operand(x, types, out)
        if lo is not None:
            expr = f"ember_maximum<{ct}>({expr}, {_operand(lo, types, out)})"
        if hi is not None:
            expr = f"ember_minimum<{ct}>({expr}, {_operand(hi, types, out)})"
        return expr, out
    if fn == "fma":  # a * b + c rounded once (ember/ops/fma.py): C's fmaf/fma, one rounding on any IEEE device
        arrays = [t for t in in_types if isinstance(t, np.dtype)]
        out = np.result_type(*arrays) if arrays else np.dtype("float64")  # numbers take the arrays' dtype
        if out not in (np.dtype("float32"), np.dtype("float64")):
            raise UnsupportedKernel(f"fma on {out} (ember's fma rounds once in float32/float64 only)")
        name = "fmaf" if out == np.dtype("float32") else "fma"
        return f"{name}({', '.join(_operand(o, types, out) for o in ops)})", out
    if fn in ("sum", "mean"):
        raise UnsupportedKernel("a reduction ends this group (ElementwiseKernel has no reductions)")
    if fn not in FUNCTIONS:
        raise UnsupportedKernel(f"no CUDA translation of {fn!r}")
    if fn == "round":  # NumPy rounds half to even: rint, for decimals=0 only
        if len(ops) == 2 and ops[1] in (0, None):
            fn, ops, in_types = "rint", ops[:1], in_types[:1]
        else:
            raise UnsupportedKernel("round with decimals")
    if fn == "absolute":
        fn = "abs"
    if fn in ("erf", "erfc"):  # not NumPy ufuncs: keep a float input's dtype, else float64 (symbolic_xp's witness)
        dt = np.result_type(np.ones(1, in_types[0]), 1.0) if isinstance(in_types[0], np.dtype) else np.dtype("float64")
        loop = (dt, dt)
    else:
        loop = _loop(fn, in_types)
    *loop_in, out = loop
    ct = _compute(loop_in[0]) if loop_in else _compute(out)
    args = [_operand(o, types, loop_in[k] if k < len(loop_in) else ct) for k, o in enumerate(ops)]
    kind = np.dtype(loop_in[0]).kind if loop_in else "f"
    if fn in _INFIX:
        if fn in ("logical_and", "logical_or", "logical_xor"):
            args = [f"((bool){a})" if isinstance(o, str) else f"((bool)({a}))" for a, o in zip(args, ops)]
        if fn in ("true_divide", "divide") and kind in "iub":
            raise UnsupportedKernel("integer true_divide (NumPy loops in float64 already)")
        return f"({args[0]} {_INFIX[fn]} {args[1]})", out
    if fn in ("floor", "ceil", "trunc", "rint") and kind in "iub":
        return args[0], out  # NumPy 2's integer loops return the value
    if fn in _UNARY_MATH:
        return f"{_math(fn, _UNARY_MATH, loop_in[0])}({args[0]})", out
    if fn in _BINARY_MATH:
        if fn == "power" and kind in "iu":
            return f"ember_int_power<{ct}>({args[0]}, {args[1]})", out
        if fn == "power" and kind == "b":
            raise UnsupportedKernel("power of bools")
        return f"{_math(fn, _BINARY_MATH, loop_in[0])}({args[0]}, {args[1]})", out
    if fn in ("remainder", "floor_divide"):
        helper = _HELPERS[fn] if kind == "f" or _name(loop_in[0]) in _HALF else \
            ("ember_int_remainder" if fn == "remainder" else "ember_int_floor_divide")
        if kind == "b":
            raise UnsupportedKernel(f"{fn} of bools")
        return f"{helper}<{ct}>({args[0]}, {args[1]})", out
    if fn in _HELPERS:
        return f"{_HELPERS[fn]}<{ct}>({args[0]}, {args[1]})", out
    if fn == "negative":
        return f"(-{args[0]})", out
    if fn == "positive":
        return f"(+{args[0]})", out
    if fn == "abs":
        if kind == "b":
            return args[0], out
        if kind == "f" or _name(loop_in[0]) in _HALF:
            return f"{_math('fabs', _UNARY_MATH, loop_in[0])}({args[0]})", out
        return f"({args[0]} < ({ct})0 ? ({ct})(-{args[0]}) : {args[0]})", out
    if fn == "sign":
        return f"ember_sign<{ct}>({args[0]})", out
    if fn == "square":
        return f"({args[0]} * {args[0]})", out
    if fn == "reciprocal":
        if kind != "f" and _name(loop_in[0]) not in _HALF:
            raise UnsupportedKernel("integer reciprocal")
        return f"(({ct})1 / {args[0]})", out
    if fn == "invert":
        return (f"(!{args[0]})" if kind == "b" else f"(~{args[0]})"), out
    if fn == "logical_not":
        return f"(!{args[0]})", out
    if fn in ("isnan", "isinf", "isfinite"):
        if kind != "f" and _name(loop_in[0]) not in _HALF:
            return ("true" if fn == "isfinite" else "false"), out
        x = args[0]
        return {"isnan": f"({x} != {x})", "isinf": f"({x} == EMBER_INF || {x} == -EMBER_INF)",
                "isfinite": f"({x} - {x} == ({ct})0)"}[fn], out
    raise UnsupportedKernel(f"no CUDA translation of {fn!r}")  # pragma: no cover - FUNCTIONS lists the above


def generate(source: str, input_dtypes: Sequence[Any], name: str = "ember_fused") -> KernelSource:
    """The ElementwiseKernel pieces computing ``source`` for inputs of ``input_dtypes``.

    Raises UnsupportedKernel when a step has no translation (the caller runs the generic path)."""
    program = source if isinstance(source, Program) else parse(source)
    if len(input_dtypes) != len(program.inputs):
        raise ValueError(f"fused kernel: {len(program.inputs)} inputs in the source, {len(input_dtypes)} dtypes given")
    types: dict[str, np.dtype] = {}
    for n, dt in zip(program.inputs, input_dtypes):
        types[n] = dtype_of(dt) if isinstance(dt, str) else np.dtype(dt)
        _name(types[n])
    lines = []
    for step in program.steps:
        expr, out = _expression(step, types)
        out = np.dtype(out)
        types[step.name] = out
        ctype = _c(out)
        lines.append(f"const {ctype} {step.name} = ({ctype})({expr});")
    for k, o in enumerate(program.outputs):
        if o not in types or o in program.inputs:
            raise UnsupportedKernel(f"fused kernel: output {o} is not computed by a step")
        lines.append(f"out{k} = {o};")
    in_params = ", ".join(f"{_name(types[n])} {n}" for n in program.inputs)
    out_params = ", ".join(f"{_name(types[o])} out{k}" for k, o in enumerate(program.outputs))
    if not _IDENTIFIER.match(name):
        raise ValueError(f"fused kernel: kernel name {name!r} is not a C identifier")
    return KernelSource(in_params, out_params, "\n".join(lines), name, PREAMBLE, tuple(types[o] for o in program.outputs))


def fuser_steps(program: Program) -> list:
    """The program as the fuser's steps ``(name, fn, operands, kwargs)`` (dtypes as NumPy dtypes), for
    :class:`ember.graph.passes.fuse.FusedKernel`: the generic path a backend runs when :func:`generate`
    has no translation for some dtype."""
    return [(s.name, s.fn, list(s.operands), {k: dtype_of(v) if k == "dtype" else v for k, v in s.kwargs})
            for s in program.steps]


def split_reduction(program: Program) -> tuple[Program, tuple]:
    """A group ending in ``sum``/``mean`` (then only casts of its result, as the fuser builds them) as an
    elementwise program that also outputs the reduction's operand, plus the tail steps to run after it
    (one library reduction instead of a replay of every step). Programs without a reduction come back
    unchanged with an empty tail; any other shape raises UnsupportedKernel."""
    kinds = [k for k, s in enumerate(program.steps) if s.fn in ("sum", "mean")]
    if not kinds:
        return program, ()
    first = kinds[0]
    tail = program.steps[first:]
    reduced = {tail[0].name}
    for step in tail[1:]:
        if step.fn != "cast" or len(step.operands) != 1 or step.operands[0] not in reduced:
            raise UnsupportedKernel("only casts of a reduction's result may follow it")
        reduced.add(step.name)
    operand = tail[0].operands[0] if len(tail[0].operands) == 1 else None
    if not isinstance(operand, str):
        raise UnsupportedKernel("a reduction of a constant or of several operands")
    head = program.steps[:first]
    outputs = tuple(o for o in program.outputs if o not in reduced)
    if operand not in outputs:
        outputs += (operand,)
    if not head or operand in program.inputs:
        raise UnsupportedKernel("a reduction of a kernel input (nothing to fuse before it)")
    return Program(program.inputs, outputs, head), tail
