"""``torch.Tensor(size)`` / ``torch.FloatTensor(x.size())`` read a torch.Size as a shape; with no argument they make a
(0,)-shaped tensor, as PyTorch's legacy constructors.

L1aoXingyu's pytorch-beginner VAE draws noise with ``torch.FloatTensor(std.size()).normal_()`` (ember made a
2-element tensor of the sizes) and its seq-lstm concatenates onto ``torch.FloatTensor()`` (ember made a 0-d tensor).
"""
import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = ["lib.FloatTensor(x.size())", "lib.Tensor(x.size())", "lib.LongTensor(x.size())", "lib.Tensor(x.shape)",
         "lib.FloatTensor(lib.Size([2]))", "lib.FloatTensor([3, 4])", "lib.Tensor((3, 4))", "lib.FloatTensor((2,))",
         "lib.Tensor(3, 4)", "lib.FloatTensor()", "lib.Tensor()", "lib.LongTensor()",
         "lib.cat((lib.FloatTensor(), lib.ones(2, 3)), 0)", "lib.FloatTensor(x.size()).normal_() * lib.ones(3, 4)"]


def _made(lib, call):
    x = lib.zeros(3, 4)  # noqa: F841 (read by the call)
    result = eval(call)
    return tuple(result.shape), str(result.dtype).split(".")[-1]


@pytest.mark.parametrize("call", CALLS)
def test_shape_and_dtype_equal_torchs(call):
    assert _made(ember, call) == _made(torch, call)
