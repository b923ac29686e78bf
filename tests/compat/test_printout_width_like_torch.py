"""A float tensor's printout measures its column width on nonzero finite elements only, as PyTorch's.

Seen in udacity's "Neural Networks in PyTorch" notebook: `model.fc1.bias.data.fill_(0)` shows 128 zeros,
24 to a row in PyTorch (ember wrapped at 18). Zeros, inf and nan do not count towards the width.
"""
import pytest

import ember

torch = pytest.importorskip("torch")

INF, NAN = float("inf"), float("nan")

CASES = [
    [0.0] * 30,                      # all zeros: width 1, so (80 - 8) // 3 = 24 to a row
    [[0.0] * 40] * 3,                # the same inside a 2-D tensor
    [NAN] * 30,
    [1.0, -INF, 0.0],                # no padding before `1.`
    [[0.0, 0.0], [0.0, -0.0]],
    [NAN, 1.5, -2.25],               # nan padded to the numbers' width
    [1e-5, 0.0, INF],
    [1e9, 0.0, -3.0],
    [-0.5, 0.0],
    [[0.0, INF]] * 40,
]


@pytest.mark.parametrize("values", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_printout_equals_torch(values, dtype):
    ours = ember.tensor(values, dtype=getattr(ember, dtype))
    theirs = torch.tensor(values, dtype=getattr(torch, dtype))
    assert repr(ours) == repr(theirs).replace("torch.", "ember.")  # (ember's dtypes name ember)


def test_zeros_of_a_parameter_after_fill():
    ours, theirs = ember.nn.Linear(4, 50).bias, torch.nn.Linear(4, 50).bias
    assert repr(ours.data.fill_(0)) == repr(theirs.data.fill_(0))
    assert repr(ours) == repr(theirs)  # "Parameter containing:\ntensor([0., ...], requires_grad=True)"


def test_sci_mode_true_still_prints_zeros_as_integers():
    torch.set_printoptions(sci_mode=True)
    ember.set_printoptions(sci_mode=True)
    try:
        assert repr(ember.zeros(3)) == repr(torch.zeros(3)) == "tensor([0., 0., 0.])"
        assert repr(ember.tensor([0.0, 2.0])) == repr(torch.tensor([0.0, 2.0]))
    finally:
        torch.set_printoptions(profile="default")
        ember.set_printoptions(profile="default")


def test_integer_tensors_count_every_element():
    assert repr(ember.zeros(30, dtype=ember.int64)) == repr(torch.zeros(30, dtype=torch.int64))
    assert repr(ember.tensor([0, -100, 5])) == repr(torch.tensor([0, -100, 5]))
