"""Shared machinery of the generated op tests: inputs from a spec, the NumPy reference, comparisons,
and the axes a spec is run on (device, layout, optional extras).

tests/op_specs.py says *what* each op is (callable, NumPy reference, shapes, domains);
this module says *how* to run a spec; tests/ops/test_ops_generated.py (dtypes, gradients, second
order, coverage) and tests/ops/test_ops_axes.py (layouts, extras, compile, shape rules, ONNX,
PyTorch) are the tests. See docs/testing.md.

Example:
    arrays = make_inputs(spec, spec.shapes[0], "float64")
    outs = as_tuple(spec.fn(*[ember.tensor(a) for a in arrays]))
    assert_matches_reference(spec, outs, reference(spec, arrays, "float64"), "float64")
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

import numpy as np

import ember
from ember import _config
from ember.backends import cpu_kernels
from ember.graph.passes import fuse_numba

from op_specs import OpSpec, sample

LOW_PRECISION = ("float16", "bfloat16")
INTEGER_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64")
TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6), "float16": (1e-2, 1e-2), "bfloat16": (4e-2, 4e-2),
       "complex128": (1e-10, 1e-12), "complex64": (2e-5, 2e-6)}
COMPLEX_DTYPES = ("complex64", "complex128")

# The device axis. Every axis test takes a ``device`` fixture parametrized over this list; a backend
# whose tests can run here (the stand-in device served as "cuda", a real GPU) is added to it, e.g.
# ``DEVICES.append("cuda")`` behind its availability check. Inputs are created on the device and
# results are brought back with ``.cpu()`` before they are compared.
# "cuda" is a GPU where one is present, else ember's stand-in device (docs/devices.md), so CI runs it.
DEVICES: list[str] = ["cpu", "cuda"]


def np_dtype(name: str) -> Any:
    return ember.dtypes.to_dtype(name).np


def make_inputs(spec: OpSpec, case: tuple, dtype: str, seed: int = 0) -> list:
    """One NumPy array per input of ``case``, drawn from the spec's domains (fixed inputs as given)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for i, shape in enumerate(case):
        if i in spec.fixed:
            arrays.append(spec.fixed[i](rng, case))
            continue
        domain = spec.domain[i] if isinstance(spec.domain, tuple) else spec.domain
        if dtype in LOW_PRECISION:
            arrays.append(sample(rng, shape, domain, np.float64).astype(np_dtype(dtype)))
        else:
            arrays.append(sample(rng, shape, domain, np_dtype(dtype)))
    return arrays


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def to_numpy(t: Any) -> np.ndarray:
    """A tensor's values on the host (from any device)."""
    return np.asarray(t.detach().cpu().__array__())


def reference(spec: OpSpec, arrays: list, dtype: str) -> tuple:
    """The NumPy result, computed in float64 for floating inputs (the inputs' exact values)."""
    is_float = dtype not in INTEGER_DTYPES
    ref_in = [a.astype(np.float64) if is_float and np.asarray(a).dtype.kind == "f" or
              (is_float and a.dtype.name == "bfloat16") else
              a.astype(np.complex128) if np.asarray(a).dtype.kind == "c" else a for a in arrays]
    with np.errstate(all="ignore"):
        return tuple(np.asarray(r) for r in as_tuple(spec.ref(*ref_in)))


def expected_dtype(spec: OpSpec, dtype: str, ref_out: np.ndarray, position: int) -> str | None:
    is_float = ember.dtypes.to_dtype(dtype).is_floating_point
    if position > 0 and ref_out.dtype.kind in "iu":
        return "int64"  # indices of max/min
    if dtype in COMPLEX_DTYPES:
        rule = spec.complex_out
        if rule == "real":
            return ember.dtypes.to_dtype(dtype).to_real().name
        return dtype if rule == "same" else rule
    rule = spec.float_out if is_float else spec.int_out
    if rule is None:
        return None
    if rule == "complex":  # float inputs, complex results of the same precision (fft, complex, polar)
        return ember.dtypes.to_dtype(dtype).to_complex().name
    return dtype if rule == "same" else rule


def assert_matches_reference(spec: OpSpec, outs: tuple, refs: tuple, dtype: str, where: str = "") -> None:
    """Outputs against the NumPy reference: count, type, shape, the expected dtype and values."""
    name = f"{spec.name}{where}"
    assert len(outs) == len(refs), f"{name}: {len(outs)} outputs, reference has {len(refs)}"
    for i, (out, ref) in enumerate(zip(outs, refs)):
        rtol, atol = TOL.get(dtype) or TOL.get(out.dtype.name, (0, 0))
        assert isinstance(out, ember.Tensor), f"{name}: output {i} is {type(out).__name__}"
        assert tuple(out.shape) == ref.shape, f"{name}: shape {tuple(out.shape)} != reference {ref.shape}"
        expected = expected_dtype(spec, dtype, ref, i)
        if expected is not None:
            assert out.dtype.name == expected, f"{name}: dtype {out.dtype} for {dtype} inputs, want {expected}"
        got = to_numpy(out)
        if ref.dtype.kind in "biu" and got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, ref, err_msg=name)
        elif "c" in (ref.dtype.kind, got.dtype.kind):  # complex: both parts, NaN/inf where the reference has them
            scale = max(1.0, float(np.nanmax(np.abs(ref), initial=0, where=np.isfinite(ref)))) if ref.size else 1.0
            for part in (np.real, np.imag):
                np.testing.assert_allclose(part(got).astype(np.float64), part(ref).astype(np.float64), rtol=rtol,
                                           atol=atol * scale, equal_nan=True, err_msg=name)
        else:
            scale = max(1.0, float(np.nanmax(np.abs(ref), initial=0, where=np.isfinite(ref)))) if ref.size else 1.0
            np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                                       atol=atol * scale, equal_nan=True, err_msg=name)


def diff_positions(spec: OpSpec, arrays: list) -> tuple:
    """Positions of the inputs gradients are taken for (the spec's, else every float input)."""
    if spec.diff is not None:
        return spec.diff
    return tuple(i for i, a in enumerate(arrays) if i not in spec.fixed and a.dtype.kind in "fc")


def cotangents(outs: tuple, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)) if o.dtype.is_floating_point else
            rng.standard_normal(tuple(o.shape)) + 1j * rng.standard_normal(tuple(o.shape)) if o.dtype.is_complex else None
            for o in outs]


def weighted_loss(spec: OpSpec, outs: tuple, vs: list) -> Any:
    """sum_k <out_k, v_k> over the floating outputs: one scalar whose gradient is the VJP (the real part of
    sum_k out_k * v_k for complex outputs: a real loss, whose gradient follows PyTorch's convention)."""
    terms = []
    for out, v in zip(outs, vs):
        if v is None:
            continue
        assert out.requires_grad, f"{spec.name}: a floating output does not require grad"
        v_t = v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=out.dtype, device=out.device)
        term = out * v_t
        terms.append((term.real if term.dtype.is_complex else term).sum())
    loss = terms[0]
    for term in terms[1:]:
        loss = loss + term
    return loss


def ember_loss(spec: OpSpec, tensors: list, vs: list) -> tuple:
    outs = as_tuple(spec.fn(*tensors))
    return outs, weighted_loss(spec, outs, vs)


# ---- layouts ----------------------------------------------------------------------------------------
LAYOUTS = ("transposed", "strided", "broadcast")


def layout_values(a: np.ndarray, layout: str) -> np.ndarray | None:
    """The values an input takes in ``layout`` (broadcast repeats the first row), or None when the
    layout does not apply to this array (too few dimensions, empty)."""
    if a.size == 0 or a.ndim == 0:
        return None
    if layout == "transposed":
        return a if a.ndim >= 2 and sorted(a.shape)[-2] > 1 else None
    if layout == "strided":
        return a
    if layout == "broadcast":
        return np.broadcast_to(a[:1], a.shape).copy() if a.shape[0] > 1 else None
    raise ValueError(layout)


def layout_tensor(values: np.ndarray, layout: str, device: str, requires_grad: bool = False) -> Any:
    """A view holding ``values`` in ``layout`` over a contiguous leaf on ``device`` (the leaf requires
    grad when asked, so gradients can be taken with respect to the view).

    transposed: a permutation of a contiguous array of the reversed shape; strided: every second
    element of the last axis, the others NaN (or 7 for integers: an op reading past the view shows);
    broadcast: a stride-0 expand of the first row.
    """
    if layout == "transposed":
        rev = tuple(reversed(range(values.ndim)))
        leaf = ember.tensor(np.ascontiguousarray(values.transpose(rev)), device=device, requires_grad=requires_grad)
        return leaf.permute(*rev)
    if layout == "strided":
        wide = np.empty(values.shape[:-1] + (2 * values.shape[-1],), dtype=values.dtype)
        wide[...] = np.nan if values.dtype.kind == "f" else (values.dtype.kind != "b") * 7 + (values.dtype.kind == "b")
        wide[..., ::2] = values
        leaf = ember.tensor(wide, device=device, requires_grad=requires_grad)
        return leaf[..., ::2]
    if layout == "broadcast":
        leaf = ember.tensor(np.ascontiguousarray(values[:1]), device=device, requires_grad=requires_grad)
        return leaf.expand(*values.shape)
    raise ValueError(layout)


# ---- optional extras --------------------------------------------------------------------------------
EXTRAS = ("installed", "numpy_only")


@contextlib.contextmanager
def extras(mode: str) -> Iterator[None]:
    """Run as an install without the optional extras (``numpy_only``: no SciPy special functions,
    no Numba kernels, no Numba-fused loops), or as installed here.

    numpy_only hides ``scipy`` from imports too (as ``EMBER_SPECIAL_FUNCTIONS=numpy`` plus an
    uninstalled SciPy would), and restores everything after.
    """
    if mode == "installed":
        yield
        return
    saved = (_config.SPECIAL_FUNCTIONS, _config.CPU_KERNELS, fuse_numba.available, cpu_kernels._KERNELS)
    saved_modules = {k: sys.modules.get(k, _ABSENT) for k in ("scipy", "scipy.special", "numba")}
    _config.SPECIAL_FUNCTIONS, _config.CPU_KERNELS = "numpy", "numpy"
    fuse_numba.available = lambda: False
    cpu_kernels._KERNELS = {}  # no native kernels (rebuilding the table would reload numba's cache)
    for k in saved_modules:
        sys.modules[k] = None  # type: ignore[assignment]  # import raises ImportError, as uninstalled
    try:
        yield
    finally:
        _config.SPECIAL_FUNCTIONS, _config.CPU_KERNELS, fuse_numba.available, cpu_kernels._KERNELS = saved
        for k, v in saved_modules.items():
            if v is _ABSENT:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


_ABSENT = object()
