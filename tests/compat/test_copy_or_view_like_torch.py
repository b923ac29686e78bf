"""Which ops return new memory and which return views of their input, as in PyTorch.

Programs write into results in place (``style.repeat(B, 1, 1, 1)`` then ``batch.div_(255)`` in
pytorch/examples' fast_neural_style): an op that copies in PyTorch must not hand back a view (the write would
change the input, or be refused for overlapping memory), and a view must stay a view.
"""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    # copies in PyTorch
    "repeat_ones": lambda t, x: x.repeat(1, 1),
    "repeat_leading": lambda t, x: x[:1].repeat(3, 1),
    "repeat_trailing": lambda t, x: x[:, :1].repeat(1, 3),
    "repeat_new_dims": lambda t, x: x.repeat(2, 1, 1),
    "tile": lambda t, x: x.tile((1, 2)),
    "flip": lambda t, x: x.flip(0),
    "flip_both": lambda t, x: t.flip(x, (0, 1)),
    "fliplr": lambda t, x: t.fliplr(x),
    "flipud": lambda t, x: t.flipud(x),
    "rot90": lambda t, x: t.rot90(x, 1, (0, 1)),
    "rot90_twice": lambda t, x: t.rot90(x, 2, (0, 1)),
    "roll": lambda t, x: x.roll(1, 0),
    "index_list": lambda t, x: x[[0, 1]],
    "masked": lambda t, x: x[x > 0],
    "clone": lambda t, x: x.clone(),
    # views in PyTorch
    "t": lambda t, x: x.t(),
    "narrow": lambda t, x: x.narrow(0, 0, 2),
    "diagonal": lambda t, x: x.diagonal(),
    "slice_step": lambda t, x: x[::2],
    "view": lambda t, x: x.view(-1),
    "chunk": lambda t, x: x.chunk(3, 1)[1],
    "unbind": lambda t, x: x.unbind(1)[0],
}


def _after_write(lib, case):
    x = lib.arange(9.0).reshape(3, 3) - 4
    y = CASES[case](lib, x)
    y.add_(100)
    return x.tolist(), y.tolist()


@pytest.mark.parametrize("case", sorted(CASES))
def test_in_place_write_into_result_reaches_input_as_in_torch(case: str) -> None:
    assert _after_write(ember, case) == _after_write(torch, case)


def test_repeat_and_flip_gradients_still_flow() -> None:
    x = ember.arange(6.0).reshape(2, 3).requires_grad_()
    (x.repeat(2, 1) * ember.arange(12.0).reshape(4, 3)).sum().backward()
    assert x.grad.tolist() == [[6.0, 8.0, 10.0], [12.0, 14.0, 16.0]]  # rows 0+2 and 1+3 of the weights
    x.grad = None
    (x.flip(1) * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]
