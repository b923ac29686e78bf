"""PyTorch's keyword names for sizes given as varargs: ``x.reshape(shape=...)`` (DiT's unpatchify),
``view(size=)``, ``expand(size=)``, ``permute(dims=)``, ``repeat(repeats=)``, ``Tensor.split(split_size=)``,
``torch.reshape(input=, shape=)``, ``torch.permute(input=, dims=)``; compared with torch 2.13."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "reshape": lambda T, x: x.reshape(shape=(4, 6)),
    "reshape list": lambda T, x: x.reshape(shape=[-1, 3]),
    "view": lambda T, x: x.view(size=(4, 6)),
    "view -1": lambda T, x: x.view(size=(-1,)),
    "expand": lambda T, x: x[:, :1].expand(size=(2, 5, 4)),
    "expand -1": lambda T, x: x[:, :1].expand(size=(3, -1, 2, 4)),
    "permute": lambda T, x: x.permute(dims=(2, 0, 1)),
    "repeat": lambda T, x: x.repeat(repeats=(1, 2, 1)),
    "split": lambda T, x: x.split(split_size=3, dim=2)[1],
    "split sections": lambda T, x: x.split(split_size=[1, 3], dim=2)[1],
    "torch.reshape": lambda T, x: T.reshape(input=x, shape=(6, 4)),
    "torch.permute": lambda T, x: T.permute(input=x, dims=(1, 2, 0)),
    "torch.split": lambda T, x: T.split(x, split_size_or_sections=2, dim=2)[1],
    "positional still": lambda T, x: x.reshape(4, 6).view(24).expand(2, 24).permute(1, 0).repeat(1, 2),
}


@pytest.mark.parametrize("name", CASES)
def test_keyword_forms_equal_torch(name):
    data = np.arange(24.0).reshape(2, 3, 4)
    want = CASES[name](torch, torch.tensor(data))
    x = ember.tensor(data, requires_grad=True)
    got = CASES[name](ember, x)
    np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
    got.sum().backward()  # still differentiable
    t = torch.tensor(data, requires_grad=True)
    CASES[name](torch, t).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("call", [
    lambda T, x: x.reshape(4, shape=(4, 6)),
    lambda T, x: x.view(24, size=(24,)),
    lambda T, x: x.permute(0, 1, 2, dims=(2, 1, 0)),
    lambda T, x: x.expand(2, 3, 4, size=(2, 3, 4)),
    lambda T, x: x.repeat(1, 1, 1, repeats=(1, 1, 1)),
])
def test_sizes_given_twice_are_refused_as_torch(call):
    with pytest.raises(TypeError):
        call(torch, torch.zeros(2, 3, 4))
    with pytest.raises(TypeError, match="both positionally"):
        call(ember, ember.zeros(2, 3, 4))


def test_split_needs_one_size():
    x = ember.zeros(4)
    with pytest.raises(TypeError, match="split_size"):
        x.split()
    with pytest.raises(TypeError, match="split_size"):
        x.split(2, split_size=2)


@pytest.mark.parametrize("call", [lambda x: x.tile(2), lambda x: x.tile(2, 3), lambda x: x.tile((2, 3)),
                                  lambda x: x.tile(dims=(2, 1, 2)), lambda x: x.tile([3])])
def test_tile_takes_an_int_varargs_or_a_sequence_like_torch(call):
    data = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(call(ember.tensor(data)).numpy(), call(torch.tensor(data)).numpy())


@pytest.mark.parametrize("call", [lambda T: T.tensor(5.0).repeat(-1), lambda T: T.ones(2).repeat(2, -1),
                                  lambda T: T.ones(2).tile(-1), lambda T: T.ones(2, 2).repeat(1, -3)])
def test_negative_repeat_counts_are_refused_like_torch(call):
    # vector-quantize-pytorch's LatentQuantize relies on it: tensor(levels).repeat(codebook_dim=-1) must raise
    with pytest.raises(RuntimeError, match="negative dimension"):
        call(torch)
    with pytest.raises(RuntimeError, match="negative dimension"):
        call(ember)
