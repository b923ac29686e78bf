"""ember.fft, stft and complex arithmetic exported to ONNX (complex values as (..., 2) real pairs, ONNX's DFT)
and run in onnxruntime against ember's eager results and torch.fft in float64, in every norm mode, odd and even
lengths, n-D forms, float32 and float64, opsets 17 (DFT's axis an attribute) and 20 (an input)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import ember.onnx as eonnx  # noqa: E402
from ember.onnx.complex_emitters import METADATA_KEY  # noqa: E402

RNG = np.random.default_rng(7)
SIGNAL = RNG.standard_normal((3, 10))
SPECTRUM = RNG.standard_normal((3, 6)) + 1j * RNG.standard_normal((3, 6))


def _export_and_run(fn, inputs, opset=17):
    tensors = [ember.tensor(a) for a in inputs]
    model = eonnx.export(fn, tuple(tensors), None, opset_version=opset)
    got = eonnx.run(model, [np.asarray(a) for a in inputs])
    want = fn(*tensors)
    want = [w.numpy() for w in (want if isinstance(want, (tuple, list)) else (want,))]
    return model, got, want


def _close(got, want, reference, dtype):
    # ONNX Runtime's DFT sums O(n^2) terms for lengths that are not powers of two: float32 error grows with n
    tol = 2e-6 if dtype == np.float32 else 1e-12
    for g, w, r in zip(got, want, reference):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(w, r, rtol=0, atol=tol * scale * 5)  # ember itself vs NumPy
        np.testing.assert_allclose(g, r, rtol=0, atol=tol * scale * 5)  # onnxruntime vs NumPy


# (ember function, NumPy function, keyword arguments, input: "real" signal or "complex" spectrum)
CASES = [
    ("fft", {}, "real"), ("fft", {"n": 7, "norm": "ortho"}, "complex"), ("ifft", {"norm": "forward"}, "complex"),
    ("ifft", {"n": 12, "dim": 0}, "complex"), ("rfft", {}, "real"), ("rfft", {"n": 7, "norm": "forward"}, "real"),
    ("rfft", {"n": 16, "norm": "ortho"}, "real"), ("irfft", {}, "complex"), ("irfft", {"n": 9}, "complex"),
    ("irfft", {"n": 4, "norm": "ortho"}, "complex"), ("irfft", {"n": 1}, "complex"), ("hfft", {"n": 11}, "complex"),
    ("ihfft", {}, "real"), ("fft2", {}, "complex"), ("ifft2", {"s": (4, 5)}, "real"), ("fftn", {"norm": "ortho"}, "real"),
    ("rfft2", {}, "real"), ("rfftn", {"s": (2, 8)}, "real"), ("irfft2", {}, "complex"),
    ("irfftn", {"s": (3, 7), "norm": "forward"}, "complex"), ("ihfft2", {}, "real"), ("hfft2", {"s": (3, 8)}, "complex"),
]


@pytest.mark.parametrize("opset", [17, 18, 20])
@pytest.mark.parametrize("name,kw,kind", CASES, ids=[f"{c[0]}-{'-'.join(map(str, c[1].values()))}" for c in CASES])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_every_fft_function_exports(name, kw, kind, opset, precision):
    real_dtype = np.dtype(precision)
    x = SIGNAL.astype(real_dtype) if kind == "real" else \
        SPECTRUM.astype(np.complex64 if precision == "float32" else np.complex128)
    fn = getattr(ember.fft, name)
    _, got, want = _export_and_run(lambda t: fn(t, **kw), [x], opset)
    wide = torch.from_numpy(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
    reference = getattr(torch.fft, name)(wide, **kw).resolve_conj().numpy()  # PyTorch's semantics, in double precision
    _close(got, want, [reference], real_dtype)


def test_special_values_go_through_the_transform_as_in_eager():
    """inf and NaN in a signal spread through the whole spectrum in both (not a silent zero in either)."""
    x = SIGNAL.astype(np.float32).copy()
    x[0, 3], x[1, 0] = np.inf, np.nan
    x[2] = 0.0
    _, (got,), (want,) = _export_and_run(lambda t: ember.fft.rfft(t), [x])
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_array_equal(got[2], want[2])  # the zero signal: exact zeros


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_stft_spectrogram_and_complex_filter_export(opset):
    """A spectrogram (frames, Hann window, one-sided DFT, magnitude) and a filter applied in the frequency domain."""
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    window = ember.hann_window(16)

    def spectrogram(t):
        return ember.stft(t, 16, hop_length=4, window=window, return_complex=True).abs() ** 2

    _, (got,), (want,) = _export_and_run(spectrogram, [x], opset)
    frames = np.pad(x, ((0, 0), (8, 8)), mode="reflect")
    idx = np.arange(16)[None, :] + 4 * np.arange(17)[:, None]
    reference = np.abs(np.fft.rfft(frames[:, idx] * window.numpy(), axis=-1)).transpose(0, 2, 1) ** 2
    np.testing.assert_allclose(want, reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    response = (RNG.standard_normal(33) + 1j * RNG.standard_normal(33)).astype(np.complex64)

    def low_pass(t, h):
        return ember.fft.irfft(ember.fft.rfft(t) * h, n=64)

    _, (got,), (want,) = _export_and_run(low_pass, [x, response])
    np.testing.assert_allclose(want, np.fft.irfft(np.fft.rfft(x.astype(np.float64)) * response, n=64), atol=1e-5)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_complex_inputs_and_outputs_are_pairs_named_in_the_metadata():
    z = SPECTRUM.astype(np.complex64)
    model, got, want = _export_and_run(lambda t: (t * (1.5 - 2j), t.abs()), [z])
    graph = model.graph
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [3, 6, 2]
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    meta = json.loads({p.key: p.value for p in model.metadata_props}[METADATA_KEY])
    assert meta == {"inputs": {graph.input[0].name: "complex64"}, "outputs": {graph.output[0].name: "complex64"}}
    np.testing.assert_allclose(got[0], z.astype(np.complex128) * (1.5 - 2j), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.abs(z), rtol=1e-6)


@pytest.mark.parametrize("values", [[0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.0]])
def test_complex_parts_angle_and_arithmetic_match_eager_at_special_points(values):
    re = np.array(values, dtype=np.float64)
    z = (re[:, None] + 0j).repeat(len(values), 1)
    z.imag = re[None, :]

    def parts(t):
        return (t.real, t.imag, t.conj(), t.angle(), ember.view_as_real(t), t * t, t + 2.5, -t,
                ember.complex(t.real, t.imag), t.sum(0), t.mean(1), t.transpose(0, 1)[1:3])

    _, got, want = _export_and_run(parts, [z])
    names = ["real", "imag", "conj", "angle", "view_as_real", "mul", "add", "neg", "complex", "sum", "mean", "slice"]
    for name, g, w in zip(names, got, want):
        if name == "mul":  # with inf parts NumPy's product and the four-term formula may differ between inf and NaN
            finite = np.isfinite(w)
            np.testing.assert_allclose(g[finite], w[finite], rtol=1e-12, err_msg=name)
            np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=name)
            continue
        if name == "angle":  # atan2 at +-0 and +-inf corners: ONNX has no signed-zero atan2, compare off them
            off = (z.real != 0) & np.isfinite(z.real) & np.isfinite(z.imag) | np.isnan(z.real) | np.isnan(z.imag)
            np.testing.assert_allclose(g[off], w[off], rtol=1e-12, err_msg=name)
            np.testing.assert_array_equal(g[(z.real == 0) & (z.imag == 0) & ~np.signbit(z.real)], 0.0)
            continue
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, equal_nan=True, err_msg=name)


def test_division_and_polar_match_eager():
    a = SPECTRUM.astype(np.complex128)
    r, theta = np.abs(SIGNAL[:, :6]), SIGNAL[:, 4:]
    _, got, want = _export_and_run(lambda x, m, t: (x / (x.conj() + 0.5), ember.polar(m, t)), [a, r, theta])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_ops_without_a_pair_translation_are_refused_by_name():
    z = ember.tensor(SPECTRUM.astype(np.complex64))
    with pytest.raises(NotImplementedError, match=r"'asin' on complex tensors is not exported.*\(\.\.\., 2\) real pairs"):
        eonnx.export(lambda t: t.asin(), (z,), None)
    with pytest.raises(NotImplementedError, match="'acos' on complex tensors"):
        eonnx.export(lambda t: t.acos(), (z,), None)


def test_complex_matmul_where_and_sgn_match_eager():
    a = SPECTRUM.astype(np.complex128)
    b = (RNG.standard_normal((6, 4)) + 1j * RNG.standard_normal((6, 4)))
    v = RNG.standard_normal(6) + 0j

    def fn(x, y, w):
        return x @ y, x @ w, ember.where(x.real > 0, x, 0.5j), ember.sgn(x), ember.where(x.imag > 0, x.real, 1.0)

    _, got, want = _export_and_run(fn, [a, b, v])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_dynamic_batch_through_rfft():
    x = SIGNAL.astype(np.float32)
    model = eonnx.export(lambda t: ember.fft.irfft(ember.fft.rfft(t) * 2, n=10), (ember.tensor(x),), None,
                         input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    bigger = RNG.standard_normal((5, 10)).astype(np.float32)
    (got,) = eonnx.run(model, [bigger])
    np.testing.assert_allclose(got, 2 * bigger, atol=1e-5)
