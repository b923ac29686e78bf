"""ONNX export differential: a program exported by ``ember.onnx.export``, run in onnxruntime, vs ember eager.

The programs are the fifth wave's (trust_cases_compile.py, area ``onnx_values``): chains of elementwise ops with
Python-number operands, integer division/remainder, rounding modes, casts, reductions (also over empty dims),
broadcasting, views. What is compared: each output's dtype and shape exactly, values (integers and bools exactly,
floats within a few ulps of the dtype and NaN/inf at the same places). Outcomes:

* the exporter refuses (any exception from ``export``): fine, a clear refusal is not a wrong result;
* the model does not load or run in onnxruntime: a broken export (fails);
* it runs: every output must agree with eager.

Example:
    >>> compare_onnx(Program("out = x0 // 2", {"x0": (np.arange(-3, 3), "int64", "contiguous")}))  # None
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import ember
from trust_compile_diff import Program, _function, _inputs
from trust_diff import Case, diff, normalize

# onnxruntime computes transcendental functions with its own (MLAS) kernels: a few ulps off NumPy's
ONNX_RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-12}
# Known, documented export differences (docs/architecture.md, "Known differences of exported ops")
DOCUMENTED = ("expm1", "atan2", "hypot", ".sort(", "topk")


def _flat(out: Any) -> list:
    if isinstance(out, ember.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return []


def compare_onnx(prog: Program) -> str | None:
    """None when the export is refused or agrees with eager, else the difference (or the runtime's error)."""
    import ember.onnx as eonnx

    if any(name in prog.body for name in DOCUMENTED):
        return None

    fn = _function(prog)
    inputs = _inputs(prog)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _flat(fn(**_inputs(prog)))
    except Exception:  # noqa: BLE001 - eager refuses: nothing to export
        return None
    if not want:
        return None
    names = list(inputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = eonnx.export(lambda *a: fn(**dict(zip(names, a))), tuple(inputs[k] for k in names))
    except Exception:  # noqa: BLE001 - a refusal (not exportable): not a wrong result
        return None
    try:
        got = eonnx.run(model, [inputs[k].detach().to(ember.float32).numpy() if inputs[k].dtype is ember.bfloat16
                                else inputs[k].detach().contiguous().numpy() for k in names])
    except Exception as error:  # noqa: BLE001 - the exported model is broken, or onnxruntime lacks a kernel
        text = str(error)
        if "NOT_IMPLEMENTED" in text or "bfloat16" in text:
            return None  # a valid model onnxruntime has no kernel for (float64 Atan, ...): its limitation
        return f"onnxruntime cannot run the exported model: {type(error).__name__}: {text[:300]}"
    if len(got) != len(want):
        return f"{len(got)} ONNX outputs, {len(want)} eager results"
    for k, (g, w) in enumerate(zip(got, want)):
        wn = normalize(ember, w)
        gn = ("T", str(np.asarray(g).dtype) if np.asarray(g).dtype != np.bool_ else "bool", tuple(np.shape(g)),
              np.asarray(g))
        if wn[1] == "bfloat16":
            continue  # onnxruntime has no bfloat16 arithmetic; exported as float32 inputs
        case = Case("", rtol=ONNX_RTOL.get(wn[1]), zero_sign=False, floor=1.0)
        found = diff(gn, wn, case, f"output {k}")
        if found:
            return found.replace("torch", "eager").replace("ember", "onnx")
    return None
