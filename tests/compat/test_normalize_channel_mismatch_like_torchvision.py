"""transforms.Normalize with statistics for another number of channels raises RuntimeError, as torchvision's.

znxlwm's pytorch-generative-model-collections normalizes 1-channel MNIST with three means: torchvision's in-place
broadcast raises RuntimeError there; ember raised ValueError, so a program catching the class saw another one.
"""
import pytest

import ember
from ember.vision import transforms


@pytest.mark.parametrize("shape, stats", [((1, 4, 4), (0.5, 0.5, 0.5)), ((3, 4, 4), (0.5, 0.5)),
                                          ((2, 4, 4), (0.5, 0.5, 0.5))])
def test_mismatch_is_a_runtime_error(shape, stats):
    with pytest.raises(RuntimeError, match="channel"):
        transforms.Normalize(stats, stats)(ember.rand(*shape))


def test_one_value_broadcasts_over_channels():
    out = transforms.Normalize((0.5,), (0.5,))(ember.full((3, 2, 2), 1.0))
    assert out.shape == (3, 2, 2) and float(out.max()) == 1.0 and float(out.min()) == 1.0
