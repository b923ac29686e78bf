"""Every op spec (tests/op_specs.py) on the stand-in CUDA device, against the same op on the CPU.

The stand-in's arrays refuse silent conversion to NumPy arrays, as CuPy's do, so an op whose impl
calls ``np.`` on device data, reads ``.flags.writeable``, or mixes a host array in fails here. Each
spec's first input case runs forward in float32 (and its first integer dtype) and backward in float64
on device ``cuda`` (the stand-in); results must stay on the device, in device arrays, and equal the
CPU's (the CPU results are themselves checked against NumPy and finite differences in
tests/ops/test_ops_generated.py). Layouts, compile, ONNX and torch on the device: the ``cuda`` device
axis of tests/ops/test_ops_axes.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember.backends.standin import StandinArray

from op_specs import SPECS, OpSpec, sample

# Specs for the CPU only: the transfer op's record with CPU source and target attributes.
CPU_ONLY = {"to_device_cpu"}


def _inputs(spec: OpSpec, dtype: str, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    case = spec.shapes[0]
    out = []
    for i, shape in enumerate(case):
        if i in spec.fixed:
            out.append(spec.fixed[i](rng, case))
        else:
            domain = spec.domain[i] if isinstance(spec.domain, tuple) else spec.domain
            out.append(sample(rng, shape, domain, ember.dtypes.to_dtype(dtype).np))
    return out


def _tensors(arrays: list, device: str, diff: tuple = ()) -> list:
    return [ember.tensor(a, device=device, requires_grad=i in diff) if isinstance(a, (np.ndarray, np.generic)) else a
            for i, a in enumerate(arrays)]


def _outputs(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _host(t: ember.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _check_on_device(spec: OpSpec, outs: tuple) -> None:
    for i, out in enumerate(outs):
        if not isinstance(out, ember.Tensor):
            continue
        assert out.device.type == "cuda", f"{spec.name}: output {i} is on {out.device}"
        assert type(out._data) is StandinArray, f"{spec.name}: output {i} holds a {type(out._data).__name__}"


def _compare(spec: OpSpec, got: tuple, want: tuple, rtol: float) -> None:
    assert len(got) == len(want), spec.name
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, ember.Tensor):
            assert g == w, f"{spec.name}: output {i}"
            continue
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), \
            f"{spec.name}: output {i} is {g.dtype}{tuple(g.shape)} on the device, {w.dtype}{tuple(w.shape)} on the CPU"
        g_np, w_np = _host(g), _host(w)
        if w_np.dtype.kind in "biu":
            np.testing.assert_array_equal(g_np, w_np, err_msg=spec.name)
        else:
            np.testing.assert_allclose(g_np.astype(np.float64), w_np.astype(np.float64), rtol=rtol,
                                       atol=rtol * max(1.0, float(np.abs(w_np[np.isfinite(w_np)]).max(initial=0))),
                                       equal_nan=True, err_msg=spec.name)


def _forward_params() -> list:
    params = []
    for spec in SPECS:
        for dtype in [d for d in ("float32",) if d in spec.float_dtypes] + list(spec.int_dtypes[:1]):
            if spec.name not in CPU_ONLY:
                params.append(pytest.param(spec, dtype, id=f"{spec.name}-{dtype}"))
    return params


@pytest.fixture(autouse=True)
def _standin():
    with ember.testing.standin_cuda():
        yield


@pytest.mark.parametrize("spec,dtype", _forward_params())
def test_forward_on_device_matches_cpu(spec: OpSpec, dtype: str) -> None:
    arrays = _inputs(spec, dtype)
    with np.errstate(all="ignore"):
        want = _outputs(spec.fn(*_tensors(arrays, "cpu")))
        got = _outputs(spec.fn(*_tensors(arrays, "cuda")))
    _check_on_device(spec, got)
    _compare(spec, got, want, rtol=1e-5 if dtype == "float32" else 0.0)


def _grad_params() -> list:
    return [pytest.param(spec, id=spec.name) for spec in SPECS
            if spec.grad and "float64" in spec.float_dtypes and spec.name not in CPU_ONLY]


@pytest.mark.parametrize("spec", _grad_params())
def test_backward_on_device_matches_cpu(spec: OpSpec) -> None:
    arrays = _inputs(spec, "float64")
    diff = spec.diff if spec.diff is not None else tuple(
        i for i, a in enumerate(arrays) if i not in spec.fixed and isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "f")
    grads = {}
    for device in ("cpu", "cuda"):
        tensors = _tensors(arrays, device, diff)
        with np.errstate(all="ignore"):
            outs = _outputs(spec.fn(*tensors))
        rng = np.random.default_rng(1)
        loss = None
        for out in outs:
            if isinstance(out, ember.Tensor) and out.requires_grad:
                term = out * ember.tensor(rng.standard_normal(tuple(out.shape)), dtype=out.dtype, device=device)
                term = (term.real if term.dtype.is_complex else term).sum()  # complex outputs: a real loss
                loss = term if loss is None else loss + term
        if loss is None:
            pytest.skip(f"{spec.name}: no differentiable output for these inputs")
        grads[device] = ember.autograd.grad(loss, [tensors[i] for i in diff], allow_unused=True)
    for i, (g, w) in enumerate(zip(grads["cuda"], grads["cpu"])):
        assert (g is None) == (w is None), f"{spec.name}: gradient {i} is None on one device only"
        if g is not None:
            _check_on_device(spec, (g,))
            _compare(spec, (g,), (w,), rtol=1e-9)

