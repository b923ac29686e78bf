"""draw(compiled training step): state named after the modules/optimizers the step reads; updates drawn below."""
from __future__ import annotations

import re

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.viz import draw

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = ember.optim.Adam(model.parameters(), lr=0.01)


def _step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _labels(source: str) -> list[str]:
    return re.findall(r'label="((?:[^"\\]|\\.)*)"', source)


def test_compiled_training_step_names_parameters_and_optimizer_state():
    step = ember.compile(_step)
    x, y = ember.randn(6, 4), ember.tensor([0, 1, 0, 1, 1, 0])
    for _ in range(3):
        step(x, y)
    labels = _labels(draw(step).source)
    for name, p in model.named_parameters():
        shape = str(tuple(p.shape))
        assert f"model.{name}\\n{shape}" in labels, name  # the state box, named
        assert f"update model.{name}\\n{shape}" in labels, name  # its new value, drawn as a box of its own
        assert f"model.{name}.exp_avg\\n{shape}" in labels, name  # Adam's moments, named by their parameter
    assert not any(label.startswith("state\\n") for label in labels)  # nothing left unnamed
    # updates point down at their own boxes, never back up at the state's box
    source = draw(step).source
    update_edges = re.findall(r'"(\w+)" -> "(\w+)" \[[^\]]*label="update"', source)
    assert update_edges and all("upd" in head for _, head in update_edges)
