"""Every op spec (tests/op_specs.py) run along the axes its record must hold on:

* layout: transposed, strided (every second element, NaN in between) and broadcast (stride-0)
  inputs: values against NumPy, gradients against the contiguous run;
* optional extras: the NumPy-only install (no SciPy special functions, no Numba kernels or fused
  loops) against NumPy and the installed run;
* compile: ``ember.compile(passes=[])`` and ``ember.compile()`` (fusion) against eager, values and
  gradients;
* shape rules: each record's ``shape_rule`` against the shape/dtype its ``impl`` produced, for every
  record call made by the specs (forward and backward);
* ONNX: export and onnxruntime against eager, for specs whose records all have an ONNX mapping;
* PyTorch: values, result dtypes and gradients against torch 2.13 running the spec's own callable
  (``ember`` rebound to ``torch``);
* device: each test is parametrized over ``op_harness.DEVICES``.

The default run takes one typical case per spec (layouts: every case); ``-m slow`` runs every
case and dtype, and the compile axis again without the extras. See docs/testing.md.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

import numpy as np
import pytest

import ember
from ember.dtypes import from_numpy_dtype
from ember.interpreters import TracingError
from ember.ops.registry import OPS, Spec

from op_harness import (DEVICES, EXTRAS, INTEGER_DTYPES, LAYOUTS, as_tuple, assert_matches_reference, cotangents, diff_positions,
                        extras, layout_tensor, layout_values, make_inputs, reference, to_numpy, weighted_loss)
from op_specs import SPECS, OpSpec


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> Iterator[str]:
    """The device axis: "cuda" is the GPU where one is present, else the stand-in device."""
    if request.param == "cuda" and not ember.cuda.is_available():
        with ember.testing.standin_cuda():
            yield "cuda"
    else:
        yield request.param


def typical_case(spec: OpSpec) -> tuple:
    """The first case whose inputs are all non-empty arrays of rank >= 1 (else the first case)."""
    for case in spec.shapes:
        if all(s is None or (len(s) >= 1 and 0 not in s) for s in case):
            return case
    return spec.shapes[0]


def _grad_dtype(spec: OpSpec) -> str | None:
    return "float64" if spec.grad and "float64" in spec.float_dtypes else None


def _wants_grad(spec: OpSpec, dtype: str) -> bool:
    """Gradients are compared in float64, and in complex128 for specs with complex dtypes."""
    return dtype == _grad_dtype(spec) or (spec.grad and dtype == "complex128")


def _tensors(spec: OpSpec, arrays: list, device: str, grad: bool) -> tuple:
    diff = diff_positions(spec, arrays) if grad else ()
    return [ember.tensor(a, requires_grad=i in diff, device=device) for i, a in enumerate(arrays)], diff


def _run(spec: OpSpec, fn: Any, tensors: list, diff: tuple) -> tuple:
    """(outputs as arrays, gradients of the diff inputs as arrays or None) of one call of ``fn``."""
    with np.errstate(all="ignore"):
        outs = as_tuple(fn(*tensors))
        grads: list = []
        if diff:
            loss = weighted_loss(spec, outs, cotangents(outs))
            grads = list(ember.autograd.grad(loss, [tensors[i] for i in diff], allow_unused=True))
    return outs, [None if g is None else to_numpy(g) for g in grads]


def _assert_same(got: Any, want: Any, rtol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    elif "c" in (want.dtype.kind, got.dtype.kind):
        for part in (np.real, np.imag):
            _assert_same(part(got), part(want), rtol, what)
    else:
        scale = max(1.0, float(np.nanmax(np.abs(want), initial=0, where=np.isfinite(want)))) if want.size else 1.0
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol * scale,
                                   equal_nan=True, err_msg=what)


def _assert_grads(spec: OpSpec, got: list, want: list, shapes: list, rtol: float, where: str) -> None:
    for k, (g, w, shape) in enumerate(zip(got, want, shapes)):
        g = np.zeros(shape) if g is None else g
        w = np.zeros(shape) if w is None else w
        _assert_same(g, w, rtol, f"{spec.name}{where}: gradient of differentiable input {k}")


def _case_dtypes(spec: OpSpec, slow: bool) -> list:
    """The dtypes an axis runs: every one in the slow set; float64 (or the first) and complex128 by default."""
    if slow:
        return list(spec.float_dtypes) + list(spec.int_dtypes) + list(spec.complex_dtypes)
    first = (["float64"] if "float64" in spec.float_dtypes else list(spec.float_dtypes[:1])) or list(spec.int_dtypes[:1])
    return first + (["complex128"] if "complex128" in spec.complex_dtypes else list(spec.complex_dtypes[:1]))


# ---- layout: transposed, strided, broadcast --------------------------------------------------------
def _broadcast_ok(spec: OpSpec) -> bool:
    """Broadcast inputs repeat a row: ties. Specs drawn from 'distinct' values (max, sort ...) need none."""
    domains = spec.domain if isinstance(spec.domain, tuple) else (spec.domain,)
    return "distinct" not in domains


# Layouts torch refuses for an op (the op must raise, naming the fix): view_as_complex needs a last
# dimension of stride 1 (a transposed, strided or expanded view may have another).
REFUSED_LAYOUTS: dict[str, tuple[set[str], str]] = {
    "view_as_complex": ({"transposed", "strided", "broadcast"}, "last dimension with stride 1"),
}


def check_layouts(spec: OpSpec, device: str, slow: bool) -> int:
    checked = 0
    refused, message = REFUSED_LAYOUTS.get(spec.name, (set(), ""))
    for case in spec.shapes:
        for dtype in _case_dtypes(spec, slow):
            for layout in LAYOUTS:
                if layout == "broadcast" and not _broadcast_ok(spec):
                    continue
                arrays = make_inputs(spec, case, dtype)
                values = [None if i in spec.fixed else layout_values(a, layout) for i, a in enumerate(arrays)]
                if all(v is None for v in values):
                    continue
                arrays = [a if v is None else v for a, v in zip(arrays, values)]
                grad = _wants_grad(spec, dtype)
                plain, diff = _tensors(spec, arrays, device, grad)
                want_outs, want_grads = _run(spec, spec.fn, plain, diff)
                viewed = [plain[i].detach().requires_grad_(i in diff) if v is None else
                          layout_tensor(v, layout, device, requires_grad=i in diff) for i, v in enumerate(values)]
                where = f" [{layout} {dtype} {case}]"
                if layout in refused and any(v is not None and t.stride()[-1] != 1 for t, v in zip(viewed, values)):
                    with pytest.raises(RuntimeError, match=message):
                        spec.fn(*viewed)
                    checked += 1
                    continue
                outs, grads = _run(spec, spec.fn, viewed, diff)
                assert_matches_reference(spec, outs, reference(spec, arrays, dtype), dtype, where)
                for i, (t, v) in enumerate(zip(viewed, values)):  # the op left its (viewed) input alone
                    if v is not None and v.dtype.kind == "f":
                        np.testing.assert_array_equal(to_numpy(t), v, err_msg=f"{spec.name}{where} wrote input {i}")
                if grad:
                    _assert_grads(spec, grads, want_grads, [arrays[i].shape for i in diff], 1e-9, where)
                checked += 1
    return checked


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_layouts(spec: OpSpec, device: str) -> None:
    check_layouts(spec, device, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_layouts_every_dtype(spec: OpSpec, device: str) -> None:
    check_layouts(spec, device, slow=True)


# ---- optional extras: the NumPy-only install ------------------------------------------------------
def check_numpy_only(spec: OpSpec, device: str, slow: bool) -> None:
    """Without SciPy and Numba: values against NumPy, gradients equal to the installed run's."""
    for case in spec.shapes if slow else [typical_case(spec)]:
        for dtype in _case_dtypes(spec, slow) + ([] if slow or "float32" not in spec.float_dtypes else ["float32"]):
            arrays = make_inputs(spec, case, dtype)
            grad = _wants_grad(spec, dtype)
            results = {}
            for mode in EXTRAS:
                with extras(mode):
                    tensors, diff = _tensors(spec, arrays, device, grad)
                    results[mode] = _run(spec, spec.fn, tensors, diff)
            where = f" [numpy_only {dtype} {case}]"
            assert_matches_reference(spec, results["numpy_only"][0], reference(spec, arrays, dtype), dtype, where)
            if grad:
                _assert_grads(spec, results["numpy_only"][1], results["installed"][1],
                              [arrays[i].shape for i in diff], 1e-9, where)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_numpy_only_install(spec: OpSpec, device: str) -> None:
    check_numpy_only(spec, device, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_numpy_only_install_every_case(spec: OpSpec, device: str) -> None:
    check_numpy_only(spec, device, slow=True)


# ---- compile: passes=[] and the full pipeline (fusion) against eager --------------------------------
# Specs a graph cannot hold: compiling them must raise TracingError (ember.compile's default
# fallback then runs them eagerly); the reason is what the error says.
NOT_COMPILABLE: dict[str, str] = {
    "getitem_bool": "boolean mask .* depends on its values",
    "getitem_bool_cmp": "boolean mask .* depends on its values",
    "masked_select": "boolean mask .* depends on its values",
    "masked_select_broadcast": "boolean mask .* depends on its values",
    "unique": "number of unique values .* depends on its data",
    "unique_dim": "number of unique values .* depends on its data",
}
# Specs a graph holds without autograd only: in-place writes into a view of a tensor that requires grad.
NOT_COMPILABLE_WITH_GRAD: dict[str, str] = {
    "inplace_on_views": "in-place changes of a view of a tensor that requires grad",
    "setitem_views": "in-place changes of a view of a tensor that requires grad",
}
COMPILE_MODES = {"no_passes": [], "fused": None}


def check_compiled(spec: OpSpec, device: str, slow: bool, extras_mode: str = "installed") -> None:
    for case in spec.shapes if slow else [typical_case(spec)]:
        for dtype in _case_dtypes(spec, slow):
            arrays = make_inputs(spec, case, dtype)
            grad = _wants_grad(spec, dtype)
            with extras(extras_mode):
                if grad and spec.name in NOT_COMPILABLE_WITH_GRAD:
                    tensors, diff = _tensors(spec, arrays, device, True)
                    compiled = ember.compile(spec.fn, fallback="raise", measure=False)
                    with pytest.raises(TracingError, match=NOT_COMPILABLE_WITH_GRAD[spec.name]):
                        for _ in range(3):
                            compiled(*tensors)
                    grad = False  # and without autograd it compiles: checked below
                tensors, diff = _tensors(spec, arrays, device, grad)
                want_outs, want_grads = _run(spec, spec.fn, tensors, diff)
                for mode, passes in COMPILE_MODES.items():
                    compiled = ember.compile(spec.fn, passes=passes, fallback="raise", measure=False)
                    if spec.name in NOT_COMPILABLE:
                        with pytest.raises(TracingError, match=NOT_COMPILABLE[spec.name]):
                            for _ in range(3):
                                compiled(*tensors)
                        continue
                    for _ in range(3):  # the first call runs eagerly, the second traces, the third replays
                        outs, grads = _run(spec, compiled, tensors, diff)
                    assert compiled.last is not None, f"{spec.name}: compile({mode}) did not run a graph"
                    where = f" [compile {mode} {extras_mode} {dtype} {case}]"
                    assert len(outs) == len(want_outs), f"{spec.name}{where}: {len(outs)} outputs"
                    for k, (o, w) in enumerate(zip(outs, want_outs)):
                        assert o.dtype is w.dtype, f"{spec.name}{where}: output {k} dtype {o.dtype} != {w.dtype}"
                        _assert_same(to_numpy(o), to_numpy(w), 1e-12 if dtype == "float64" else 1e-5,
                                     f"{spec.name}{where}: output {k}")
                    if grad:
                        _assert_grads(spec, grads, want_grads, [arrays[i].shape for i in diff], 1e-10, where)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_compiled_equals_eager(spec: OpSpec, device: str) -> None:
    check_compiled(spec, device, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("extras_mode", EXTRAS)
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_compiled_equals_eager_every_case(spec: OpSpec, device: str, extras_mode: str) -> None:
    check_compiled(spec, device, slow=True, extras_mode=extras_mode)


# ---- shape rules against impl ------------------------------------------------------------------------
@contextlib.contextmanager
def recorded_calls() -> Iterator[list]:
    """Every record's impl wrapped: yields the list of (op, impl args, attrs, output) calls made."""
    calls: list = []
    originals = {name: op.impl for name, op in OPS.items()}

    def wrapped(op: Any, impl: Any) -> Any:
        def run(xp: Any, *args: Any, **attrs: Any) -> Any:
            out = impl(xp, *args, **attrs)
            calls.append((op, args, attrs, out))
            return out
        return run

    try:
        for name, op in OPS.items():
            op.impl = wrapped(op, originals[name])
        yield calls
    finally:
        for name, op in OPS.items():
            op.impl = originals[name]


def _spec_of(value: Any) -> Any:
    """An impl's array argument or result (NumPy's, or a device's) as a Spec; other values as they are."""
    if not isinstance(value, Spec) and hasattr(value, "shape") and hasattr(value, "dtype"):
        return Spec(tuple(value.shape), from_numpy_dtype(value.dtype))
    return value


def shape_rule_mismatches(calls: list) -> tuple:
    """(names of records checked, mismatch messages) for recorded calls of records with a shape rule."""
    checked, bad = set(), []
    for op, args, attrs, out in calls:
        if op.shape_rule is None:
            continue
        checked.add(op.name)
        try:
            rule = op.shape_rule(*[_spec_of(a) for a in args], **attrs)
        except TracingError:  # a data-dependent shape (unique, boolean masks): refusing is the rule's answer
            continue
        except Exception as error:  # noqa: BLE001 - a rule that cannot answer is itself the finding
            bad.append(f"{op.name}{[_spec_of(a) for a in args]} {attrs}: shape_rule raised {error!r}")
            continue
        rule = [rule] if isinstance(rule, Spec) else list(rule)  # one Spec, or one per output
        got = [_spec_of(o if hasattr(o, "shape") else np.asarray(o))
               for o in (out if isinstance(out, (tuple, list)) else (out,))]
        want = [(tuple(s.shape), s.dtype.name) for s in rule]
        have = [(tuple(s.shape), s.dtype.name) for s in got]
        if want != have:
            bad.append(f"{op.name}{[_spec_of(a) for a in args]} {attrs}: shape_rule says {want}, impl gave {have}")
    return checked, bad


def _shape_rule_run(spec: OpSpec, cases: list, device: str) -> list:
    calls_all: list = []
    for case in cases:
        for dtype in list(spec.float_dtypes) + list(spec.int_dtypes) + list(spec.complex_dtypes):
            arrays = make_inputs(spec, case, dtype)
            with recorded_calls() as calls:
                tensors, diff = _tensors(spec, arrays, device, _wants_grad(spec, dtype))
                _run(spec, spec.fn, tensors, diff)
            calls_all += calls
    return calls_all


def test_shape_rules_agree_with_impl(device: str) -> None:
    """One typical case per spec, every dtype, forward and backward: each record call's shape rule
    must give the shape and dtype its impl produced. Also: every record with a rule that a spec
    reaches is checked (a count floor keeps the axis from going quiet)."""
    checked, bad = set(), []
    for spec in SPECS:
        c, b = shape_rule_mismatches(_shape_rule_run(spec, [typical_case(spec)], device))
        checked |= c
        bad += [f"{spec.name}: {m}" for m in b]
    assert not bad, "\n".join(sorted(set(bad)))
    assert len(checked) >= 90, f"only {len(checked)} records reached: {sorted(checked)}"


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_shape_rules_agree_with_impl_every_case(spec: OpSpec, device: str) -> None:
    _, bad = shape_rule_mismatches(_shape_rule_run(spec, list(spec.shapes), device))
    assert not bad, "\n".join(sorted(set(bad)))


# ---- ONNX: export and onnxruntime against eager -----------------------------------------------------
# Specs whose records all map to ONNX but whose call cannot be exported, with the reason.
_MASK = "a boolean mask selects a data-dependent number of elements (ONNX export traces a static graph)"
NOT_EXPORTABLE: dict[str, str] = {
    **{name: _MASK for name in ("getitem_bool", "getitem_bool_cmp", "masked_select", "masked_select_broadcast")},
    # complex values travel as (..., 2) real pairs; these ops have no pair translation yet (docs/complex-fft.md)
    **{f"{name}_complex": "no (..., 2)-pair translation of this op on complex values: the export refuses it"
       for name in ("asin", "atan", "linalg_det")},
}


def _onnx_dtype(spec: OpSpec) -> str | None:
    if not spec.float_dtypes and not spec.int_dtypes:  # complex-only specs: (..., 2) real pairs in the graph
        return spec.complex_dtypes[0] if spec.complex_dtypes else None
    return "float32" if "float32" in spec.float_dtypes else (spec.float_dtypes + tuple(spec.int_dtypes))[0]


def _exportable(spec: OpSpec) -> bool:
    return _onnx_dtype(spec) is not None and bool(spec.ops) and all(OPS[name].onnx is not None for name in spec.ops if name in OPS)


def check_onnx(spec: OpSpec, device: str, slow: bool) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import ember.onnx as eonnx

    cases = [c for c in spec.shapes if all(s is None or 0 not in s for s in c)] if slow else [typical_case(spec)]
    for case in cases:
        dtype = _onnx_dtype(spec)
        arrays = make_inputs(spec, case, dtype)
        tensors = [ember.tensor(a, device=device) for a in arrays]
        if spec.name in NOT_EXPORTABLE:
            with pytest.raises((NotImplementedError, TracingError)):
                eonnx.export(spec.fn, tuple(tensors))
            continue
        with np.errstate(all="ignore"):
            want = as_tuple(spec.fn(*tensors))
            got = eonnx.run(eonnx.export(spec.fn, tuple(tensors)), [to_numpy(t) for t in tensors])
        where = f"{spec.name} [onnx {dtype} {case}]"
        assert len(got) == len(want), f"{where}: {len(got)} outputs, eager has {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            w = to_numpy(w)
            assert np.asarray(g).dtype == w.dtype, f"{where}: output {k} dtype {np.asarray(g).dtype} != {w.dtype}"
            _assert_same(g, w, 1e-5, f"{where}: output {k}")


@pytest.mark.parametrize("spec", [s for s in SPECS if _exportable(s)], ids=lambda s: s.name)
def test_onnx_export_matches_eager(spec: OpSpec, device: str) -> None:
    check_onnx(spec, device, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [s for s in SPECS if _exportable(s)], ids=lambda s: s.name)
def test_onnx_export_matches_eager_every_case(spec: OpSpec, device: str) -> None:
    check_onnx(spec, device, slow=True)


# ---- PyTorch: the spec's own callable with ``ember`` rebound to ``torch`` ----------------------------
# Specs whose callable reaches ember internals (records without a public name) have no torch form.
_INTERNAL_NAMES = {"dispatch", "OPS", "ops"}
# Specs with a torch form where torch differs on purpose or does not run the same call, with the reason.
TORCH_DIFFERS: dict[str, str] = {
    "sort_stable_ties_descending": "torch.sort takes dim/descending by keyword once stable= is given; ember also "
                                  "accepts them by position (the call is checked against NumPy in test_ops_generated)",
}


def _torch_value(value: Any, torch: Any) -> Any:
    if isinstance(value, ember.dtype):
        return getattr(torch, value.name)
    if isinstance(value, types.FunctionType):
        return torch_form(value, torch)
    return value


def torch_form(fn: Any, torch: Any) -> Any:
    """``fn`` with the global ``ember`` bound to ``torch`` (closures converted), or None when ``fn`` reaches
    ember's internals. Public ember functions map to torch's function of the same name."""
    if not isinstance(fn, types.FunctionType):
        return None
    if fn.__module__ != "op_specs":
        return getattr(torch, fn.__name__, None) if fn.__module__.startswith("ember") else None
    if _INTERNAL_NAMES & set(fn.__code__.co_names):
        return None
    cells = None
    if fn.__closure__:
        values = [_torch_value(c.cell_contents, torch) for c in fn.__closure__]
        if any(v is None for v in values):
            return None
        cells = tuple(types.CellType(v) for v in values)
    return types.FunctionType(fn.__code__, {**fn.__globals__, "ember": torch}, fn.__name__, fn.__defaults__, cells)


def check_torch(spec: OpSpec, device: str, slow: bool) -> bool:
    """Values, result dtypes and gradients against torch; False when the spec has no torch form."""
    torch = pytest.importorskip("torch")
    tfn = torch_form(spec.fn, torch)
    if tfn is None:
        return False
    for case in spec.shapes if slow else [typical_case(spec)]:
        for dtype in list(spec.float_dtypes) + list(spec.int_dtypes) + list(spec.complex_dtypes):
            arrays = make_inputs(spec, case, dtype)
            grad = _wants_grad(spec, dtype)
            tensors, diff = _tensors(spec, arrays, device, grad)
            outs, grads = _run(spec, spec.fn, tensors, diff)
            t_in = [torch.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
            with np.errstate(all="ignore"):
                t_outs = as_tuple(tfn(*t_in))
            where = f"{spec.name} [torch {dtype} {case}]"
            assert len(t_outs) == len(outs), f"{where}: {len(outs)} outputs, torch has {len(t_outs)}"
            ties = dtype in INTEGER_DTYPES and not _broadcast_ok(spec)  # 'distinct' values drawn as ints tie
            for k, (o, t) in enumerate(zip(outs, t_outs)):
                if ties and k > 0:  # which of equal elements an index points to is unspecified in torch
                    continue
                assert o.dtype.name == str(t.dtype).replace("torch.", ""), \
                    f"{where}: output {k} dtype {o.dtype}, torch gives {t.dtype}"
                _assert_same(to_numpy(o), t.detach().resolve_conj().numpy(), 1e-10 if dtype in ("float64", "complex128") else 1e-5,
                             f"{where}: output {k}")
            if grad:
                vs = cotangents(outs)
                loss = sum((t * torch.tensor(v)).real.sum() if t.is_complex() else (t * torch.tensor(v)).sum()
                           for t, v in zip(t_outs, vs) if v is not None)
                t_grads = torch.autograd.grad(loss, [t_in[i] for i in diff], allow_unused=True)
                _assert_grads(spec, grads, [None if g is None else g.resolve_conj().numpy() for g in t_grads],
                              [arrays[i].shape for i in diff], 1e-9, f" [torch {dtype} {case}]")
    return True


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_matches_torch(spec: OpSpec, device: str) -> None:
    if spec.name in TORCH_DIFFERS:
        pytest.skip(TORCH_DIFFERS[spec.name])
    if not check_torch(spec, device, slow=False):
        pytest.skip("no torch form: the spec calls ember internals")


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_matches_torch_every_case(spec: OpSpec, device: str) -> None:
    if spec.name in TORCH_DIFFERS:
        pytest.skip(TORCH_DIFFERS[spec.name])
    if not check_torch(spec, device, slow=True):
        pytest.skip("no torch form: the spec calls ember internals")
