"""The CUDA C the fused-kernel generator writes, checked without a GPU.

* Structure and safety: only kernel names, C types and helpers chosen by ember, and numbers reach the
  C; hostile source lines are refused.
* Numerics: every fused kernel that the op-spec table's compiled functions produce (each elementwise
  record, on its dtypes and at special values) is recorded through the CPU backend's ``fuse`` hook
  with its real inputs and its generic (NumPy) outputs, which equal eager bit for bit
  (tests/graph/test_fusion_matches_eager.py). The generated C for the same source is compiled as
  host C++ (g++) in one shared library and run on the same inputs: exact where the steps are exact
  in IEEE arithmetic, within a few ulp where a transcendental function (libm vs NumPy) is involved.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember.backends import cuda_codegen, get_backend
from ember.backends.cuda_codegen import UnsupportedKernel, generate, parse
from ember.graph.passes import kernel_text
from ember.graph.passes.fuse import FusedKernel
from ember.ops.registry import OPS

from op_specs import SPECS, sample

host = pytest.importorskip("ember.backends.cuda_codegen_host")

ELEMENTWISE = ("unary", "binary", "ternary", "cast")
SPECIAL = np.array([0.0, -0.0, 1.0, -1.5, 0.5, -2.5, 1e30, -1e30, np.inf, -np.inf, np.nan, 3e-310])
# Steps whose C is exact IEEE arithmetic (or a select/compare/cast): results must match bit for bit.
EXACT = {"add", "subtract", "multiply", "true_divide", "negative", "positive", "abs", "absolute", "sign", "square",
         "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "maximum", "minimum", "fmax", "fmin",
         "where", "clip", "cast", "copy", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and",
         "bitwise_or", "bitwise_xor", "invert", "isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "rint",
         "sqrt", "remainder", "floor_divide", "fmod", "reciprocal"}


def _fusable(name: str) -> bool:
    op = OPS.get(name)
    return op is not None and op.category in ELEMENTWISE


def _post(out: ember.Tensor) -> ember.Tensor:
    return ember.logical_not(out) if out.dtype is ember.bool else out + out


def _compile_run(fn, arrays: list) -> None:
    tensors = [ember.tensor(a) for a in arrays]
    compiled = ember.compile(lambda *xs: _post(fn(*xs)), fallback="raise")
    for _ in range(3):
        compiled(*tensors)


@pytest.fixture(scope="module")
def recorded() -> list:
    return record_kernels()


def _generic(source: str):
    program = parse(source)
    return FusedKernel(cuda_codegen.fuser_steps(program), len(program.inputs), list(program.outputs), source, np)


def record_kernels() -> list:
    """(source, input arrays, generic outputs) of every fused kernel the specs produce, on their dtypes
    and on float16/bfloat16. (Also used by tools/check_cuda_nvrtc.py.)"""
    cpu = get_backend("cpu")
    records: list = []

    def recorder(kernel, *rest):
        source = kernel if isinstance(kernel, str) else kernel.source
        try:
            generic = _generic(source)
        except UnsupportedKernel:  # complex casts: no translation, the CPU's own kernel runs (as on the GPU)
            return saved(kernel, *rest)

        def kernel(xp, *arrays):
            out = generic(xp, *arrays)
            outs = out if isinstance(out, tuple) else (out,)
            records.append((source, [np.array(a, copy=True) for a in arrays], [np.array(o, copy=True) for o in outs]))
            return out

        return kernel

    saved = cpu.fuse
    cpu.fuse = recorder
    try:
        with np.errstate(all="ignore"):
            for spec in SPECS:
                if not any(_fusable(n) for n in spec.ops):
                    continue
                halves = ("float16", "bfloat16") if spec.float_dtypes else ()
                for dtype in spec.float_dtypes + halves + tuple(spec.int_dtypes):
                    case = spec.shapes[0]
                    rng = np.random.default_rng(0)
                    arrays = [spec.fixed[i](rng, case) if i in spec.fixed else
                              sample(rng, shape, spec.domain[i] if isinstance(spec.domain, tuple) else spec.domain,
                                     ember.dtypes.to_dtype(dtype).np) for i, shape in enumerate(case)]
                    try:
                        _compile_run(spec.fn, arrays)
                    except (TypeError, RuntimeError):  # the spec refuses this dtype eagerly too
                        continue
            for name in sorted(n for n, op in OPS.items() if op.category in ("unary", "binary")):
                for dtype in (np.float32, np.float64):
                    a = SPECIAL.astype(dtype)
                    arrays = [a] if OPS[name].category == "unary" else [a, np.roll(a, 5)]
                    if name.startswith("bitwise"):
                        arrays = [x > 0 for x in arrays]
                    try:
                        _compile_run(lambda *xs, op=OPS[name]: ember.ops.dispatch.apply(op, tuple(xs)), arrays)
                    except (TypeError, RuntimeError):
                        continue
    finally:
        cpu.fuse = saved
    return records


@pytest.fixture(scope="module")
def compiled(recorded, tmp_path_factory):
    if host.compiler() is None:
        pytest.skip("no C++ compiler to check the generated kernels on the host")
    kernels, cases, unsupported = [], [], []
    seen = set()
    for source, ins, outs in recorded:
        dts = [a.dtype for a in ins]
        try:
            k = generate(source, dts)
        except UnsupportedKernel as error:
            unsupported.append((source, str(error)))
            continue
        key = (source, tuple(str(d) for d in dts), tuple(a.shape for a in ins))
        if key in seen:
            continue
        seen.add(key)
        kernels.append(k)
        cases.append((source, ins, outs))
    lib = host.HostKernels(kernels, str(tmp_path_factory.mktemp("cuda_host")))
    return lib, cases, unsupported


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (float32/float64), 0 where both are NaN or equal."""
    a, b = np.asarray(a), np.asarray(b)
    itype = {4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(itype).astype(np.float64), b.view(itype).astype(np.float64)
    ia = np.where(ia < 0, np.iinfo(itype).min - ia, ia)
    ib = np.where(ib < 0, np.iinfo(itype).min - ib, ib)
    d = np.abs(ia - ib)
    return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0, d)


def test_recorded_kernels_cover_the_elementwise_records(recorded, compiled):
    _, cases, unsupported = compiled
    fns = set()
    for source, _, _ in cases:
        fns |= parse(source).fns
    assert len(cases) >= 150, len(cases)
    # Everything but reductions (sum/mean end some groups) and round(x, decimals): the generic path runs those.
    # Complex kernels (complex dtypes, conj) have no CUDA translation yet: the generic path runs them
    # (docs/complex-fft.md).
    others = [e for s, e in unsupported if "sum(" not in s and "mean(" not in s and e != "round with decimals"
              and "complex" not in e and "'conj'" not in e]
    assert not others, others[:5]
    for fn in ("exp", "tanh", "erf", "where", "clip", "maximum", "cast", "power", "remainder", "floor_divide"):
        assert fn in fns, fn


def test_generated_c_matches_eager(compiled):
    lib, cases, _ = compiled
    failures = []
    for k, (source, ins, want) in enumerate(cases):
        with np.errstate(all="ignore"):
            got = lib.run(k, *ins)
        exact = parse(source).fns <= EXACT
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (source, g.dtype, w.dtype)
            if exact or w.dtype.kind not in "f":
                ok = np.array_equal(g, w, equal_nan=True) if w.dtype.kind == "f" else np.array_equal(g, w)
                if not ok:
                    failures.append((source, ins, g, w))
                continue
            if w.dtype.itemsize == 2:  # float16/bfloat16: one rounding of a few-ulp float32 difference
                tol = 2e-3 if w.dtype == np.float16 else 1.6e-2
                ok = np.allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol, equal_nan=True)
            else:
                # libm's transcendental functions vs NumPy's: a few ulp, more through cancellation (x - y)
                close = np.isclose(g, w, rtol=1e-5 if w.dtype == np.float32 else 1e-13,
                                   atol=1e-6 if w.dtype == np.float32 else 1e-14, equal_nan=True)
                ok = bool(np.all(close | (_ulps(g, w) <= 4)))
            ok = ok and np.array_equal(np.isnan(g.astype(np.float32)), np.isnan(w.astype(np.float32)))
            if not ok:
                failures.append((source, ins, g, w))
    assert not failures, "\n\n".join(f"{s}\ninputs {i}\nC      {g}\neager  {w}" for s, i, g, w in failures[:3])


def test_body_holds_only_names_and_numbers():
    source = "# inputs: in0, in1\n# outputs: t3\nt1 = where(in1, in0, 0.5)\nt2 = cast(t1, dtype='float16')\n" \
             "t3 = maximum(t2, float('-inf'))"
    k = generate(source, ["float32", "bool"])
    assert k.in_params == "float32 in0, bool in1" and k.out_params == "float16 out0"
    assert k.out_dtypes == (np.dtype(np.float16),)
    lines = k.body.splitlines()
    assert [ln.split(" = ")[0] for ln in lines] == ["const float t1", "const float16 t2", "const float16 t3",
                                                    "out0"]
    allowed = {"const", "float", "double", "float16", "bool", "ember_maximum", "EMBER_INF", "in0", "in1", "out0",
               "t1", "t2", "t3"}
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", k.body))
    assert words <= allowed, words - allowed
    assert '"' not in k.body and "'" not in k.body
    assert k.key == generate(source, ["float32", "bool"]).key != generate(source, ["float64", "bool"]).key


@pytest.mark.parametrize("line", [
    "t1 = exp(__import__)",                       # a name the fuser never makes
    "t1 = exp(in0); import os",                   # two statements
    "t1 = exp(in0.real)",                         # attribute access
    "t1 = cast(in0, dtype='float32; system()')",  # a dtype that is not a dtype name
    "t1 = exp('in0')",                            # a string operand
    "t1 = exp(in0)\nt2 = exp(lambda: 0)",         # code as an operand
])
def test_hostile_source_is_refused(line):
    with pytest.raises(kernel_text.UnsafeKernelValue):
        parse(f"# inputs: in0\n# outputs: t1\n{line}")


def test_unknown_function_is_unsupported_not_run():
    with pytest.raises(UnsupportedKernel):
        generate("# inputs: in0\n# outputs: t1\nt1 = system(in0)", ["float32"])
    with pytest.raises(UnsupportedKernel):
        generate("# inputs: in0\n# outputs: t1\nt1 = sum(in0, axis=None, keepdims=False)", ["float32"])
