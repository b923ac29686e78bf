"""How a compiled step's state updates reach their tensors: the overlap test (one sorted-interval
search per value instead of ``may_share_memory`` per pair) and escaped states (``p.grad`` made by
``backward()`` after ``zero_grad()``) taking the run's new array instead of a copy."""
from __future__ import annotations

import random

import numpy as np

import ember
from ember.graph import executor
from ember.graph.executor import _Overlaps

CPU = ember.tensor([1.0])._device.backend


def test_overlaps_agrees_with_may_share_memory_on_strided_views() -> None:
    rng = random.Random(0)
    base = np.zeros(200)

    def view(a: int, b: int, step: int) -> np.ndarray:
        return base[a:b:step] if step > 0 else base[a:b][::step]

    for _ in range(2000):
        targets = [view(*sorted(rng.sample(range(201), 2)), rng.choice([1, 2, 3, -1])) for _ in range(rng.randint(1, 5))]
        overlaps = _Overlaps(CPU, targets)
        for _ in range(5):
            query = view(*sorted(rng.sample(range(201), 2)), rng.choice([1, 2, -2]))
            assert overlaps(query) == any(np.may_share_memory(query, t) for t in targets)
        assert not overlaps(np.zeros(3)) and not overlaps(2.0) and not overlaps(base[5:5])


def test_overlaps_with_several_owners_and_foreign_buffers_agrees_with_may_share_memory() -> None:
    """Targets over several allocations, some over foreign buffers (no known owner): arrays whose owner owns no
    target are answered without addresses, the rest by bounds; every answer is may_share_memory's."""
    rng = random.Random(1)
    bases = [np.zeros(64) for _ in range(3)]
    foreign = np.frombuffer(bytearray(64 * 8), dtype=np.float64)  # base: a bytearray, owner unknown
    pools = bases + [foreign]

    def view(pool: np.ndarray) -> np.ndarray:
        a, b = sorted(rng.sample(range(65), 2))
        return pool[a:b:rng.choice([1, 2, 3])]

    for _ in range(1500):
        targets = [view(rng.choice(pools)) for _ in range(rng.randint(1, 4))]
        overlaps = _Overlaps(CPU, targets)
        for query in [view(rng.choice(pools)) for _ in range(4)] + [np.ones(4), np.ones((2, 3)).T]:
            assert overlaps(query) == any(np.may_share_memory(query, t) for t in targets)


def test_memory_owner() -> None:
    a = np.zeros((4, 5))
    assert CPU.memory_owner(a) is a and CPU.memory_owner(a[1:, ::2]) is a and CPU.memory_owner(a.T.reshape(-1)) is not a
    assert CPU.memory_owner(np.frombuffer(bytearray(8), np.float64)) is None  # foreign memory
    assert CPU.memory_owner(np.broadcast_to(a, (2, 4, 5))) is a
    assert CPU.memory_owner(3.0) is None and CPU.memory_owner(np.ma.zeros(3)) is None  # not plain ndarrays


def _net():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.Tanh(), ember.nn.Linear(16, 3))
    return model, ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _step(model, opt, return_grad: bool = False):
    def step(x, y):
        loss = ember.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return (loss, model[0].weight.grad) if return_grad else loss

    return step


def test_escaped_grads_take_the_runs_arrays_and_match_eager(monkeypatch) -> None:
    handed = []
    original = executor.Executable._handed_over
    monkeypatch.setattr(executor.Executable, "_handed_over",
                        lambda self, *a: handed.append(original(self, *a)) or handed[-1])
    x, y = ember.randn(5, 8), ember.tensor([0, 1, 2, 1, 0])
    eager_model, eager_opt = _net()
    model, opt = _net()
    compiled = ember.compile(_step(model, opt), measure=False)
    eager = _step(eager_model, eager_opt)
    grad_object = None
    for k in range(4):
        assert abs(compiled(x, y).item() - eager(x, y).item()) < 1e-6
        for p, q in zip(model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        if k == 2:
            grad_object = model[0].weight.grad
    assert model[0].weight.grad is grad_object  # the same tensor object, given each run's array
    assert handed and all(len(h) == 4 for h in handed)  # the four parameters' gradients, every run


def test_an_escaped_value_that_is_also_returned_is_copied() -> None:
    # Returning p.grad from the step used to leave p.grad symbolic after the trace (a TracingError on use).
    model, opt = _net()
    compiled = ember.compile(_step(model, opt, return_grad=True), measure=False)
    x, y = ember.randn(5, 8), ember.tensor([0, 1, 2, 1, 0])
    for _ in range(3):
        _, returned = compiled(x, y)
    grad = model[0].weight.grad
    assert not np.shares_memory(returned.numpy(), grad.numpy())
    np.testing.assert_array_equal(returned.numpy(), grad.numpy())


def test_handing_over_by_owner_is_never_looser_than_the_bounds_test() -> None:
    """``_handed_by_owner`` hands a value over only where the bounds test would (its allocation holds nothing
    else of the run), agrees with it on fresh arrays, and defers to it when an owner is unknown."""
    rng = random.Random(0)
    base = np.zeros(64)
    foreign = np.frombuffer(bytearray(64 * 8))  # memory NumPy did not allocate: owner unknown
    exe = executor.Executable.__new__(executor.Executable)
    for trial in range(300):
        pool = [np.zeros(8), np.zeros((4, 4)), base[:16], base[32:48], base[::2], np.float32(1.0), 3.0,
                np.zeros(0), np.broadcast_to(np.zeros(1), (5,))]
        candidates = {k: rng.choice(pool) for k in range(rng.randint(1, 3))}
        others = [rng.choice(pool) for _ in range(rng.randint(0, 4))]
        if trial % 5 == 0:
            others.append(foreign)
        by_owner = exe._handed_by_owner(candidates, others, CPU)
        exe.writes = [(k, None) for k in candidates]
        exe.rebind = [True] * len(candidates)
        exe.given = []
        env = list(candidates.values())
        by_bounds = executor.Executable._handed_over(exe, env, [], others, CPU) if trial % 5 else None
        if trial % 5 == 0:
            assert by_owner is None
            continue
        assert by_owner <= by_bounds, (candidates, others)
    fresh = {0: np.ones(3), 1: np.ones((2, 2))}
    assert exe._handed_by_owner(fresh, [np.ones(3), 2.0], CPU) == {0, 1}
    assert exe._handed_by_owner(fresh, [fresh[1][0]], CPU) == {0}  # a view of candidate 1 is read elsewhere
