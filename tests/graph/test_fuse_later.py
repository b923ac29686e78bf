"""Short fused kernels move to a Numba loop after a few runs (ember/graph/passes/fuse_later.py) without changing a bit."""
import numpy as np
import pytest

import ember
from ember.graph.passes import fuse_later

pytest.importorskip("numba")

SPECIAL32 = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 3.4e38, -3.4e38, 1e-8, 7.0],
                     dtype=np.float32)


def _fused(fn) -> list:
    kernels = [n.op.impl for n in fn.last.executable.nodes if n.op.name == "fused"]
    return [k for k in kernels if hasattr(k, "later")]  # (not the shared scalar kernels of share_scalar)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64 if a.dtype == np.float64 else np.uint8)


def test_which_steps_may_be_promoted():
    add = ("t1", "add", ["in0", "in1"], {})
    assert fuse_later.promotable([add, ("t2", "multiply", [1e-06, "t1"], {})], ["t2"])
    assert fuse_later.promotable([("t1", "fma", ["in0", "in1", "in2"], {}), ("t2", "sqrt", ["t1"], {})], ["t2"])
    assert fuse_later.promotable([("t1", "greater_equal", ["in0", 0], {}), ("t2", "where", ["t1", "in1", 0], {})],
                                 ["t2"])
    assert not fuse_later.promotable([("t1", "exp", ["in0"], {})], ["t1"])  # NumPy's SIMD exp is not LLVM's
    assert not fuse_later.promotable([("t1", "power", ["in0", 2], {})], ["t1"])
    assert not fuse_later.promotable([add, ("t2", "sum", ["t1"], {"axis": None})], ["t2"])  # float64 accumulator
    assert not fuse_later.promotable([("t1", "multiply", ["in0", 3], {})], ["t1"])  # the loop would widen to float64
    assert not fuse_later.promotable([("t1", "where", ["in0", "in1", 0], {}), ("t2", "add", ["t1", "in1"], {})],
                                     ["t2"])  # an integer selected and read again
    assert not fuse_later.promotable([("t1", "less", ["in0", 2 ** 25], {})], ["t1"])  # not exact in float32
    assert not fuse_later.promotable([("t1", "cast", ["in0"], {"dtype": np.dtype(np.int32)})], ["t1"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_promoted_loop_gives_the_numpy_replays_bits_on_special_values(dtype):
    rng = np.random.default_rng(0)
    n = 4 * SPECIAL32.size

    def f(a, b, c):
        mixed = (a + b) * 1e-6 - c  # SGD's add+mul+sub
        mask = ember.where(a >= 0, b, ember.zeros_like(b))  # relu's gradient
        one_rounding = ember.addcmul(c, a, b, value=0.5)  # ember's exact fma
        root = (a * a + 1.0).sqrt() / (b.abs() + 0.25)
        return mixed, mask, one_rounding, root, -(a < b).float() + c

    values = [np.concatenate([SPECIAL32, rng.standard_normal(n - SPECIAL32.size).astype(np.float32)]).astype(dtype)
              for _ in range(3)]
    for v in values:
        rng.shuffle(v)
    args = [ember.from_numpy(v) for v in values]
    fn = ember.compile(f, measure=False)
    eager = [o.numpy().copy() for o in f(*args)]
    runs = [[o.numpy().copy() for o in fn(*args)] for _ in range(fuse_later.RUNS + 4)]
    kernels = _fused(fn)
    assert kernels and all(k.loop is not None for k in kernels if k.later), [k.source for k in kernels]
    assert any(k.later for k in kernels)
    for run in runs[1:]:
        for got, first, want in zip(run, runs[0], eager):
            np.testing.assert_array_equal(_bits(got), _bits(first))  # the NumPy replay's bits, NaNs included
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def _train(optimizer: str, promote: bool, monkeypatch, steps: int = 10) -> list:
    if not promote:
        monkeypatch.setattr(fuse_later, "eligible", lambda *a: False)
    else:
        monkeypatch.undo()
    rng = np.random.default_rng(1)
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(12, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
    opt = (ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3) if optimizer == "sgd"
           else ember.optim.Adam(model.parameters(), lr=1e-2))
    x = ember.from_numpy(rng.standard_normal((8, 12)).astype(np.float32))
    y = ember.from_numpy(rng.integers(0, 3, 8))

    def step(x, y):
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = ember.compile(step, measure=False)
    losses = [fn(x, y).item() for _ in range(steps)]
    if promote:
        assert any(k.loop is not None for k in _fused(fn))
    return losses + [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_steps_are_bit_identical_with_and_without_promotion(optimizer, monkeypatch):
    before = _train(optimizer, False, monkeypatch)
    after = _train(optimizer, True, monkeypatch)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_kernels_that_ran_few_times_stay_numpy():
    fn = ember.compile(lambda a, b: (a + b) * 0.5 - a, measure=False)
    a, b = ember.ones(5), ember.ones(5)
    for _ in range(fuse_later.RUNS):  # the trace's run and the next ones
        fn(a, b)
    assert all(k.loop is None for k in _fused(fn))
