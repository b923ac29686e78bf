"""``nn.ParameterList`` holds any object, as PyTorch's since 1.12: tensors become Parameters, modules (another
ParameterList: lucidrains' normalized ViT keeps one per layer) register as submodules, other objects are plain
attributes. ember refused anything but a tensor ("expected a Tensor or Parameter, got ParameterList").
Compared with torch: length, element types, state-dict keys in order, parameter names, slicing, printout."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _build(lib):
    outer = lib.nn.ParameterList([])
    for i in range(2):
        outer.append(lib.nn.ParameterList([lib.nn.Parameter(lib.ones(3) * i), lib.nn.Parameter(lib.zeros(2))]))
    outer.append(lib.tensor([1.0, 2.0]))  # a plain tensor: wrapped in a Parameter
    outer.append(lib.nn.Linear(2, 2))
    outer.append("text")
    return outer


def test_nested_lists_modules_and_objects_like_torch():
    e, t = _build(ember), _build(torch)
    assert len(e) == len(t) == 5
    assert [type(x).__name__ for x in e] == [type(x).__name__ for x in t]
    assert list(e.state_dict()) == list(t.state_dict()) == ["2", "0.0", "0.1", "1.0", "1.1", "3.weight", "3.bias"]
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert type(e[1:3]).__name__ == "ParameterList" and len(e[1:3]) == 2
    assert repr(e).replace("ember.", "torch.") == repr(t)
    np.testing.assert_array_equal(e[0][0].detach().numpy(), t[0][0].detach().numpy())


def test_setitem_wraps_tensors_and_bad_extend_raises_like_torch():
    for lib in (ember, torch):
        p = lib.nn.ParameterList([lib.zeros(1)])
        p[0] = lib.ones(2)
        assert type(p[0]).__name__ == "Parameter" and p[0].requires_grad
        p += [lib.zeros(3)]
        assert len(p) == 2 and len(list(p.parameters())) == 2
        with pytest.raises(TypeError, match="extend should be called with an iterable"):
            p.extend(lib.zeros(2))
