"""Commonly exported sequence layers with a dynamic sequence axis (formats22): Embedding + position ids from
``arange(seq)``, LayerNorm, MultiheadAttention with a key padding mask, TransformerEncoder (norm_first, gelu) and
causal ``scaled_dot_product_attention``; onnxruntime at two sequence lengths other than the example's against
ember's forward and torch's (same state_dict).

Found: ``arange(x.shape[1])`` (GPT-style position ids) was refused as "a constant that depends on a dynamic size"
(it is now a ``Range``), and ``is_causal=True`` attention baked the example's sequence length into its mask (it is now
``Trilu`` of run-time sizes).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")


def _export(tmp_path, model, examples, names, dynamic):
    path = str(tmp_path / "seq.onnx")
    ember.onnx.export(model, examples, path, input_names=names, dynamic_axes=dynamic)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _twin(model, torch_model):
    torch_model.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                                 for k, v in model.state_dict().items()})
    return torch_model.eval()


def _lib_model(lib):
    class Tagger(lib.nn.Module):
        """Token + position embeddings (positions from arange of the run-time length), LayerNorm, Linear."""

        def __init__(self):
            super().__init__()
            self.tok, self.pos = lib.nn.Embedding(30, 8), lib.nn.Embedding(40, 8)
            self.norm, self.head = lib.nn.LayerNorm(8), lib.nn.Linear(8, 3)

        def forward(self, ids):
            return self.head(self.norm(self.tok(ids) + self.pos(lib.arange(ids.shape[1]))))

    return Tagger()


def test_embedding_positions_from_arange_and_layer_norm(tmp_path) -> None:
    ember.manual_seed(0)
    model = _lib_model(ember).eval()
    twin = _twin(model, _lib_model(torch))
    session = _export(tmp_path, model, (ember.randint(0, 30, (2, 5)),), ["ids"], {"ids": {0: "batch", 1: "seq"}})
    rng = np.random.default_rng(0)
    for batch, steps in ((1, 3), (3, 17)):
        ids = rng.integers(0, 30, (batch, steps)).astype(np.int64)
        got = session.run(None, {"ids": ids})[0]
        with ember.no_grad():
            mine = model(ember.from_numpy(ids)).numpy()
        with torch.no_grad():
            theirs = twin(torch.from_numpy(ids)).numpy()
        np.testing.assert_allclose(got, mine, atol=2e-6, rtol=1e-5)
        np.testing.assert_allclose(got, theirs, atol=2e-6, rtol=1e-5)


def test_multihead_attention_with_a_key_padding_mask(tmp_path) -> None:
    ember.manual_seed(1)

    class Attend(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x, pad):
            return self.mha(x, x, x, key_padding_mask=pad)[0]

    model = Attend().eval()
    twin = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    twin.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in model.mha.state_dict().items()})
    pad0 = ember.from_numpy(np.array([[False] * 5, [False] * 3 + [True] * 2]))
    session = _export(tmp_path, model, (ember.randn(2, 5, 8), pad0), ["x", "pad"],
                      {"x": {0: "batch", 1: "seq"}, "pad": {0: "batch", 1: "seq"}})
    rng = np.random.default_rng(1)
    for batch, steps in ((1, 2), (3, 11)):
        x = rng.standard_normal((batch, steps, 8)).astype(np.float32)
        pad = np.arange(steps)[None, :] >= rng.integers(1, steps + 1, (batch, 1))
        got = session.run(None, {"x": x, "pad": pad})[0]
        with ember.no_grad():
            mine = model(ember.from_numpy(x), ember.from_numpy(pad)).numpy()
        with torch.no_grad():
            theirs = twin(*(torch.from_numpy(x),) * 3, key_padding_mask=torch.from_numpy(pad))[0].numpy()
        np.testing.assert_allclose(got, mine, atol=2e-6, rtol=1e-5)
        np.testing.assert_allclose(got, theirs, atol=2e-6, rtol=1e-5)


def test_transformer_encoder_norm_first_gelu(tmp_path) -> None:
    ember.manual_seed(2)
    options = dict(d_model=8, nhead=2, dim_feedforward=16, batch_first=True, norm_first=True, activation="gelu")
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(**options), 2, enable_nested_tensor=False).eval()
    twin = _twin(model, torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**options), 2,
                                                    enable_nested_tensor=False))
    session = _export(tmp_path, model, (ember.randn(2, 5, 8),), ["x"], {"x": {0: "batch", 1: "seq"}})
    rng = np.random.default_rng(2)
    for batch, steps in ((1, 1), (2, 13)):
        x = rng.standard_normal((batch, steps, 8)).astype(np.float32)
        got = session.run(None, {"x": x})[0]
        with ember.no_grad():
            mine = model(ember.from_numpy(x)).numpy()
        with torch.no_grad():
            theirs = twin(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, mine, atol=4e-6, rtol=1e-5)
        np.testing.assert_allclose(got, theirs, atol=4e-6, rtol=1e-5)


def test_causal_attention_mask_follows_the_sequence_length(tmp_path) -> None:
    def attend(q, k):
        return F.scaled_dot_product_attention(q, k, k, is_causal=True)

    session = _export(tmp_path, attend, (ember.randn(2, 2, 5, 4), ember.randn(2, 2, 5, 4)), ["q", "k"],
                      {"q": {2: "seq"}, "k": {2: "seq"}})
    rng = np.random.default_rng(3)
    for steps in (1, 9):
        q, k = (rng.standard_normal((2, 2, steps, 4)).astype(np.float32) for _ in range(2))
        got = session.run(None, {"q": q, "k": k})[0]
        mine = attend(ember.from_numpy(q), ember.from_numpy(k)).numpy()
        theirs = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, k)),
                                                                  is_causal=True).numpy()
        np.testing.assert_allclose(got, mine, atol=2e-6, rtol=1e-5)
        np.testing.assert_allclose(got, theirs, atol=2e-6, rtol=1e-5)
