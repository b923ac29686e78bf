"""Every op record exports to ONNX through its own ``onnx`` field, or is listed (with the reason) in
docs/architecture.md; the translations added for the user-facing ops that lacked one run in
onnxruntime against ember and NumPy, special values included."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember
from ember.ops.registry import OPS

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember.onnx as eonnx  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
_X = np.array([[-2.5, -1.0, -0.5, 0.0], [0.25, 0.5, 1.75, 3.0]], dtype=np.float32)
_POS = np.abs(_X) + 0.125


def _run(fn, arrays, tmp_path):
    path = tmp_path / "op.onnx"
    inputs = tuple(ember.tensor(a) for a in arrays)
    eonnx.export(fn, inputs, str(path))
    return eonnx.run(str(path), list(inputs)), fn(*inputs)


CASES = [
    ("expm1", lambda x: ember.expm1(x), np.expm1, _X),
    ("log2", lambda x: ember.log2(x), np.log2, _POS),
    ("log10", lambda x: ember.log10(x), np.log10, _POS),
    ("exp2", lambda x: ember.exp2(x), np.exp2, _X),
    ("trunc", lambda x: ember.trunc(x * 1.7), lambda a: np.trunc(a * np.float32(1.7)), _X),
    ("atan2", lambda x: ember.atan2(x, x.flip(1) + 0.1), lambda a: np.arctan2(a, np.flip(a, 1) + np.float32(0.1)), _X),
    ("hypot", lambda x: ember.hypot(x, x.flip(1)), lambda a: np.hypot(a, np.flip(a, 1)), _X),
    ("hardtanh", lambda x: ember.nn.functional.hardtanh(x * 2, -1.5, 0.75), lambda a: np.clip(a * 2, -1.5, 0.75), _X),
    ("logsigmoid", lambda x: ember.nn.functional.logsigmoid(x * 20), lambda a: -np.logaddexp(0, -a.astype(np.float64) * 20), _X),
    ("erfc", lambda x: ember.erfc(x), lambda a: __import__("scipy.special").special.erfc(a.astype(np.float64)), _X),
    ("mish", lambda x: ember.nn.functional.mish(x * 3), lambda a: a * 3 * np.tanh(np.logaddexp(0, a.astype(np.float64) * 3)), _X),
]

_LOGITS = np.array([[-120.0, -30.0, -2.5, -0.5, 0.0], [0.25, 1.75, 3.0, 30.0, 120.0]], dtype=np.float32)
_TARGETS = np.array([[0.0, 1.0, 0.25, 1.0, 0.5], [1.0, 0.0, 0.75, 1.0, 0.0]], dtype=np.float32)
_PROBS = np.array([[0.0, 1e-20, 0.25, 0.5, 1.0], [1.0, 0.75, 1e-6, 1.0 - 2 ** -24, 0.0]], dtype=np.float32)


def _bce_logits_ref(x, t, pos_weight=1.0):
    x, t = x.astype(np.float64), t.astype(np.float64)
    return (1 - t) * x + ((pos_weight - 1) * t + 1) * np.logaddexp(0, -x)


@pytest.mark.parametrize("opset", [17, 18])
def test_binary_cross_entropy_exports(tmp_path, opset):
    """Both BCE primitives (and mish) run in onnxruntime with ember's clamped logs and stable tails."""
    F = ember.nn.functional
    path = tmp_path / "bce.onnx"
    x, t, p = ember.tensor(_LOGITS), ember.tensor(_TARGETS), ember.tensor(_PROBS)
    pw = ember.tensor(np.array([0.5, 2.0, 3.0, 1.0, 4.0], dtype=np.float32))

    def losses(x, t, p, pw):
        return (F.binary_cross_entropy_with_logits(x, t, reduction="none"),
                F.binary_cross_entropy_with_logits(x, t, reduction="none", pos_weight=pw),
                F.binary_cross_entropy(p, t, reduction="none"), F.mish(x))

    eonnx.export(losses, (x, t, p, pw), str(path), opset_version=opset)
    got = eonnx.run(str(path), [x, t, p, pw])
    eager = [e.numpy() for e in losses(x, t, p, pw)]
    p64, t64 = _PROBS.astype(np.float64), _TARGETS.astype(np.float64)
    with np.errstate(divide="ignore"):
        bce = -(t64 * np.maximum(np.log(p64), -100) + (1 - t64) * np.maximum(np.log1p(-p64), -100))
    references = [_bce_logits_ref(_LOGITS, _TARGETS), _bce_logits_ref(_LOGITS, _TARGETS, pw.numpy().astype(np.float64)),
                  bce, _LOGITS * np.tanh(np.logaddexp(0, _LOGITS.astype(np.float64)))]
    for g, e, r in zip(got, eager, references):
        np.testing.assert_allclose(e, r, rtol=2e-6, atol=1e-30)   # ember itself: the float64 formula
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-6)    # ONNX: Log(1 + e) drops e < 1e-7
    graph = onnx.load(str(path)).graph
    assert ("Mish" in {node.op_type for node in graph.node}) == (opset >= 18)


@pytest.mark.parametrize("name,fn,reference,x", CASES, ids=[c[0] for c in CASES])
def test_elementwise_exports(tmp_path, name, fn, reference, x):
    (got,), eager = _run(fn, [x], tmp_path)
    np.testing.assert_allclose(got, eager.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_exports_values_and_indices(tmp_path, descending):
    x = np.random.default_rng(0).permutation(24).astype(np.float32).reshape(4, 6)  # distinct: no ties
    (values, indices), _ = _run(lambda t: ember.sort(t, dim=1, descending=descending), [x], tmp_path)
    order = np.argsort(-x if descending else x, axis=1)
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, 1))


def test_relu_and_clamp_backward_ops_export(tmp_path):
    from ember.ops.elementwise import grad_mask, relu_grad

    g = np.full_like(_X, 2.0)
    (got,), _ = _run(lambda x, g: relu_grad(g, x.relu()) + grad_mask(g, x.abs() <= 1), [_X, g], tmp_path)
    np.testing.assert_array_equal(got, (_X > 0) * 2.0 + (np.abs(_X) <= 1) * 2.0)


def test_every_record_has_an_onnx_mapping_or_a_documented_reason():
    text = DOC.read_text()
    missing = sorted(name for name, op in OPS.items() if op.onnx is None and f"`{name}`" not in text)
    assert not missing, f"records without ONNX export and not listed in docs/architecture.md: {missing}"
