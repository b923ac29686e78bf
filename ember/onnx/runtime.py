"""Run exported models in onnxruntime and compare them with ember (the export check harness).

Example:
    >>> import ember, ember.onnx, tempfile, os
    >>> f = lambda x: (x * 2).exp()
    >>> path = os.path.join(tempfile.mkdtemp(), "f.onnx")
    >>> _ = ember.onnx.export(f, (ember.randn(3),), path, input_names=["x"])  # doctest: +SKIP
    >>> ember.onnx.verify(f, (ember.randn(3),), path) < 1e-5  # doctest: +SKIP
    True
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
from ember.autograd import grad_mode
from ember.onnx.complex_emitters import METADATA_KEY, as_onnx_constant


def _session(model: Any) -> Any:
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("running ONNX models needs the optional 'onnxruntime' package: "
                          "pip install 'ember[onnx]'  (or: pip install onnxruntime)") from None
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if not isinstance(model, (str, bytes)) and hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    elif not isinstance(model, (str, bytes)):
        model = str(model)  # a PathLike
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _array(value: Any) -> np.ndarray:
    from ember.tensor import Tensor

    if isinstance(value, Tensor):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def run(model: Any, inputs: Any) -> list[np.ndarray]:
    """Run an ONNX model (a path or a ModelProto) in onnxruntime on CPU.

    ``inputs`` is a dict name -> tensor/array, or a sequence in the graph's input order. Complex inputs and
    outputs (carried as (..., 2) real pairs inside the model, see :mod:`ember.onnx.complex_emitters`) are
    complex arrays here.
    """
    session = _session(model)
    names = [i.name for i in session.get_inputs()]
    if isinstance(inputs, dict):
        feeds = {k: _array(v) for k, v in inputs.items()}
    else:
        seq = inputs if isinstance(inputs, (list, tuple)) else (inputs,)
        if len(seq) != len(names):
            raise ValueError(f"ember.onnx.run: the model takes {len(names)} inputs {names}, got {len(seq)}")
        feeds = {k: _array(v) for k, v in zip(names, seq)}
    complex_values = json.loads(session.get_modelmeta().custom_metadata_map.get(METADATA_KEY, "{}"))
    for name in complex_values.get("inputs", {}):
        if name in feeds and feeds[name].dtype.kind == "c":  # complex in: (..., 2) real pairs
            feeds[name] = as_onnx_constant(feeds[name])
    outputs = session.run(None, feeds)
    out_names = [o.name for o in session.get_outputs()]
    complex_out = complex_values.get("outputs", {})
    return [_complex(out, complex_out[name]) if name in complex_out else out for out, name in zip(outputs, out_names)]


def _complex(pairs: np.ndarray, dtype_name: str) -> np.ndarray:
    """(..., 2) real and imaginary parts back as the complex array ember's output was."""
    out = np.empty(pairs.shape[:-1], dtype=np.complex64 if dtype_name == "complex64" else np.complex128)
    out.real, out.imag = pairs[..., 0], pairs[..., 1]  # not re + 1j * im: 1j * inf has a NaN real part
    return out


def verify(model_or_fn: Any, inputs: Sequence[Any], onnx_model: Any, atol: float = 1e-5, rtol: float = 1e-5) -> float:
    """Run ember and onnxruntime on ``inputs``; return the largest absolute difference.

    Raises ``AssertionError`` naming the output, shapes and error when they disagree beyond
    ``atol + rtol * |ember|`` (or differ in shape or dtype).
    """
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    module = model_or_fn if hasattr(model_or_fn, "modules") and hasattr(model_or_fn, "training") else None
    modes = [(m, m.training) for m in module.modules()] if module is not None else []
    if module is not None:
        module.eval()  # export traces in eval mode; compare like with like
    try:
        with grad_mode.no_grad():
            expected = model_or_fn(*inputs)
    finally:
        for m, training in modes:
            m.training = training
    expected = [_array(e) for e in (expected if isinstance(expected, (tuple, list)) else (expected,))]
    got = run(onnx_model, list(inputs))
    worst = 0.0
    for k, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape or e.dtype != g.dtype:
            raise AssertionError(f"ember.onnx.verify: output {k}: ember gives {e.dtype}{list(e.shape)}, "
                                 f"onnxruntime {g.dtype}{list(g.shape)}")
        if e.size:
            diff = np.abs(e.astype(np.float64) - g.astype(np.float64))
            worst = max(worst, float(diff.max()))
            bad = diff > atol + rtol * np.abs(e.astype(np.float64))
            if bad.any():
                raise AssertionError(f"ember.onnx.verify: output {k} of shape {list(e.shape)} differs by up to "
                                     f"{float(diff.max()):.3g} (atol={atol}, rtol={rtol}) at {int(bad.sum())} elements")
    return worst
