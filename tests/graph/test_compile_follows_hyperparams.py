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


def test_compiled_classifier_step_with_adam_traces_and_matches_eager() -> None:
    """Cross-entropy's target range check must not force an eager fallback under tracing."""
    import warnings

    results = []
    for compiled in (False, True):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3)).double()
        optimizer = ember.optim.Adam(model.parameters(), lr=1e-2)
        x = ember.randn(10, 6).double()
        target = ember.randint(0, 3, (10,))

        def step():
            loss = ember.nn.functional.cross_entropy(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        run = ember.compile(step, fallback="raise") if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = [run().item() for _ in range(6)]
        results.append((np.array(losses), model[0].weight.detach().numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6, atol=1e-12)
