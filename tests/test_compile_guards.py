"""A compiled training step must follow optimizer hyperparameters that change between calls (an lr
scheduler), not keep the value it was traced with."""
from __future__ import annotations

import numpy as np

import ember


def _model_and_data(seed: int):
    rng = np.random.default_rng(seed)
    model = ember.nn.Linear(5, 3).double()
    with ember.no_grad():
        model.weight.copy_(ember.tensor(rng.standard_normal((3, 5))))
        model.bias.copy_(ember.tensor(rng.standard_normal(3)))
    x = ember.tensor(rng.standard_normal((8, 5)))
    y = ember.tensor(rng.standard_normal((8, 3)))
    return model, x, y


def _train(compiled: bool, steps: int = 8) -> np.ndarray:
    model, x, y = _model_and_data(0)
    optimizer = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = ember.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def step(inputs, targets):
        optimizer.zero_grad()
        loss = ((model(inputs) - targets) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss

    run = ember.compile(step) if compiled else step
    for _ in range(steps):
        run(x, y)
        scheduler.step()
    return model.weight.detach().numpy().copy()


def test_compiled_step_follows_scheduled_learning_rate() -> None:
    eager = _train(compiled=False)
    compiled = _train(compiled=True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-12)
