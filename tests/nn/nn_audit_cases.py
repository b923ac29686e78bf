"""Constructor arguments and forward inputs for the torch.nn audit (``nn_audit.py``).

Each entry of ``CASES`` is ``(class name, args, kwargs, inputs)``; ``inputs`` is a function of a NumPy
Generator returning the forward arguments (float64 arrays get ``requires_grad``; integer arrays stay integer),
or ``None`` for a structural check only (repr, parameters, buffers, state_dict, initial values).
Classes of torch.nn that no entry names are still audited: ``nn_audit.auto_cases`` builds them from their
required arguments (``REQUIRED``) with structural checks only.
"""
from __future__ import annotations

import numpy as np


class Const(np.ndarray):
    """A float64 forward argument that gets no gradient (a loss target: torch refuses some targets' grads)."""


def const(a):
    return np.asarray(a, dtype=np.float64).view(Const)


def f(*shape):
    return lambda r: (r.standard_normal(shape),)


def pos(*shape):
    return lambda r: (np.abs(r.standard_normal(shape)) + 0.1,)


def two(*shape):
    return lambda r: (r.standard_normal(shape), r.standard_normal(shape))


def three(*shape):
    return lambda r: (r.standard_normal(shape), r.standard_normal(shape), r.standard_normal(shape))


def cls_target(n, c, *extra):
    return lambda r: (r.standard_normal((n, c) + extra), r.integers(0, c, (n,) + extra))


def prob_target(*shape):
    return lambda r: (1 / (1 + np.exp(-r.standard_normal(shape))), (r.random(shape) > 0.5).astype(np.float64))


def logit_target(*shape):
    return lambda r: (r.standard_normal(shape), (r.random(shape) > 0.5).astype(np.float64))


def sign_target(*shape):
    return lambda r: (r.standard_normal(shape), const(np.where(r.random(shape) > 0.5, 1.0, -1.0)))


def ints(high, *shape):
    return lambda r: (r.integers(0, high, shape),)


def _ctc(r):
    logp = r.standard_normal((6, 2, 4))
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    return (logp, r.integers(1, 4, (2, 3)), np.array([6, 5]), np.array([3, 2]))


def _multilabel(r):
    return (r.standard_normal((3, 4)), np.array([[3, 0, -1, 1], [1, 2, 3, -1], [0, -1, 2, 1]]))


def _gauss(r):
    return (r.standard_normal((4, 2)), r.standard_normal((4, 2)), np.abs(r.standard_normal((4, 2))) + 0.1)


def _kl(r):
    a = r.standard_normal((3, 5))
    b = r.random((3, 5)) + 0.05
    return (a - np.log(np.exp(a).sum(-1, keepdims=True)), b / b.sum(-1, keepdims=True))


def _cos_emb(r):
    return (r.standard_normal((4, 3)), r.standard_normal((4, 3)), np.array([1.0, -1.0, 1.0, -1.0]))


def _margin_rank(r):
    return (r.standard_normal(5), r.standard_normal(5), np.where(r.random(5) > 0.5, 1.0, -1.0))


def _poisson(r):
    return (r.standard_normal((3, 4)), r.poisson(2.0, (3, 4)).astype(np.float64))


def _mha(r):
    q = r.standard_normal((3, 2, 4))
    return (q, q.copy(), q.copy())


def _mha_batch(r):
    return (r.standard_normal((2, 3, 4)), r.standard_normal((2, 5, 4)), r.standard_normal((2, 5, 4)))


def _seq2seq(r):
    return (r.standard_normal((5, 2, 8)), r.standard_normal((3, 2, 8)))


def _adaptive_lsm(r):
    return (r.standard_normal((4, 8)), np.array([0, 5, 9, 12]))


def _embbag_offsets(r):
    return (r.integers(0, 10, (7,)), np.array([0, 2, 2, 5]))


def _lce(r):
    return (r.standard_normal((4, 6)), r.standard_normal((5, 6)), r.integers(0, 5, (4,)))


# Every class, a default configuration and typical non-default ones.
CASES = [
    # linear
    ("Identity", (), {}, f(2, 3)),
    ("Linear", (4, 3), {}, f(2, 4)), ("Linear", (4, 3), {"bias": False}, f(5, 2, 4)),
    ("Bilinear", (3, 4, 2), {}, lambda r: (r.standard_normal((5, 3)), r.standard_normal((5, 4)))),
    ("Bilinear", (3, 4, 2), {"bias": False}, lambda r: (r.standard_normal((5, 3)), r.standard_normal((5, 4)))),
    ("LazyLinear", (3,), {}, None),
    ("modules.linear.NonDynamicallyQuantizableLinear", (4, 3), {}, f(2, 4)),  # (not exported by torch.nn)
    # convolutions
    ("Conv1d", (4, 6, 3), {}, f(2, 4, 9)),
    ("Conv1d", (4, 6, 3), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2, "bias": False}, f(2, 4, 9)),
    ("Conv1d", (3, 2, 3), {"padding": "same", "padding_mode": "reflect"}, f(2, 3, 7)),
    ("Conv2d", (3, 4, 3), {}, f(2, 3, 6, 6)),
    ("Conv2d", (4, 4, (3, 2)), {"stride": (2, 1), "padding": (1, 0), "groups": 4}, f(1, 4, 6, 5)),
    ("Conv2d", (3, 2, 3), {"padding": 1, "padding_mode": "circular", "bias": False}, f(1, 3, 5, 5)),
    ("Conv2d", (3, 2, 3), {"padding": 2, "padding_mode": "replicate"}, f(1, 3, 5, 5)),
    ("Conv2d", (2, 2, 3), {"padding": "valid", "dilation": 2}, f(1, 2, 7, 7)),
    ("Conv3d", (2, 3, 2), {}, f(1, 2, 4, 4, 4)),
    ("Conv3d", (2, 4, 3), {"stride": 2, "padding": 1, "groups": 2, "padding_mode": "zeros"}, f(1, 2, 5, 5, 5)),
    ("ConvTranspose1d", (3, 4, 3), {}, f(2, 3, 5)),
    ("ConvTranspose1d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, f(2, 4, 5)),
    ("ConvTranspose2d", (3, 2, 3), {}, f(1, 3, 4, 4)),
    ("ConvTranspose2d", (2, 4, (3, 2)), {"stride": 2, "dilation": 2, "bias": False}, f(1, 2, 3, 4)),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, f(1, 2, 3, 3, 3)),
    ("LazyConv1d", (4, 3), {}, None), ("LazyConv2d", (4, 3), {"bias": False}, None), ("LazyConv3d", (4, 3), {}, None),
    ("LazyConvTranspose1d", (4, 3), {}, None), ("LazyConvTranspose2d", (4, 3), {}, None),
    ("LazyConvTranspose3d", (4, 3), {}, None),
    # normalization
    ("BatchNorm1d", (3,), {}, f(4, 3)), ("BatchNorm1d", (3,), {"affine": False}, f(4, 3, 5)),
    ("BatchNorm1d", (3,), {"track_running_stats": False}, f(4, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, f(4, 3)),
    ("BatchNorm2d", (3,), {}, f(2, 3, 4, 4)), ("BatchNorm2d", (3,), {"eps": 1e-3, "momentum": 0.3}, f(2, 3, 4, 4)),
    ("BatchNorm2d", (3,), {"affine": False, "track_running_stats": False}, f(2, 3, 4, 4)),
    ("BatchNorm3d", (2,), {}, f(2, 2, 3, 3, 3)),
    ("SyncBatchNorm", (3,), {}, None),
    ("LazyBatchNorm1d", (), {}, None), ("LazyBatchNorm2d", (), {"affine": False}, None), ("LazyBatchNorm3d", (), {}, None),
    ("InstanceNorm1d", (3,), {}, f(2, 3, 6)), ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True},
                                                f(2, 3, 6)),
    ("InstanceNorm2d", (3,), {"affine": True}, f(2, 3, 4, 4)),
    ("InstanceNorm2d", (3,), {"track_running_stats": True}, f(2, 3, 4, 4)),
    ("InstanceNorm3d", (2,), {}, f(2, 2, 3, 3, 3)),
    ("LazyInstanceNorm1d", (), {}, None), ("LazyInstanceNorm2d", (), {"affine": True}, None),
    ("LazyInstanceNorm3d", (), {}, None),
    ("LayerNorm", (4,), {}, f(2, 3, 4)), ("LayerNorm", ((3, 4),), {"elementwise_affine": False}, f(2, 3, 4)),
    ("LayerNorm", (4,), {"bias": False, "eps": 1e-3}, f(2, 4)),
    ("GroupNorm", (2, 4), {}, f(2, 4, 3)), ("GroupNorm", (2, 4), {"affine": False}, f(2, 4, 3, 3)),
    ("RMSNorm", (4,), {}, f(2, 3, 4)), ("RMSNorm", ((3, 4),), {"eps": 1e-3, "elementwise_affine": False}, f(2, 3, 4)),
    ("LocalResponseNorm", (3,), {}, f(2, 5, 4, 4)), ("CrossMapLRN2d", (3,), {}, f(2, 5, 4, 4)),
    # activations
    ("ReLU", (), {}, f(10)), ("ReLU", (), {"inplace": True}, None), ("ReLU6", (), {}, f(10)),
    ("ELU", (), {}, f(10)), ("ELU", (), {"alpha": 0.5}, f(10)), ("CELU", (), {"alpha": 2.0}, f(10)),
    ("SELU", (), {}, f(10)), ("GELU", (), {}, f(10)), ("GELU", (), {"approximate": "tanh"}, f(10)),
    ("GLU", (), {}, f(3, 4)), ("GLU", (0,), {}, f(4, 3)),
    ("Hardshrink", (), {}, f(10)), ("Softshrink", (0.3,), {}, f(10)), ("Tanhshrink", (), {}, f(10)),
    ("Hardsigmoid", (), {}, f(10)), ("Hardswish", (), {}, f(10)), ("Hardtanh", (), {}, f(10)),
    ("Hardtanh", (-0.5, 0.5), {}, f(10)), ("LeakyReLU", (), {}, f(10)), ("LeakyReLU", (0.2,), {}, f(10)),
    ("LogSigmoid", (), {}, f(10)), ("Mish", (), {}, f(10)), ("SiLU", (), {}, f(10)), ("Sigmoid", (), {}, f(10)),
    ("Tanh", (), {}, f(10)), ("Softsign", (), {}, f(10)), ("Softplus", (), {}, f(10)),
    ("Softplus", (), {"beta": 2.0, "threshold": 1.0}, f(10)), ("Threshold", (0.1, 20.0), {}, f(10)),
    ("PReLU", (), {}, f(2, 3)), ("PReLU", (3,), {"init": 0.1}, f(2, 3, 4)),
    ("RReLU", (), {}, f(20)), ("RReLU", (0.1, 0.3), {}, f(20)),
    ("Softmax", (1,), {}, f(2, 5)), ("Softmax", (), {}, None), ("Softmin", (0,), {}, f(3, 4)),
    ("LogSoftmax", (-1,), {}, f(2, 5)), ("Softmax2d", (), {}, f(2, 3, 2, 2)),
    ("MultiheadAttention", (4, 2), {}, _mha),
    ("MultiheadAttention", (4, 2), {"bias": False, "add_bias_kv": True, "add_zero_attn": True}, _mha),
    ("MultiheadAttention", (4, 1), {"batch_first": True, "kdim": 4, "vdim": 4}, _mha_batch),
    ("MultiheadAttention", (4, 2), {"kdim": 3, "vdim": 5}, None),
    # dropout (train mode draws: ember's RNG is torch's)
    ("Dropout", (), {}, f(4, 5)), ("Dropout", (0.3,), {}, f(4, 5)), ("Dropout1d", (), {}, f(2, 3, 5)),
    ("Dropout2d", (0.4,), {}, f(2, 3, 2, 2)), ("Dropout3d", (), {}, f(2, 3, 2, 2, 2)), ("AlphaDropout", (), {}, f(4, 5)),
    ("FeatureAlphaDropout", (), {}, f(2, 3, 2, 2)),
    # pooling
    ("MaxPool1d", (2,), {}, f(2, 3, 8)), ("MaxPool1d", (3, 2, 1), {"dilation": 2, "ceil_mode": True}, f(2, 3, 9)),
    ("MaxPool2d", (2,), {}, f(1, 2, 6, 6)), ("MaxPool2d", ((3, 2),), {"stride": 1, "padding": 1}, f(1, 2, 5, 5)),
    ("MaxPool2d", (2,), {"return_indices": True}, f(1, 2, 4, 4)), ("MaxPool3d", (2,), {}, f(1, 2, 4, 4, 4)),
    ("AvgPool1d", (3,), {}, f(2, 3, 9)), ("AvgPool1d", (3, 2, 1), {"count_include_pad": False, "ceil_mode": True},
                                             f(2, 3, 8)),
    ("AvgPool2d", (2,), {}, f(1, 2, 6, 6)), ("AvgPool2d", (3, 2, 1), {"divisor_override": 2}, f(1, 2, 6, 6)),
    ("AvgPool3d", (2,), {}, f(1, 2, 4, 4, 4)),
    ("LPPool1d", (2, 3), {}, pos(2, 3, 7)), ("LPPool2d", (3, 2), {"stride": 1}, pos(1, 2, 4, 4)),
    ("LPPool3d", (2, 2), {}, pos(1, 1, 4, 4, 4)),
    ("AdaptiveAvgPool1d", (3,), {}, f(2, 3, 8)), ("AdaptiveAvgPool2d", ((2, None),), {}, f(1, 2, 5, 7)),
    ("AdaptiveAvgPool3d", (2,), {}, f(1, 2, 5, 4, 3)), ("AdaptiveMaxPool1d", (3,), {}, f(2, 3, 8)),
    ("AdaptiveMaxPool2d", (2,), {"return_indices": True}, f(1, 2, 5, 5)), ("AdaptiveMaxPool3d", (2,), {}, f(1, 2, 5, 4, 3)),
    ("MaxUnpool1d", (2,), {}, None), ("MaxUnpool2d", (2,), {}, None), ("MaxUnpool3d", (2,), {}, None),
    ("FractionalMaxPool2d", (2,), {"output_size": 3}, f(1, 2, 6, 6)),
    ("FractionalMaxPool3d", (2,), {"output_ratio": 0.5}, f(1, 1, 6, 6, 6)),
    # padding, shape
    ("ConstantPad1d", (2, 1.5), {}, f(2, 3, 4)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, f(2, 3, 4, 4)),
    ("ConstantPad3d", (1, 0.5), {}, f(1, 2, 3, 3, 3)), ("ZeroPad1d", ((1, 2),), {}, f(2, 3, 4)),
    ("ZeroPad2d", (1,), {}, f(1, 2, 3, 3)), ("ZeroPad3d", ((1, 0, 0, 1, 1, 0),), {}, f(1, 1, 2, 3, 3)),
    ("ReflectionPad1d", (2,), {}, f(2, 3, 5)), ("ReflectionPad2d", ((1, 2, 2, 1),), {}, f(1, 2, 4, 4)),
    ("ReflectionPad3d", (1,), {}, f(1, 1, 3, 3, 3)), ("ReplicationPad1d", (3,), {}, f(2, 3, 4)),
    ("ReplicationPad2d", ((1, 0, 2, 3),), {}, f(1, 2, 3, 3)), ("ReplicationPad3d", (1,), {}, f(1, 1, 2, 2, 2)),
    ("CircularPad1d", (2,), {}, f(2, 3, 4)), ("CircularPad2d", (1,), {}, f(1, 2, 3, 3)),
    ("CircularPad3d", (1,), {}, f(1, 1, 2, 3, 3)),
    ("Flatten", (), {}, f(2, 3, 4)), ("Flatten", (0, -2), {}, f(2, 3, 4)), ("Unflatten", (1, (2, 3)), {}, f(4, 6)),
    ("Fold", ((4, 5), (2, 2)), {}, f(2, 12, 12)), ("Unfold", ((2, 3),), {"padding": 1, "stride": 2}, f(2, 3, 4, 4)),
    ("PixelShuffle", (2,), {}, f(2, 8, 3, 3)), ("PixelUnshuffle", (2,), {}, f(2, 2, 4, 6)),
    ("ChannelShuffle", (2,), {}, f(2, 4, 3, 3)),
    ("Upsample", (), {"scale_factor": 2}, f(1, 2, 3, 3)),
    ("Upsample", (), {"size": (5, 4), "mode": "bilinear", "align_corners": True}, f(1, 2, 3, 3)),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bicubic"}, f(1, 1, 4, 4)),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, f(1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), {"size": 5}, f(1, 2, 3, 3)),
    # distance
    ("CosineSimilarity", (), {}, two(3, 4)), ("CosineSimilarity", (0, 1e-6), {}, two(3, 4)),
    ("PairwiseDistance", (), {}, two(3, 4)), ("PairwiseDistance", (1.0,), {"keepdim": True}, two(3, 4)),
    # sparse
    ("Embedding", (10, 3), {}, ints(10, 2, 4)), ("Embedding", (10, 3), {"padding_idx": 0}, ints(10, 2, 4)),
    ("Embedding", (10, 3), {"max_norm": 1.0, "scale_grad_by_freq": True}, ints(10, 5)),
    ("Embedding", (10, 3), {"sparse": True}, None),
    ("EmbeddingBag", (10, 3), {}, _embbag_offsets), ("EmbeddingBag", (10, 3), {"mode": "sum"}, ints(10, 2, 4)),
    ("EmbeddingBag", (10, 3), {"mode": "max", "include_last_offset": True}, _embbag_offsets),
    # recurrent
    ("RNN", (4, 3), {}, f(5, 2, 4)), ("RNN", (4, 3, 2), {"nonlinearity": "relu", "bias": False}, f(5, 2, 4)),
    ("RNN", (4, 3), {"batch_first": True, "bidirectional": True}, f(2, 5, 4)),
    ("LSTM", (4, 3), {}, f(5, 2, 4)), ("LSTM", (4, 3, 2), {"batch_first": True, "dropout": 0.0}, f(2, 5, 4)),
    ("LSTM", (4, 3), {"proj_size": 2, "bidirectional": True}, f(5, 2, 4)),
    ("GRU", (4, 3), {}, f(5, 2, 4)), ("GRU", (4, 3, 2), {"bidirectional": True, "bias": False}, f(5, 4)),
    ("RNNCell", (4, 3), {}, f(2, 4)), ("RNNCell", (4, 3), {"bias": False, "nonlinearity": "relu"}, f(2, 4)),
    ("LSTMCell", (4, 3), {}, f(2, 4)), ("GRUCell", (4, 3), {}, f(2, 4)), ("GRUCell", (4, 3), {"bias": False}, f(4)),
    # transformer
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0}, f(5, 2, 8)),
    ("TransformerEncoderLayer", (8, 2), {"dim_feedforward": 16, "norm_first": True, "batch_first": True,
                                         "activation": "gelu", "bias": False}, f(2, 5, 8)),
    ("TransformerDecoderLayer", (8, 2), {"dim_feedforward": 16, "dropout": 0.0}, _seq2seq),
    ("TransformerDecoderLayer", (8, 2), {"dim_feedforward": 16, "norm_first": True, "layer_norm_eps": 1e-3}, None),
    ("Transformer", (), {"d_model": 8, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
                         "dim_feedforward": 16, "dropout": 0.0}, lambda r: (r.standard_normal((5, 2, 8)),
                                                                            r.standard_normal((3, 2, 8)))),
    # losses
    ("L1Loss", (), {}, two(3, 4)), ("L1Loss", (), {"reduction": "sum"}, two(3, 4)),
    ("MSELoss", (), {}, two(3, 4)), ("MSELoss", (), {"reduction": "none"}, two(3, 4)),
    ("SmoothL1Loss", (), {"beta": 0.5}, two(3, 4)), ("HuberLoss", (), {"delta": 0.5}, two(3, 4)),
    ("SoftMarginLoss", (), {}, sign_target(3, 4)), ("BCELoss", (), {}, prob_target(3, 4)),
    ("BCEWithLogitsLoss", (), {}, logit_target(3, 4)),
    ("CrossEntropyLoss", (), {}, cls_target(4, 5)),
    ("CrossEntropyLoss", (), {"label_smoothing": 0.1, "ignore_index": 2}, cls_target(4, 5, 3)),
    ("NLLLoss", (), {}, cls_target(4, 5)), ("NLLLoss", (), {"reduction": "sum"}, cls_target(4, 5)),
    ("NLLLoss2d", (), {}, cls_target(2, 3, 2, 2)),
    ("KLDivLoss", (), {"reduction": "batchmean"}, _kl), ("KLDivLoss", (), {"log_target": True}, two(3, 4)),
    ("PoissonNLLLoss", (), {}, _poisson), ("PoissonNLLLoss", (), {"log_input": False, "full": True}, None),
    ("GaussianNLLLoss", (), {}, _gauss), ("HingeEmbeddingLoss", (), {}, sign_target(3, 4)),
    ("CosineEmbeddingLoss", (), {"margin": 0.1}, _cos_emb), ("MarginRankingLoss", (), {"margin": 0.2}, _margin_rank),
    ("MultiLabelMarginLoss", (), {}, _multilabel), ("MultiLabelSoftMarginLoss", (), {}, logit_target(3, 5)),
    ("MultiMarginLoss", (), {}, cls_target(4, 5)), ("MultiMarginLoss", (), {"p": 2, "margin": 0.5}, cls_target(4, 5)),
    ("TripletMarginLoss", (), {}, three(4, 3)), ("TripletMarginLoss", (), {"p": 1.0, "swap": True}, three(4, 3)),
    ("TripletMarginWithDistanceLoss", (), {"margin": 0.5}, three(4, 3)),
    ("CTCLoss", (), {}, _ctc), ("CTCLoss", (), {"blank": 0, "zero_infinity": True, "reduction": "sum"}, _ctc),
    ("AdaptiveLogSoftmaxWithLoss", (8, 16, [4, 10]), {}, _adaptive_lsm),
    ("AdaptiveLogSoftmaxWithLoss", (8, 16, [4, 10]), {"div_value": 2.0, "head_bias": True}, _adaptive_lsm),
    ("LinearCrossEntropyLoss", (), {}, None),
    # factory keywords and other non-defaults
    ("Linear", (4, 3), {"dtype": "float64"}, f(2, 4)), ("Conv2d", (2, 2, 1), {"dtype": "float64", "device": "cpu"}, None),
    ("BatchNorm1d", (3,), {"dtype": "float64"}, None), ("LayerNorm", (4,), {"dtype": "float64"}, None),
    ("Embedding", (10, 3), {"padding_idx": -1, "norm_type": 1.0, "max_norm": 2.0}, ints(10, 2, 3)),
    ("EmbeddingBag", (10, 3), {"mode": "mean", "padding_idx": 0}, ints(10, 2, 4)),
    ("GroupNorm", (1, 4), {"eps": 1e-3}, f(2, 4, 5)), ("GroupNorm", (4, 4), {}, f(2, 4, 5)),
    ("InstanceNorm1d", (3,), {"affine": True, "bias": False}, None),
    ("BatchNorm2d", (3,), {"bias": False}, f(2, 3, 2, 2)),
    ("ConvTranspose2d", (2, 2, 3), {"padding_mode": "zeros", "groups": 2, "output_padding": 1, "stride": 2},
     f(1, 2, 3, 3)),
    ("GRU", (4, 3), {"batch_first": True, "num_layers": 2, "dropout": 0.5}, f(2, 5, 4)),
    ("LSTM", (4, 3), {"num_layers": 2, "dropout": 0.5}, f(5, 2, 4)),
    ("MultiheadAttention", (6, 3), {"dropout": 0.2, "add_bias_kv": True}, lambda r: (
        r.standard_normal((3, 2, 6)), r.standard_normal((4, 2, 6)), r.standard_normal((4, 2, 6)))),
    ("Dropout", (0.5,), {"inplace": True}, None), ("Softmax", (-1,), {}, f(2, 3, 4)),
    ("Upsample", (), {"scale_factor": (2, 1), "mode": "nearest-exact"}, f(1, 2, 3, 3)),
    ("Upsample", (), {"size": 6, "mode": "linear", "align_corners": False}, f(1, 2, 3)),
    # containers
    ("TransformerEncoder", lambda L: (L.nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2),
     {"enable_nested_tensor": False}, f(5, 2, 8)),
    ("TransformerEncoder", lambda L: (L.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2),
     {"norm": None, "enable_nested_tensor": False}, None),
    ("TransformerDecoder", lambda L: (L.nn.TransformerDecoderLayer(8, 2, 16, 0.0), 2, L.nn.LayerNorm(8)), {},
     _seq2seq),
    ("DataParallel", lambda L: (L.nn.Linear(4, 3),), {}, f(2, 4)),
    ("Sequential", lambda L: (L.nn.Linear(4, 3), L.nn.BatchNorm1d(3), L.nn.ReLU()), {}, f(5, 4)),
    ("ModuleList", lambda L: ([L.nn.Linear(2, 2), L.nn.Linear(2, 2)],), {}, None),
    ("ModuleDict", lambda L: ({"a": L.nn.Linear(2, 2), "b": L.nn.Conv1d(2, 2, 1)},), {}, None),
    ("ParameterList", lambda L: ([L.nn.Parameter(L.ones(2)), L.nn.Parameter(L.zeros(3), requires_grad=False)],), {},
     None),
    ("ParameterDict", lambda L: ({"w": L.nn.Parameter(L.ones(2, 2))},), {}, None),
    ("Sequential", (), {}, None), ("ModuleList", (), {}, None), ("ModuleDict", (), {}, None),
    ("ParameterList", (), {}, None), ("ParameterDict", (), {}, None),
]

# Values for required constructor parameters of classes no entry names (``nn_audit.auto_cases``).
REQUIRED = {"kernel_size": 3, "padding": 1, "normalized_shape": 4, "num_features": 4, "in_features": 4,
            "out_features": 3, "in_channels": 4, "out_channels": 2, "embed_dim": 4, "num_heads": 2, "d_model": 8,
            "nhead": 2, "input_size": 4, "hidden_size": 3, "num_embeddings": 10, "embedding_dim": 3,
            "output_size": 2, "size": 2, "upscale_factor": 2, "downscale_factor": 2, "num_groups": 2,
            "num_channels": 4, "dim": 1, "in1_features": 2, "in2_features": 3, "value": 1.5, "groups": 2,
            "lambd": 0.5, "block_size": 2, "n_classes": 10, "cutoffs": [4, 8], "unflattened_size": (2, 2),
            "norm_type": 2.0, "output_ratio": 0.5, "alpha": 1.0}
