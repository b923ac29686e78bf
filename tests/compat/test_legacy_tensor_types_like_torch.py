"""PyTorch's legacy tensor types through ``Tensor.type``: ``x.type()`` names the type, ``x.type(torch.FloatTensor)``
(MorvanZhou's tutorials: ``torch.cat(...).type(torch.FloatTensor)``), ``x.type('torch.LongTensor')`` and
``torch.cuda.FloatTensor`` convert, as PyTorch's do."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]
SOURCES = {"float": [1.5, -2.0, 0.0], "int": [3, -1, 0], "bool": [True, False, True]}


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("name", NAMES)
def test_type_with_a_legacy_type_converts_like_torch(source, name):
    data = SOURCES[source]
    if name == "ByteTensor" and source != "bool":
        data = [abs(v) for v in data]
    ours = ember.tensor(data).type(getattr(ember, name))
    theirs = torch.tensor(data).type(getattr(torch, name))
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.tolist() == theirs.tolist()
    assert ours.type() == theirs.type() == f"torch.{name}"


@pytest.mark.parametrize("name", NAMES)
def test_type_with_a_name_and_typename_like_torch(name):
    ours, theirs = ember.tensor([1, 0]).type(f"torch.{name}"), torch.tensor([1, 0]).type(f"torch.{name}")
    assert ours.type() == theirs.type()
    assert ember.typename(ours) == torch.typename(theirs)


def test_same_type_returns_the_tensor_itself_as_torch():
    x, tx = ember.ones(2), torch.ones(2)
    assert (x.type(ember.FloatTensor) is x) == (tx.type(torch.FloatTensor) is tx) == True  # noqa: E712
    assert x.type(ember.float64).dtype == ember.float64


def test_type_keeps_gradients_flowing():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    x.type(ember.DoubleTensor).pow(2).sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    tx.type(torch.DoubleTensor).pow(2).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_an_unknown_name_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="invalid type: .torch.NoSuchTensor.*torch.FloatTensor"):
        ember.ones(1).type("torch.NoSuchTensor")
    with pytest.raises(ValueError):
        torch.ones(1).type("torch.NoSuchTensor")


def test_cuda_legacy_types_move_the_tensor_to_the_device():
    with ember.testing.standin_cuda():
        x = ember.tensor([1.0, 2.0]).type(ember.cuda.LongTensor)
        assert x.device.type == "cuda" and x.dtype == ember.int64
        assert x.type() == "torch.cuda.LongTensor"
        assert isinstance(x, ember.cuda.LongTensor) and not isinstance(x, ember.LongTensor)
        back = x.type("torch.FloatTensor")
        assert back.device.type == "cpu" and back.tolist() == [1.0, 2.0]
        made = ember.cuda.FloatTensor([1, 2])
        assert made.device.type == "cuda" and made.dtype == ember.float32
    assert repr(ember.cuda.FloatTensor) == repr(torch.cuda.FloatTensor) == "<class 'torch.cuda.FloatTensor'>"


def test_legacy_type_isinstance_and_constructors_like_torch():
    assert isinstance(ember.ones(2).long(), ember.LongTensor) == isinstance(torch.ones(2).long(), torch.LongTensor)
    assert isinstance(ember.ones(2), ember.LongTensor) == isinstance(torch.ones(2), torch.LongTensor)
    assert ember.FloatTensor(2, 3).shape == tuple(torch.FloatTensor(2, 3).shape)
    assert ember.LongTensor([1, 2]).tolist() == torch.LongTensor([1, 2]).tolist()


@pytest.mark.parametrize("default", ["float32", "float64"])
@pytest.mark.parametrize("spelling", ["class", "name"])
def test_type_with_the_tensor_class_gives_the_default_float_type_like_torch(default, spelling):
    # PyTorch-GAN's srgan: `imgs["lr"].type(Tensor)` with `Tensor = torch.Tensor` on CPU
    saved_ours, saved_theirs = ember.get_default_dtype(), torch.get_default_dtype()
    try:
        ember.set_default_dtype(getattr(ember, default))
        torch.set_default_dtype(getattr(torch, default))
        arg_ours = ember.Tensor if spelling == "class" else "torch.Tensor"
        arg_theirs = torch.Tensor if spelling == "class" else "torch.Tensor"
        ours, theirs = ember.tensor([1, 2]).type(arg_ours), torch.tensor([1, 2]).type(arg_theirs)
        assert ours.type() == theirs.type()
        assert ours.tolist() == theirs.tolist()
    finally:
        ember.set_default_dtype(saved_ours)
        torch.set_default_dtype(saved_theirs)
