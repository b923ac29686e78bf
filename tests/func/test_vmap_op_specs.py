"""Every op spec (tests/op_specs.py) under vmap: batched results equal a Python loop over the samples.

For each spec: (1) forward with every input batched at dim 0; (2) forward with the first input batched at
dim -1 and the others shared (in_dims None); (3) per-sample gradients, ``vmap(grad(loss))``, against
``grad(loss)`` sample by sample. The reference is ember's own single-sample result, which the generated
op tests check against NumPy and finite differences; this file checks the batching rules.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.func import grad, vmap

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from op_harness import as_tuple, cotangents, diff_positions, make_inputs, weighted_loss  # noqa: E402
from op_specs import SPECS  # noqa: E402

# Specs that cannot be batched, with the reason; PyTorch's vmap refuses the same things.
UNBATCHABLE = {
    "getitem_bool_cmp": "a boolean-mask index: the output size depends on each sample's values",
    "unique": "the output size depends on each sample's values (random samples have different counts; equal counts batch)",
    "setitem_views": "writes batched values into a tensor made inside the function with ember.zeros (unbatched)",
}
SAMPLES = 3


def _dtype(spec):
    for wide in ("float64", "complex128"):
        if wide in spec.float_dtypes + spec.complex_dtypes:
            return wide
    return (spec.float_dtypes or spec.complex_dtypes or spec.int_dtypes)[0]


def _grad_dtype(spec):
    return next((d for d in ("float64", "complex128") if d in spec.float_dtypes + spec.complex_dtypes), None)


def _compare(batched, per_sample, out_dim=0):
    for k, out in enumerate(batched):
        ref = np.stack([p[k].detach().numpy() for p in per_sample], axis=out_dim)
        got = out.detach().numpy()
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-10, equal_nan=True)


def _run_quietly(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # loop fallbacks warn; test_batching_rules_cover_ops checks which
        return fn()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_vmap_forward_matches_per_sample(spec):
    case, dtype = spec.shapes[0], _dtype(spec)
    samples = [make_inputs(spec, case, dtype, seed=s) for s in range(SAMPLES)]
    per_sample = [as_tuple(spec.fn(*[ember.tensor(a) for a in arrays])) for arrays in samples]
    stacked = [ember.tensor(np.stack([arrays[i] for arrays in samples])) for i in range(len(case))]
    if spec.name in UNBATCHABLE:
        with pytest.raises(RuntimeError, match="vmap"):
            _run_quietly(lambda: vmap(spec.fn)(*stacked))
        return
    _compare(as_tuple(_run_quietly(lambda: vmap(spec.fn)(*stacked))), per_sample)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_vmap_first_input_at_last_dim_others_shared(spec):
    case, dtype = spec.shapes[0], _dtype(spec)
    if spec.name in UNBATCHABLE or not case:
        pytest.skip("unbatchable, or no tensor input to batch")
    samples = [make_inputs(spec, case, dtype, seed=s) for s in range(SAMPLES)]
    shared = [ember.tensor(a) for a in samples[0][1:]]
    per_sample = [as_tuple(spec.fn(ember.tensor(arrays[0]), *shared)) for arrays in samples]
    first = ember.tensor(np.stack([arrays[0] for arrays in samples], axis=-1))
    in_dims = (-1,) + (None,) * (len(case) - 1)
    out = _run_quietly(lambda: vmap(spec.fn, in_dims=in_dims, out_dims=-1)(first, *shared))
    for k, o in enumerate(as_tuple(out)):
        ref = np.stack([p[k].detach().numpy() for p in per_sample], axis=-1)
        np.testing.assert_allclose(o.detach().numpy(), ref, rtol=1e-7, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.grad and _grad_dtype(s)], ids=lambda s: s.name)
def test_per_sample_gradients_match_per_sample_backward(spec):
    case = spec.shapes[0]
    samples = [make_inputs(spec, case, _grad_dtype(spec), seed=s) for s in range(SAMPLES)]
    diff = diff_positions(spec, samples[0])
    if not diff:
        pytest.skip("no differentiable input")
    vs = cotangents(as_tuple(spec.fn(*[ember.tensor(a) for a in samples[0]])))

    def loss(*xs):
        return weighted_loss(spec, as_tuple(spec.fn(*xs)), vs)

    gradient = grad(loss, argnums=tuple(diff))
    stacked = [ember.tensor(np.stack([arrays[i] for arrays in samples])) for i in range(len(case))]
    if spec.name in UNBATCHABLE:
        with pytest.raises(RuntimeError):
            _run_quietly(lambda: vmap(gradient)(*stacked))
        return
    per_sample = [gradient(*[ember.tensor(a) for a in arrays]) for arrays in samples]
    _compare(_run_quietly(lambda: vmap(gradient)(*stacked)), per_sample)
