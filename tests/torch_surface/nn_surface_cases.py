"""Cases for the generated nn tests (modules and functional ops added for PyTorch's surface)."""
from __future__ import annotations

import numpy as np

R = np.random.default_rng(23)


def f(*shape):
    return R.standard_normal(shape)


def img(*shape):
    return R.standard_normal(shape)


# (module name, constructor args, constructor kwargs, forward inputs); float64 inputs, gradients checked
MODULES = [
    ("ConstantPad1d", (2, 1.5), {}, (f(2, 3, 4),)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, (f(2, 3, 4, 4),)),
    ("ConstantPad3d", (1, 0.5), {}, (f(1, 2, 3, 3, 3),)), ("ZeroPad1d", ((1, 2),), {}, (f(2, 3, 4),)),
    ("ZeroPad2d", (1,), {}, (f(1, 2, 3, 3),)), ("ZeroPad3d", ((1, 0, 0, 1, 1, 0),), {}, (f(1, 1, 2, 3, 3),)),
    ("ReflectionPad1d", (2,), {}, (f(2, 3, 5),)), ("ReflectionPad2d", ((1, 2, 2, 1),), {}, (f(1, 2, 4, 4),)),
    ("ReflectionPad3d", (1,), {}, (f(1, 1, 3, 3, 3),)), ("ReplicationPad1d", (3,), {}, (f(2, 3, 4),)),
    ("ReplicationPad2d", ((1, 0, 2, 3),), {}, (f(1, 2, 3, 3),)), ("ReplicationPad3d", (1,), {}, (f(1, 1, 2, 2, 2),)),
    ("CircularPad1d", (2,), {}, (f(2, 3, 4),)), ("CircularPad2d", (1,), {}, (f(1, 2, 3, 3),)),
    ("CircularPad3d", (1,), {}, (f(1, 1, 2, 3, 3),)),
    ("InstanceNorm1d", (3,), {}, (f(2, 3, 6),)), ("InstanceNorm2d", (3,), {"affine": True}, (f(2, 3, 4, 4),)),
    ("InstanceNorm3d", (2,), {}, (f(2, 2, 3, 3, 3),)), ("InstanceNorm2d", (3,), {}, (f(3, 4, 4),)),
    ("RMSNorm", (4,), {}, (f(2, 3, 4),)), ("RMSNorm", ((3, 4),), {"eps": 1e-3}, (f(2, 3, 4),)),
    ("LocalResponseNorm", (3,), {}, (f(2, 5, 4, 4),)), ("LocalResponseNorm", (2,), {"k": 2.0}, (f(2, 4, 6),)),
    ("ConvTranspose1d", (3, 4, 3), {}, (f(2, 3, 5),)),
    ("ConvTranspose1d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, (f(2, 4, 5),)),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, (f(1, 2, 3, 3, 3),)),
    ("ConvTranspose3d", (2, 2, 3), {"padding": 1, "dilation": 2, "bias": False}, (f(1, 2, 3, 3, 3),)),
    ("PixelShuffle", (2,), {}, (f(2, 8, 3, 3),)), ("PixelUnshuffle", (2,), {}, (f(2, 2, 4, 6),)),
    ("ChannelShuffle", (2,), {}, (f(2, 4, 3, 3),)),
    ("Fold", ((4, 5), (2, 2)), {}, (f(2, 12, 12),)), ("Fold", ((5, 5), 3), {"padding": 1, "stride": 2}, (f(1, 9, 9),)),
    ("Unfold", ((2, 3),), {"padding": 1}, (f(2, 3, 4, 4),)),
    ("LPPool1d", (2, 3), {}, (np.abs(f(2, 3, 7)) + 0.1,)), ("LPPool2d", (3, 2), {"stride": 1}, (np.abs(f(1, 2, 4, 4)) + 0.1,)),
    ("AdaptiveAvgPool3d", ((2, 3, 2),), {}, (f(1, 2, 5, 7, 4),)), ("AdaptiveMaxPool1d", (3,), {}, (f(2, 3, 8),)),
    ("AdaptiveMaxPool3d", (2,), {}, (f(1, 2, 5, 4, 3),)),
    ("Hardshrink", (), {}, (np.array([-1.0, -0.5, -0.2, 0.0, 0.3, 0.5, 2.0]),)), ("Softshrink", (0.3,), {}, (f(10),)),
    ("Softmax2d", (), {}, (f(2, 3, 2, 2),)), ("CosineSimilarity", (), {}, (f(3, 4), f(3, 4))),
    ("PairwiseDistance", (), {"p": 1.0}, (f(3, 4), f(3, 4))),
    ("GaussianNLLLoss", (), {}, (f(4, 2), f(4, 2), np.abs(f(4, 2)) + 0.1)),
    ("GaussianNLLLoss", (), {"full": True, "reduction": "sum"}, (f(4, 2), f(4, 2), np.abs(f(4, 1)) + 0.1)),
    ("MultiLabelSoftMarginLoss", (), {}, (f(3, 5), (R.random((3, 5)) > 0.5).astype(np.float64))),
    ("TripletMarginWithDistanceLoss", (), {"margin": 0.5, "swap": True}, (f(4, 3), f(4, 3), f(4, 3))),
    ("EmbeddingBag", (10, 3), {"mode": "sum"}, (R.integers(0, 10, (2, 4)),)),
    ("EmbeddingBag", (10, 3), {}, (R.integers(0, 10, (7,)), np.array([0, 2, 2, 5]))),
    ("EmbeddingBag", (10, 3), {"mode": "max"}, (R.integers(0, 10, (7,)), np.array([0, 3]))),
    ("EmbeddingBag", (10, 3), {"padding_idx": 2}, (np.array([[2, 1, 2], [3, 4, 2]]),)),
    ("NLLLoss2d", (), {}, (f(2, 3, 2, 2), R.integers(0, 3, (2, 2, 2)))),
]

# (functional name, args, kwargs, differentiable)
FUNCTIONAL = [
    ("hardshrink", (f(8),), {"lambd": 0.3}, True), ("softshrink", (f(8),), {}, True),
    ("rrelu", (f(6),), {}, True),
    ("lp_pool3d", (np.abs(f(1, 1, 4, 4, 4)) + 0.1, 2, 2), {}, True),
    ("max_unpool1d", (f(2, 3, 4), np.array([[[1, 2, 5, 7]] * 3] * 2), 2), {}, True),
    ("max_pool2d_with_indices", (f(1, 2, 4, 4), 2), {}, True),
    ("adaptive_max_pool2d_with_indices", (f(1, 2, 5, 5), 2), {}, True),
    ("conv_tbc", (f(5, 2, 3), f(3, 3, 4), f(4)), {"pad": 1}, True),
    ("pdist", (f(5, 3),), {}, True), ("pdist", (f(4, 3),), {"p": 1.0}, True),
    ("ctc_loss", (np.log(np.random.default_rng(1).dirichlet(np.ones(5), (6, 2))), np.array([[1, 2, 2], [3, 1, 0]]),
                  np.array([6, 5]), np.array([3, 2])), {}, True),
    ("ctc_loss", (np.log(np.random.default_rng(2).dirichlet(np.ones(4), (5, 2))), np.array([1, 2, 3]),
                  np.array([5, 4]), np.array([2, 1])), {"reduction": "sum"}, True),
    ("affine_grid", (f(2, 2, 3), (2, 3, 4, 5)), {"align_corners": False}, True),
    ("affine_grid", (f(1, 3, 4), (1, 1, 2, 3, 4)), {"align_corners": True}, True),
    ("local_response_norm", (f(2, 4, 5), 3), {}, True),
    ("embedding_bag", (np.array([1, 2, 4, 5, 4, 3]), f(10, 3), np.array([0, 3])),
     {"mode": "sum", "per_sample_weights": f(6)}, True),
]
