"""Tests generated from the op-spec table (tests/op_specs.py), one family per op record.

For every spec and input-shape case the harness checks:
* forward against the NumPy reference, in float32/float64, the spec's integer/bool dtypes and
  (loosely) float16/bfloat16, including the result dtype PyTorch would give;
* gradients against central finite differences of the *NumPy reference* in float64 (so no ember
  code sits on the reference side), and that float32 inputs get float32 gradients;
* second order: the Hessian-vector product through ``create_graph=True`` against finite
  differences of first-order gradients;
* that every op in ``ember.ops.registry.OPS`` is covered by some spec.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember
from ember.autograd import engine
from ember.ops.registry import OPS

from op_harness import LOW_PRECISION, assert_matches_reference, make_inputs, reference
from op_harness import as_tuple as _as_tuple
from op_harness import cotangents as _cotangents
from op_harness import diff_positions as _diff_positions
from op_harness import ember_loss as _ember_loss
from op_harness import to_numpy as _to_numpy
from op_specs import COVERED_BY_BACKWARD, FUNCTIONAL_TESTS, GRAPH_ONLY_OPS, SPECS, OpSpec, functional_name


# ---- forward ---------------------------------------------------------------------------------------
def _forward_cases() -> list:
    cases = []
    for spec in SPECS:
        dtypes = list(spec.float_dtypes) + list(spec.int_dtypes) + list(spec.complex_dtypes)
        if spec.low_precision and "float32" in spec.float_dtypes:
            dtypes += list(LOW_PRECISION)
        for dtype in dtypes:
            for k, case in enumerate(spec.shapes):
                cases.append(pytest.param(spec, case, dtype, id=f"{spec.name}-{dtype}-{k}"))
    return cases


@pytest.mark.parametrize("spec,case,dtype", _forward_cases())
def test_forward(spec: OpSpec, case: tuple, dtype: str) -> None:
    arrays = make_inputs(spec, case, dtype)
    tensors = [ember.tensor(a) for a in arrays]
    outs = _as_tuple(spec.fn(*tensors))
    assert_matches_reference(spec, outs, reference(spec, arrays, dtype), dtype)
    for t, a in zip(tensors, arrays):  # ops never write into their inputs
        got, want = _to_numpy(t), a
        if dtype == "bfloat16" and a.dtype.kind not in "biu":
            got, want = got.astype(np.float64), a.astype(np.float64)
        np.testing.assert_array_equal(got, want, err_msg=f"{spec.name} modified an input")


# ---- first order -----------------------------------------------------------------------------------
def _numeric_grad(fn: Any, arrays: list, position: int, eps: float) -> np.ndarray:
    """Central differences of the scalar ``fn(arrays)`` with respect to ``arrays[position]``."""
    base = arrays[position]
    grad = np.zeros(base.shape)
    flat = grad.reshape(-1)
    for k in range(base.size):
        plus, minus = base.copy(), base.copy()
        plus.reshape(-1)[k] += eps
        minus.reshape(-1)[k] -= eps
        args_p = list(arrays)
        args_p[position] = plus
        args_m = list(arrays)
        args_m[position] = minus
        flat[k] = (fn(args_p) - fn(args_m)) / (2 * eps)
    return grad


def _numeric_grad_any(fn: Any, arrays: list, position: int, eps: float) -> np.ndarray:
    """:func:`_numeric_grad`, and for a complex argument d/dRe + i d/dIm (PyTorch's convention)."""
    base = arrays[position]
    if base.dtype.kind != "c":
        return _numeric_grad(fn, arrays, position, eps)
    total = np.zeros(base.shape, dtype=np.complex128)
    for direction in (1.0, 1j):
        def along(args: list, direction: complex = direction) -> float:
            moved = list(args)
            moved[position] = base + args[position] * direction
            return fn(moved)

        offsets = list(arrays)
        offsets[position] = np.zeros(base.shape)
        total = total + _numeric_grad(along, offsets, position, eps) * direction
    return total


def _grad_cases() -> list:
    return [pytest.param(spec, case, id=f"{spec.name}-{k}") for spec in SPECS if spec.grad
            and "float64" in spec.float_dtypes for k, case in enumerate(spec.shapes)]


@pytest.mark.parametrize("spec,case", _grad_cases())
def test_grad(spec: OpSpec, case: tuple) -> None:
    arrays = make_inputs(spec, case, "float64")
    diff = _diff_positions(spec, arrays)
    tensors = [ember.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    with np.errstate(all="ignore"):
        outs = _as_tuple(spec.fn(*ember_detached(tensors)))
    vs = _cotangents(outs)
    _, loss = _ember_loss(spec, tensors, vs)
    grads = ember.autograd.grad(loss, [tensors[i] for i in diff], allow_unused=True)

    def ref_loss(args: list) -> float:
        refs = _as_tuple(spec.ref(*args))
        return float(sum(np.real(np.asarray(r) * v).sum() for r, v in zip(refs, vs) if v is not None))

    for i, g in zip(diff, grads):
        numeric = _numeric_grad(ref_loss, arrays, i, spec.eps)
        if g is None:
            g_np = np.zeros(arrays[i].shape)
        else:
            assert tuple(g.shape) == arrays[i].shape, f"{spec.name}: grad shape {tuple(g.shape)} vs {arrays[i].shape}"
            assert g.dtype is ember.float64, f"{spec.name}: grad dtype {g.dtype}"
            g_np = _to_numpy(g)
        np.testing.assert_allclose(g_np, numeric, rtol=spec.rtol, atol=spec.atol,
                                   err_msg=f"{spec.name}: gradient of input {i}")


def _complex_grad_cases() -> list:
    return [pytest.param(spec, case, id=f"{spec.name}-{k}") for spec in SPECS if spec.grad
            and "complex128" in spec.complex_dtypes for k, case in enumerate(spec.shapes)]


@pytest.mark.parametrize("spec,case", _complex_grad_cases())
def test_grad_complex(spec: OpSpec, case: tuple) -> None:
    """Complex inputs: the gradient of the real loss L = Re(sum <out, v>) is PyTorch's dL/dRe(z) + i dL/dIm(z)
    (twice the conjugate Wirtinger derivative), checked against central differences of the NumPy reference
    in the real and the imaginary direction of each element."""
    arrays = make_inputs(spec, case, "complex128")
    diff = _diff_positions(spec, arrays)
    tensors = [ember.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    with np.errstate(all="ignore"):
        outs = _as_tuple(spec.fn(*ember_detached(tensors)))
    vs = _cotangents(outs)
    _, loss = _ember_loss(spec, tensors, vs)
    grads = ember.autograd.grad(loss, [tensors[i] for i in diff], allow_unused=True)

    def ref_loss(args: list) -> float:
        refs = _as_tuple(spec.ref(*args))
        return float(sum(np.real(np.asarray(r) * v).sum() for r, v in zip(refs, vs) if v is not None))

    for i, g in zip(diff, grads):
        is_complex = arrays[i].dtype.kind == "c"
        numeric = np.zeros(arrays[i].shape, dtype=np.complex128 if is_complex else np.float64)
        for direction in ((1.0, 1j) if is_complex else (1.0,)):
            def along(args: list, direction: complex = direction, i: int = i) -> float:
                moved = list(args)
                moved[i] = arrays[i] + args[i] * direction  # args[i]: real offsets in this direction
                return ref_loss(moved)

            offsets = list(arrays)
            offsets[i] = np.zeros(arrays[i].shape)
            numeric = numeric + _numeric_grad(along, offsets, i, spec.eps) * direction
        want = "complex128" if is_complex else "float64"
        assert g is None or g.dtype.name == want, f"{spec.name}: gradient dtype {g.dtype} for a {want} input"
        g_np = np.zeros(arrays[i].shape) if g is None else _to_numpy(g)
        np.testing.assert_allclose(g_np, numeric, rtol=spec.rtol, atol=spec.atol,
                                   err_msg=f"{spec.name}: complex gradient of input {i}")


def ember_detached(tensors: list) -> list:
    return [t.detach() for t in tensors]


@pytest.mark.parametrize("spec", [s for s in SPECS if s.grad and "float32" in s.float_dtypes], ids=lambda s: s.name)
def test_grad_float32(spec: OpSpec) -> None:
    """float32 inputs get float32 gradients of the inputs' shapes, close to the float64 ones."""
    case = spec.shapes[0]
    arrays64 = make_inputs(spec, case, "float64")
    diff = _diff_positions(spec, arrays64)
    results = {}
    for dtype in ("float32", "float64"):
        tensors = [ember.tensor(a, dtype=dtype if i in diff else None, requires_grad=i in diff)
                   for i, a in enumerate(arrays64)]
        vs = _cotangents(_as_tuple(spec.fn(*ember_detached(tensors))))
        _, loss = _ember_loss(spec, tensors, vs)
        grads = ember.autograd.grad(loss, [tensors[i] for i in diff], allow_unused=True)
        for g, i in zip(grads, diff):
            if g is not None:
                assert g.dtype.name == dtype, f"{spec.name}: {dtype} input got a {g.dtype} gradient"
                assert tuple(g.shape) == arrays64[i].shape
        results[dtype] = [_to_numpy(g) if g is not None else None for g in grads]
    for g32, g64 in zip(results["float32"], results["float64"]):
        if g64 is not None and g32 is not None:
            np.testing.assert_allclose(g32, g64, rtol=1e-3, atol=1e-4 * max(1.0, np.abs(g64).max(initial=0)))


# ---- second order ----------------------------------------------------------------------------------
def _gradgrad_case(spec: OpSpec) -> tuple | None:
    for case in spec.shapes:
        sizes = [int(np.prod(s)) for s in case if s is not None]
        if all(n > 0 for n in sizes) and sum(sizes) <= 24:
            return case
    return None


def _first_grads(spec: OpSpec, arrays: list, diff: tuple, vs: list, create_graph: bool) -> tuple:
    tensors = [ember.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    v_tensors = [ember.tensor(v, requires_grad=create_graph) if v is not None else None for v in vs]
    _, loss = _ember_loss(spec, tensors, v_tensors)
    grads = ember.autograd.grad(loss, [tensors[i] for i in diff], create_graph=create_graph, allow_unused=True)
    return tensors, v_tensors, grads


@pytest.mark.parametrize("spec", [s for s in SPECS if s.grad and s.gradgrad and _gradgrad_case(s) is not None
                                  and ("float64" in s.float_dtypes or "complex128" in s.complex_dtypes)],
                         ids=lambda s: s.name)
def test_gradgrad(spec: OpSpec) -> None:
    """d/d(x, v) of <grad_x <f(x), v>, u> against finite differences of first-order gradients (complex-only specs
    in complex128, differences in the real and imaginary directions)."""
    dtype = "float64" if "float64" in spec.float_dtypes else "complex128"
    arrays = make_inputs(spec, _gradgrad_case(spec), dtype)
    diff = _diff_positions(spec, arrays)
    with np.errstate(all="ignore"):
        vs = _cotangents(_as_tuple(spec.fn(*[ember.tensor(a) for a in arrays])))
    rng = np.random.default_rng(2)
    us = [rng.standard_normal(arrays[i].shape) + (1j * rng.standard_normal(arrays[i].shape)
                                                  if arrays[i].dtype.kind == "c" else 0) for i in diff]

    tensors, v_tensors, grads = _first_grads(spec, arrays, diff, vs, create_graph=True)
    terms = [(g * ember.tensor(u)).sum() for g, u in zip(grads, us) if g is not None and g.requires_grad]
    terms = [t.real if t.dtype.is_complex else t for t in terms]
    sources = [tensors[i] for i in diff] + [v for v in v_tensors if v is not None]
    if terms:
        h = terms[0]
        for term in terms[1:]:
            h = h + term
        analytic = ember.autograd.grad(h, sources, allow_unused=True)
    else:  # every first-order gradient is constant: all second derivatives are zero
        analytic = [None] * len(sources)

    v_positions = [j for j, v in enumerate(vs) if v is not None]

    def h_value(flat_args: list) -> float:
        xs, v_list = flat_args[:len(arrays)], list(vs)
        for k, j in enumerate(v_positions):
            v_list[j] = flat_args[len(arrays) + k]
        _, _, gs = _first_grads(spec, xs, diff, v_list, create_graph=False)
        return float(sum(np.real(_to_numpy(g) * u).sum() for g, u in zip(gs, us) if g is not None))

    flat = list(arrays) + [vs[j] for j in v_positions]
    positions = list(diff) + [len(arrays) + k for k in range(len(v_positions))]
    for pos, a in zip(positions, analytic):
        numeric = _numeric_grad_any(h_value, flat, pos, 1e-5)
        got = np.zeros(flat[pos].shape) if a is None else _to_numpy(a)
        np.testing.assert_allclose(got, numeric, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{spec.name}: second derivative w.r.t. argument {pos}")


# ---- coverage ----------------------------------------------------------------------------------------
def test_every_op_has_a_spec() -> None:
    try:  # register the ops behind ember.nn too, whichever test files happen to be collected
        import ember.nn.functional  # noqa: F401
    except ImportError:
        pass
    covered = {name for spec in SPECS for name in spec.ops} | set(COVERED_BY_BACKWARD) | set(GRAPH_ONLY_OPS)
    functional = {name: public for name, op in OPS.items()
                  if (public := functional_name(name, getattr(op.impl, "__module__", "") or "")) is not None}
    if functional:
        path = Path(__file__).parents[2] / FUNCTIONAL_TESTS
        assert path.exists(), f"ops {sorted(functional)} are allowlisted for {FUNCTIONAL_TESTS}, which is missing"
        text = path.read_text()
        untested = sorted(op for op, public in functional.items() if public not in text)
        assert not untested, f"{FUNCTIONAL_TESTS} never mentions {untested}"
    missing = sorted(set(OPS) - covered - set(functional))
    assert not missing, (f"ops without a spec in tests/op_specs.py: {missing}. Add an OpSpec (inputs, NumPy "
                         f"reference) for each new op record, or, for an nn op, an entry in FUNCTIONAL_OPS "
                         f"with its test in {FUNCTIONAL_TESTS}.")


def test_specs_exercise_the_ops_they_claim() -> None:
    """Run each spec once with every op's impl wrapped, and check its declared ops really ran."""
    hits: set = set()
    originals = {name: op.impl for name, op in list(OPS.items())}

    def wrapped(name: str, impl: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            hits.add(name)
            return impl(*args, **kwargs)
        return run

    failures = []
    try:
        for name, op in OPS.items():
            op.impl = wrapped(name, originals[name])
        for spec in SPECS:
            hits.clear()
            for dtype in spec.float_dtypes or spec.int_dtypes[-1:] or spec.complex_dtypes[-1:]:
                arrays = make_inputs(spec, spec.shapes[0], dtype)
                diff = _diff_positions(spec, arrays) if spec.grad else ()
                tensors = [ember.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
                outs = _as_tuple(spec.fn(*tensors))
                if spec.grad:
                    _, loss = _ember_loss(spec, tensors, _cotangents(outs))
                    engine.ARRAY_RULES = False  # the ember-op rules, whose ops this counts (array rules call no impl)
                    try:
                        loss.backward()
                    finally:
                        engine.ARRAY_RULES = True
            if not set(spec.ops) <= hits:
                failures.append(f"{spec.name}: claims {sorted(spec.ops)}, ran {sorted(hits)}")
    finally:
        for name, op in OPS.items():
            op.impl = originals[name]
    assert not failures, "\n".join(failures)


def test_backward_only_ops_are_covered() -> None:
    names = {s.name for s in SPECS}
    for op, specs in COVERED_BY_BACKWARD.items():
        assert op in OPS
        assert set(specs) <= names
