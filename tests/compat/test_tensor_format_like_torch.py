"""``format()`` / f-strings of tensors print what PyTorch prints.

Training logs say ``print(f"loss {loss}")`` or ``'{} %'.format(100 * correct / total)``: PyTorch formats a 0-d
tensor as its number (``2.3026``), with or without a format spec, and other tensors as their repr.
"""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

VALUES = {
    "float": lambda t: t.tensor(15.4),
    "int": lambda t: t.tensor(77),
    "bool": lambda t: t.tensor(True),
    "computed": lambda t: 100 * t.tensor(77) / 500,
    "requires_grad": lambda t: t.tensor(2.5, requires_grad=True) * 2,
    "vector": lambda t: t.tensor([1.5, 2.0]),
    "one_element_vector": lambda t: t.tensor([3]),
    "parameter": lambda t: t.nn.Parameter(t.tensor(2.0)),
}
SPECS = ["", ".2f", ">10", "e", "g"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("value", sorted(VALUES))
def test_format_matches_torch(value: str, spec: str) -> None:
    try:
        want = format(VALUES[value](torch), spec)
    except (TypeError, ValueError, RuntimeError):
        return  # PyTorch refuses (a spec on a vector or a Parameter): ember may refuse or print; not compared
    assert format(VALUES[value](ember), spec).replace("ember.", "torch.") == want


def test_f_string_and_percent_formatting() -> None:
    loss = ember.tensor(0.125)
    assert f"loss {loss}" == "loss 0.125" and f"{loss:.2f}" == "0.12"
    assert "%.1f" % ember.tensor(2.25) == "2.2" and "%s" % ember.tensor(1.0) == str(torch.tensor(1.0))
