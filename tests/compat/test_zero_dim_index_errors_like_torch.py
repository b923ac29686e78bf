"""Indexing a 0-d tensor with an int or a slice raises PyTorch's IndexError and its hint.

Programs written before PyTorch 0.4 read a loss as ``loss.data[0]`` (hunkim's PyTorchZeroToAll 12_3): PyTorch 2
raises "invalid index of a 0-dim tensor. Use `tensor.item()` ...", which names the fix; ember said only that the
array was 0-dimensional.
"""
import pytest

import ember

torch = pytest.importorskip("torch")


def _message(lib, action):
    with pytest.raises(IndexError) as info:
        action(lib)
    return str(info.value)


def _set_first(lib):
    t = lib.tensor(2.5)
    t[0] = 1.0


def _set_slice(lib):
    t = lib.tensor(2.5)
    t[0:1] = 1.0


@pytest.mark.parametrize("action", [
    lambda lib: lib.tensor(2.5)[0],
    lambda lib: lib.tensor([1.0, 2.0]).mean().data[0],   # the old idiom
    lambda lib: lib.tensor(3)[0:1],
    _set_first,
    _set_slice,
], ids=["get_int", "loss_data_0", "get_slice", "set_int", "set_slice"])
def test_message_equals_torchs(action):
    assert _message(ember, action) == _message(torch, action)


def test_other_indices_still_work_or_raise_index_error():
    t = ember.tensor(2.5)
    assert t[None].shape == (1,) and t[...].item() == 2.5 and t[()].item() == 2.5
    with pytest.raises(IndexError):
        t[..., 0]
