"""``Tensor.view(dtype)`` reinterprets bits as PyTorch's does: shapes, values, shared memory, no gradient, errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

PAIRS = [("float32", "int32"), ("float32", "float16"), ("float32", "float64"), ("float64", "int64"),
         ("int16", "int8"), ("int64", "float32"), ("float32", "bfloat16"), ("uint8", "bool"), ("float32", "float32")]
VALUES = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 1e-40, 3.4e38, 7.0, 8.0, -1.0]


@pytest.mark.parametrize("source, target", PAIRS)
def test_bits_and_shapes_match_torch(source, target):
    base = np.array(VALUES[:8], dtype=np.float64).reshape(2, 4)
    if source.startswith(("int", "uint")):
        base = np.arange(-4, 4).reshape(2, 4) if not source.startswith("uint") else np.arange(8).reshape(2, 4) % 2
    theirs = torch.tensor(base).to(getattr(torch, source)).view(getattr(torch, target))
    ours = ember.tensor(base).to(getattr(ember, source)).view(getattr(ember, target))
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).replace("ember.", "") == str(theirs.dtype).replace("torch.", "")
    if target == "bfloat16":
        ours, theirs = ours.float(), theirs.float()
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_keyword_form_and_writes_are_shared():
    x = ember.zeros(4)
    bits = x.view(dtype=ember.int32)
    bits[0] = 1065353216  # the bits of 1.0f
    assert x.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_result_is_cut_from_autograd_like_torch():
    ours = ember.tensor([1.0, 2.0], requires_grad=True).view(ember.int32)
    theirs = torch.tensor([1.0, 2.0], requires_grad=True).view(torch.int32)
    assert ours.requires_grad is theirs.requires_grad is False
    assert ours.grad_fn is None


@pytest.mark.parametrize("make", [
    lambda t: t.tensor(1.0).view(t.int16),
    lambda t: t.arange(6.0).reshape(2, 3).t().view(t.float16),
    lambda t: t.arange(3, dtype=t.int16).view(t.int32),
])
def test_errors_match_torch(make):
    with pytest.raises(RuntimeError) as theirs:
        make(torch)
    with pytest.raises(RuntimeError) as ours:
        make(ember)
    # torch's message names the same rule (dim 0 / stride(-1) / size(-1) divisible); ember's adds the fix
    rule = str(theirs.value).split(" to view ")[0]
    assert rule in str(ours.value)


def test_shape_views_still_work():
    assert tuple(ember.arange(6).view(2, 3).shape) == (2, 3)
    assert tuple(ember.arange(6).view(-1).shape) == (6,)
