"""Models built in torch, saved with safetensors, loaded into ember by name: same outputs and gradients.

torch 2.13 CPU is the independent reference; nothing here compares ember with itself.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

import ember  # noqa: E402
import ember.nn as enn  # noqa: E402
from ember.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

tnn = torch.nn
ATOL, RTOL = 2e-5, 2e-4


def transfer(torch_model: "torch.nn.Module", ember_model: enn.Module, tmp_path) -> None:
    """torch state_dict -> safetensors file -> NumPy -> ember tensors -> strict load_state_dict."""
    path = str(tmp_path / "model.safetensors")
    safetensors_torch.save_file({k: v.detach().contiguous() for k, v in torch_model.state_dict().items()}, path)
    state = {k: ember.tensor(v) for k, v in safetensors_numpy.load_file(path).items()}
    result = ember_model.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def close(ember_value, torch_value, atol: float = ATOL, rtol: float = RTOL) -> None:
    np.testing.assert_allclose(np.asarray(ember_value.detach().numpy()), torch_value.detach().numpy(),
                               atol=atol, rtol=rtol)


def inputs(*shape: int, seed: int = 0):
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def check_param_grads(ember_model: enn.Module, torch_model: "torch.nn.Module", atol: float = ATOL) -> None:
    torch_params = dict(torch_model.named_parameters())
    ember_params = dict(ember_model.named_parameters())
    assert sorted(ember_params) == sorted(torch_params)
    for name, param in torch_params.items():
        assert ember_params[name].grad is not None, name
        close(ember_params[name].grad, param.grad, atol=atol)


def run_both(ember_model, torch_model, e_in, t_in, atol: float = ATOL):
    """Forward both, backprop the same weighted sum, compare outputs and input/parameter gradients."""
    e_out, t_out = ember_model(e_in), torch_model(t_in)
    close(e_out, t_out, atol=atol)
    weights = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (e_out * ember.tensor(weights)).sum().backward()
    (t_out * torch.tensor(weights)).sum().backward()
    close(e_in.grad, t_in.grad, atol=atol)
    check_param_grads(ember_model, torch_model, atol=atol)


def test_mlp_outputs_and_gradients(tmp_path):
    torch.manual_seed(0)
    t_model = tnn.Sequential(tnn.Linear(5, 16), tnn.ReLU(), tnn.Linear(16, 16), tnn.GELU(), tnn.Linear(16, 3))
    e_model = enn.Sequential(enn.Linear(5, 16), enn.ReLU(), enn.Linear(16, 16), enn.GELU(), enn.Linear(16, 3))
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(7, 5)
    e_out, t_out = e_model(e_x), t_model(t_x)
    close(e_out, t_out)
    target = [0, 2, 1, 1, 0, 2, 2]
    enn.CrossEntropyLoss()(e_out, ember.tensor(target)).backward()
    tnn.CrossEntropyLoss()(t_out, torch.tensor(target)).backward()
    close(e_x.grad, t_x.grad)
    check_param_grads(e_model, t_model)


def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 6, 3, stride=2, bias=False), nn.BatchNorm2d(6), nn.ReLU(), nn.AvgPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4),
    )


def test_cnn_train_mode_updates_running_stats_like_torch(tmp_path):
    torch.manual_seed(1)
    t_model, e_model = _cnn(tnn), _cnn(enn)
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(4, 3, 12, 12)
    run_both(e_model.train(), t_model.train(), e_x, t_x)
    for name, buf in t_model.named_buffers():
        close(dict(e_model.named_buffers())[name], buf, atol=1e-6)
    # After the training step, eval mode uses the running statistics.
    e_x2, t_x2 = inputs(2, 3, 12, 12, seed=5)
    with torch.no_grad(), ember.no_grad():
        close(e_model.eval()(e_x2), t_model.eval()(t_x2))


def test_cnn_eval_mode_gradients(tmp_path):
    torch.manual_seed(2)
    t_model, e_model = _cnn(tnn), _cnn(enn)
    with torch.no_grad():  # non-trivial running statistics
        for module in t_model.modules():
            if isinstance(module, tnn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(3, 3, 12, 12)
    run_both(e_model.eval(), t_model.eval(), e_x, t_x)


def test_conv1d_batchnorm1d(tmp_path):
    torch.manual_seed(3)

    def build(nn):
        return nn.Sequential(nn.Conv1d(4, 6, 3, padding=2, dilation=2), nn.BatchNorm1d(6), nn.Tanh(),
                             nn.Conv1d(6, 4, 1, groups=2))

    t_model, e_model = build(tnn), build(enn)
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(3, 4, 10)
    run_both(e_model, t_model, e_x, t_x)


def test_embedding_layernorm_with_padding_idx(tmp_path):
    torch.manual_seed(4)

    class Model:
        @staticmethod
        def build(nn):
            return nn.Sequential(nn.Embedding(10, 6, padding_idx=0), nn.LayerNorm(6), nn.Linear(6, 2))

    t_model, e_model = Model.build(tnn), Model.build(enn)
    transfer(t_model, e_model, tmp_path)
    index = [[0, 3, 4], [9, 0, 3]]
    e_out, t_out = e_model(ember.tensor(index)), t_model(torch.tensor(index))
    close(e_out, t_out)
    e_out.sum().backward()
    t_out.sum().backward()
    check_param_grads(e_model, t_model)


def _recurrent_pair(kind: str, tmp_path, **kwargs):
    torch.manual_seed(5)
    t_model = getattr(tnn, kind)(**kwargs)
    e_model = getattr(enn, kind)(**kwargs)
    transfer(t_model, e_model, tmp_path)
    return e_model, t_model


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_two_layers_batch_first(tmp_path, bidirectional):
    e_model, t_model = _recurrent_pair("LSTM", tmp_path, input_size=4, hidden_size=6, num_layers=2,
                                       batch_first=True, bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    e_x, t_x = inputs(3, 5, 4)
    e_h0, t_h0 = inputs(2 * d, 3, 6, seed=2)
    e_c0, t_c0 = inputs(2 * d, 3, 6, seed=3)
    e_out, (e_h, e_c) = e_model(e_x, (e_h0, e_c0))
    t_out, (t_h, t_c) = t_model(t_x, (t_h0, t_c0))
    close(e_out, t_out)
    close(e_h, t_h)
    close(e_c, t_c)
    (e_out.sum() + (e_h * 2).sum() + (e_c * 3).sum()).backward()
    (t_out.sum() + (t_h * 2).sum() + (t_c * 3).sum()).backward()
    for e_value, t_value in ((e_x, t_x), (e_h0, t_h0), (e_c0, t_c0)):
        close(e_value.grad, t_value.grad)
    check_param_grads(e_model, t_model)


def test_gru_and_relu_rnn(tmp_path):
    e_model, t_model = _recurrent_pair("GRU", tmp_path, input_size=4, hidden_size=5, num_layers=2)
    e_x, t_x = inputs(6, 2, 4)
    e_out, e_h = e_model(e_x)
    t_out, t_h = t_model(t_x)
    close(e_out, t_out)
    close(e_h, t_h)
    (e_out.sum() + e_h.sum()).backward()
    (t_out.sum() + t_h.sum()).backward()
    close(e_x.grad, t_x.grad)
    check_param_grads(e_model, t_model)

    e_rnn, t_rnn = _recurrent_pair("RNN", tmp_path, input_size=4, hidden_size=5, nonlinearity="relu",
                                   bias=False, bidirectional=True)
    e_x, t_x = inputs(6, 4)  # unbatched input
    close(e_rnn(e_x)[0], t_rnn(t_x)[0])
    close(e_rnn(e_x)[1], t_rnn(t_x)[1])


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_varying_lengths_matches_packed_torch(tmp_path, bidirectional):
    e_model, t_model = _recurrent_pair("LSTM", tmp_path, input_size=3, hidden_size=4, num_layers=2,
                                       batch_first=True, bidirectional=bidirectional)
    lengths = [3, 6, 1, 4]
    e_x, t_x = inputs(4, 6, 3)
    t_packed = tnn.utils.rnn.pack_padded_sequence(t_x, torch.tensor(lengths), batch_first=True,
                                                  enforce_sorted=False)
    t_out_packed, (t_h, t_c) = t_model(t_packed)
    t_out, t_lengths = tnn.utils.rnn.pad_packed_sequence(t_out_packed, batch_first=True, total_length=6)

    # ember shortcut: padded batch + lengths=
    e_out, (e_h, e_c) = e_model(e_x, lengths=lengths)
    close(e_out, t_out)
    close(e_h, t_h)
    close(e_c, t_c)
    weights = np.random.default_rng(7).standard_normal(tuple(t_out.shape)).astype(np.float32)
    ((e_out * ember.tensor(weights)).sum() + e_h.sum()).backward()
    ((t_out * torch.tensor(weights)).sum() + t_h.sum()).backward()
    close(e_x.grad, t_x.grad)
    check_param_grads(e_model, t_model)

    # PyTorch's way in ember: PackedSequence in, PackedSequence out
    e_packed = pack_padded_sequence(e_x.detach(), lengths, batch_first=True, enforce_sorted=False)
    np.testing.assert_allclose(e_packed.data.numpy(), t_packed.data.detach().numpy())
    assert e_packed.batch_sizes.tolist() == t_packed.batch_sizes.tolist()
    e_out_packed, (e_h2, _) = e_model(e_packed)
    close(e_out_packed.data, t_out_packed.data)
    e_out2, e_lengths = pad_packed_sequence(e_out_packed, batch_first=True, total_length=6)
    close(e_out2, t_out)
    assert e_lengths.tolist() == t_lengths.tolist()
    close(e_h2, t_h)


def test_lstm_lengths_equal_per_sequence_runs(tmp_path):
    e_model, t_model = _recurrent_pair("GRU", tmp_path, input_size=3, hidden_size=4, batch_first=True)
    lengths = [2, 5, 3]
    e_x, t_x = inputs(3, 5, 3)
    e_out, e_h = e_model(e_x, lengths=lengths)
    for b, n in enumerate(lengths):
        t_out, t_h = t_model(t_x[b:b + 1, :n])
        close(e_out[b:b + 1, :n], t_out)
        close(e_h[:, b:b + 1], t_h)
        assert float(e_out[b, n:].abs().sum()) == 0.0


def _mha_pair(tmp_path, **kwargs):
    torch.manual_seed(6)
    t_model = tnn.MultiheadAttention(**kwargs)
    e_model = enn.MultiheadAttention(**kwargs)
    transfer(t_model, e_model, tmp_path)
    return e_model, t_model


@pytest.mark.parametrize("average", [True, False])
def test_multihead_attention_masks(tmp_path, average):
    e_model, t_model = _mha_pair(tmp_path, embed_dim=8, num_heads=2, batch_first=True)
    e_x, t_x = inputs(3, 5, 8)
    padding = np.array([[False] * 5, [False, False, False, True, True], [False] * 4 + [True]])
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    t_out, t_w = t_model(t_x, t_x, t_x, key_padding_mask=torch.tensor(padding), attn_mask=causal,
                         average_attn_weights=average)
    e_out, e_w = e_model(e_x, e_x, e_x, key_padding_mask=ember.tensor(padding), is_causal=True,
                         average_attn_weights=average)
    close(e_out, t_out)
    close(e_w, t_w)
    e_out.sum().backward()
    t_out.sum().backward()
    close(e_x.grad, t_x.grad)
    check_param_grads(e_model, t_model)


def test_multihead_attention_bool_mask_kdim_vdim_seq_first(tmp_path):
    e_model, t_model = _mha_pair(tmp_path, embed_dim=8, num_heads=4, kdim=6, vdim=5)
    e_q, t_q = inputs(4, 2, 8)
    e_k, t_k = inputs(7, 2, 6, seed=1)
    e_v, t_v = inputs(7, 2, 5, seed=2)
    mask = np.random.default_rng(3).random((4, 7)) < 0.3
    mask[:, 0] = False
    t_out, t_w = t_model(t_q, t_k, t_v, attn_mask=torch.tensor(mask))
    e_out, e_w = e_model(e_q, e_k, e_v, attn_mask=ember.tensor(mask))
    close(e_out, t_out)
    close(e_w, t_w)
    e_out.sum().backward()
    t_out.sum().backward()
    for e_value, t_value in ((e_q, t_q), (e_k, t_k), (e_v, t_v)):
        close(e_value.grad, t_value.grad)
    check_param_grads(e_model, t_model)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(tmp_path, norm_first):
    torch.manual_seed(7)
    kwargs = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first,
                  activation="gelu")
    t_model, e_model = tnn.TransformerEncoderLayer(**kwargs), enn.TransformerEncoderLayer(**kwargs)
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(2, 5, 8)
    run_both(e_model.train(), t_model.train(), e_x, t_x)
    with torch.no_grad(), ember.no_grad():
        close(e_model.eval()(e_x), t_model.eval()(t_x))


def test_transformer_encoder_with_masks(tmp_path):
    torch.manual_seed(8)
    layer_kwargs = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
    t_model = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(**layer_kwargs), 2, norm=tnn.LayerNorm(8),
                                     enable_nested_tensor=False)
    e_model = enn.TransformerEncoder(enn.TransformerEncoderLayer(**layer_kwargs), 2, norm=enn.LayerNorm(8))
    assert list(e_model.state_dict()) == list(t_model.state_dict())
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(5, 3, 8)  # sequence first
    padding = np.zeros((3, 5), dtype=bool)
    padding[1, 3:] = True
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    t_out = t_model(t_x, mask=causal, src_key_padding_mask=torch.tensor(padding), is_causal=True)
    e_out = e_model(e_x, src_key_padding_mask=ember.tensor(padding), is_causal=True)
    close(e_out, t_out)
    e_out.sum().backward()
    t_out.sum().backward()
    close(e_x.grad, t_x.grad)
    check_param_grads(e_model, t_model)


def test_full_transformer_encoder_decoder(tmp_path):
    torch.manual_seed(9)
    kwargs = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                  batch_first=True)
    t_model, e_model = tnn.Transformer(**kwargs), enn.Transformer(**kwargs)
    transfer(t_model, e_model, tmp_path)
    e_src, t_src = inputs(2, 6, 8)
    e_tgt, t_tgt = inputs(2, 4, 8, seed=1)
    padding = np.zeros((2, 6), dtype=bool)
    padding[0, 4:] = True
    t_mask = tnn.Transformer.generate_square_subsequent_mask(4)
    e_mask = enn.Transformer.generate_square_subsequent_mask(4)
    t_out = t_model(t_src, t_tgt, tgt_mask=t_mask, src_key_padding_mask=torch.tensor(padding),
                    memory_key_padding_mask=torch.tensor(padding))
    e_out = e_model(e_src, e_tgt, tgt_mask=e_mask, src_key_padding_mask=ember.tensor(padding),
                    memory_key_padding_mask=ember.tensor(padding))
    close(e_out, t_out)
    e_out.sum().backward()
    t_out.sum().backward()
    close(e_src.grad, t_src.grad)
    close(e_tgt.grad, t_tgt.grad)
    check_param_grads(e_model, t_model)


def test_decoder_style_and_activation_zoo(tmp_path):
    torch.manual_seed(10)

    def build(nn):
        return nn.Sequential(
            nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), nn.GroupNorm(2, 4), nn.PReLU(4),
            nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"), nn.ELU(0.5), nn.Dropout2d(0.3), nn.SiLU(),
            nn.Flatten(), nn.Unflatten(1, (4, 64)), nn.Softplus(beta=2), nn.Hardtanh(-0.5, 2.0), nn.Mish(),
            nn.LeakyReLU(0.1), nn.Tanh(), nn.Sigmoid(), nn.LogSoftmax(dim=-1),
        )

    t_model, e_model = build(tnn).eval(), build(enn).eval()
    transfer(t_model, e_model, tmp_path)
    e_x, t_x = inputs(2, 3, 4, 4)
    run_both(e_model, t_model, e_x, t_x)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_recurrent_cells(tmp_path, kind):
    torch.manual_seed(11)
    t_cell, e_cell = getattr(tnn, kind)(3, 5), getattr(enn, kind)(3, 5)
    transfer(t_cell, e_cell, tmp_path)
    e_x, t_x = inputs(4, 3)
    e_h, t_h = inputs(4, 5, seed=1)
    if kind == "LSTMCell":
        e_c, t_c = inputs(4, 5, seed=2)
        e_out, t_out = e_cell(e_x, (e_h, e_c)), t_cell(t_x, (t_h, t_c))
        close(e_out[1], t_out[1])
        e_out, t_out = e_out[0], t_out[0]
    else:
        e_out, t_out = e_cell(e_x, e_h), t_cell(t_x, t_h)
    close(e_out, t_out)
    e_out.sum().backward()
    t_out.sum().backward()
    close(e_x.grad, t_x.grad)
    close(e_h.grad, t_h.grad)
    check_param_grads(e_cell, t_cell)
    close(e_cell(e_x[0])[0] if kind == "LSTMCell" else e_cell(e_x[0]),
          t_cell(t_x[0])[0] if kind == "LSTMCell" else t_cell(t_x[0]))  # unbatched, zero state


def test_pad_and_pack_sequence_utilities():
    from ember.nn.utils.rnn import pack_sequence, pad_sequence

    arrays = [np.random.default_rng(i).standard_normal((n, 2)).astype(np.float32) for i, n in enumerate([2, 4, 3])]
    e_padded = pad_sequence([ember.tensor(a) for a in arrays], batch_first=True, padding_value=-1.0)
    t_padded = tnn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays], batch_first=True, padding_value=-1.0)
    np.testing.assert_array_equal(e_padded.numpy(), t_padded.numpy())
    e_packed = pack_sequence([ember.tensor(a) for a in arrays], enforce_sorted=False)
    t_packed = tnn.utils.rnn.pack_sequence([torch.tensor(a) for a in arrays], enforce_sorted=False)
    np.testing.assert_array_equal(e_packed.data.numpy(), t_packed.data.numpy())
    assert e_packed.sorted_indices.tolist() == t_packed.sorted_indices.tolist()
    assert e_packed.unsorted_indices.tolist() == t_packed.unsorted_indices.tolist()
    padded, lengths = pad_packed_sequence(e_packed, padding_value=7.0)
    t_unpacked, t_lengths = tnn.utils.rnn.pad_packed_sequence(t_packed, padding_value=7.0)
    np.testing.assert_array_equal(padded.numpy(), t_unpacked.numpy())
    assert lengths.tolist() == t_lengths.tolist()
    with pytest.raises(RuntimeError, match="enforce_sorted"):
        pack_padded_sequence(ember.zeros(4, 3, 2), [2, 4, 3])
