"""format()/f-strings of tensors follow PyTorch: a plain 0-d tensor formats as its number, others as str()."""
import pytest

import ember

torch = pytest.importorskip("torch")


def _both(make):
    return make(ember), make(torch)


@pytest.mark.parametrize("spec", ["", ".3f", "8.2e", ">10", "d"])
@pytest.mark.parametrize("value, dtype", [(0.25, "float32"), (-3.0, "float64"), (7, "int64"), (True, "bool"),
                                          (float("nan"), "float32"), (float("-inf"), "float64")])
def test_zero_dim_formats_as_its_number(value, dtype, spec):
    ours, theirs = _both(lambda lib: lib.tensor(value, dtype=getattr(lib, dtype)))
    try:
        expected = format(theirs, spec)
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error)):
            format(ours, spec)
        return
    assert format(ours, spec) == expected


def test_f_string_of_a_loss_prints_the_number():
    ours = (ember.tensor([1.0, 2.0], requires_grad=True) ** 2).mean()
    theirs = (torch.tensor([1.0, 2.0], requires_grad=True) ** 2).mean()
    assert f"loss {ours}" == f"loss {theirs}" == "loss 2.5"


def test_non_scalar_formats_as_str_and_refuses_a_spec():
    ours, theirs = _both(lambda lib: lib.tensor([1.0, 2.0]))
    assert f"{ours}" == str(ours)
    with pytest.raises(TypeError):
        format(theirs, ".2f")
    with pytest.raises(TypeError):
        format(ours, ".2f")


def test_zero_dim_parameter_formats_as_str_like_torch():
    ours = ember.nn.Parameter(ember.tensor(1.5))
    theirs = torch.nn.Parameter(torch.tensor(1.5))
    assert f"{theirs}" == str(theirs)
    assert f"{ours}" == str(ours)
