"""cross_entropy / nll_loss refuse a target of the wrong shape with PyTorch's exception class.

hunkim's 14_1_seq2seq passes a 0-d target with a (1, C) input: PyTorch raises ValueError (a 0-d target counts as
batch size 0), ember raised RuntimeError.
"""
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

CASES = [((1, 128), ()), ((2, 3), ()), ((2, 3, 4), ()), ((2, 3, 4), (2,)), ((2, 3), (2, 1)), ((2, 3), (3,))]


def _raised(fn, lib, input_shape, target_shape):
    try:
        fn(lib.zeros(input_shape), lib.zeros(target_shape, dtype=lib.int64))
    except Exception as error:  # noqa: BLE001 (the class is what is compared)
        return type(error)
    return None


@pytest.mark.parametrize("input_shape, target_shape", CASES)
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_exception_class_equals_torchs(name, input_shape, target_shape):
    theirs = _raised(getattr(TF, name), torch, input_shape, target_shape)
    ours = _raised(getattr(EF, name), ember, input_shape, target_shape)
    assert theirs is not None and ours is theirs
