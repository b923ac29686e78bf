"""NumPy functions and ufuncs called on a tensor give a tensor, as PyTorch's ``Tensor.__array_wrap__``.

Seen in udacity's denoising autoencoder: ``noisy = np.clip(images + noise, 0., 1.)`` then ``model(noisy)``:
PyTorch hands back a tensor, ember gave an ndarray and the convolution refused it.
"""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = {
    "clip": lambda x: np.clip(x, 0.25, 0.75),
    "clip_out_none": lambda x: np.clip(x, 0, 1, out=None),
    "transpose": lambda x: np.transpose(x, (1, 0)),
    "reshape": lambda x: np.reshape(x, -1),
    "round": lambda x: np.round(x, 1),
    "sqrt": np.sqrt,
    "exp": np.exp,
    "maximum": lambda x: np.maximum(x, 0.5),
    "abs": lambda x: np.abs(x - 0.5),
    "argmax": np.argmax,                       # a scalar result: a 0-d tensor
    "argmax_axis": lambda x: np.argmax(x, axis=1),
    "cumsum": np.cumsum,
    "isnan": np.isnan,                         # bool results become uint8, as PyTorch's wrap
    "matmul": lambda x: np.matmul(x, x.T),
    "take": lambda x: np.take(x, [0, 2]),
    "argsort": np.argsort,
    "power": lambda x: np.power(x, 2),
}


def _both(fn):
    values = np.random.default_rng(0).random((2, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch's own wrap warns under NumPy 2
        theirs = fn(torch.tensor(values))
    return fn(ember.tensor(values)), theirs


@pytest.mark.parametrize("name", list(CALLS))
def test_result_is_a_tensor_with_torchs_dtype_shape_and_values(name):
    ours, theirs = _both(CALLS[name])
    assert isinstance(theirs, torch.Tensor)
    assert isinstance(ours, ember.Tensor)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_clipped_batch_feeds_a_convolution():
    conv = ember.nn.Conv2d(1, 2, 3)
    noisy = np.clip(ember.rand(2, 1, 5, 5) + 0.5 * ember.randn(2, 1, 5, 5), 0.0, 1.0)
    assert conv(noisy).shape == (2, 2, 3, 3)


def test_results_numpy_leaves_as_arrays_stay_arrays():
    x = ember.rand(2, 3)
    for fn in (np.asarray, np.array, np.sort, lambda t: np.where(t > 0.5, t, 0), lambda t: np.stack([t, t])):
        assert type(fn(x)) is np.ndarray  # as in PyTorch: these go through __array__ only
    assert isinstance(np.trace(x), np.floating)
