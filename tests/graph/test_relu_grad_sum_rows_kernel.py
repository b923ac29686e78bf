"""relu's gradient and its row sum (a dense layer's bias gradient under relu) as one native pass in a compiled
step (``fuse._relu_grad_sum_rows``): the same bits as the NumPy steps it replaces, special values included."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import ember
from ember.backends import cpu_kernels
from train_steps import classification_step

fuse = importlib.import_module("ember.graph.passes.fuse")

pytestmark = pytest.mark.skipif(cpu_kernels.get("relu_grad_sum_rows") is None, reason="no numba kernels")


def _numpy(g: np.ndarray, y: np.ndarray) -> tuple:
    """The fused group's NumPy steps: where(~(y <= 0), g, 0), then its sum over rows."""
    r = np.where(np.invert(np.less_equal(y, 0)), g, 0).astype(g.dtype)
    return r, np.add.reduce(r, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256, 512), (1, 7), (33, 1), (1030, 300)])
def test_kernel_equals_the_numpy_steps_bit_for_bit(dtype, shape, monkeypatch) -> None:
    monkeypatch.setattr(ember._config, "CPU_THREADS", 2)  # (1030, 300) splits by columns over two threads
    rng = np.random.default_rng(shape[0])
    g = (rng.standard_normal(shape) * np.exp(3 * rng.standard_normal(shape))).astype(dtype)
    y = rng.standard_normal(shape).astype(dtype)
    flat = y.reshape(-1)
    flat[:: 5] = 0.0
    flat[1:: 7] = -0.0
    flat[2:: 11] = np.nan   # a NaN output passes g through (PyTorch's threshold_backward)
    flat[3:: 13] = np.inf
    g.reshape(-1)[4:: 17] = np.inf
    got = fuse._relu_grad_sum_rows(np, g, y)
    want = _numpy(g, y)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 32, 96), (2, 3, 5, 7), (1, 1, 9)])
def test_leading_axes_of_a_batch_equal_numpys_sum_bit_for_bit(dtype, shape) -> None:
    # a Transformer MLP's (batch, seq, hidden): NumPy sums axes (0, 1) of a contiguous array as one axis of rows
    rng = np.random.default_rng(len(shape))
    g = (rng.standard_normal(shape) * np.exp(3 * rng.standard_normal(shape))).astype(dtype)
    y = rng.standard_normal(shape).astype(dtype)
    y.reshape(-1)[:: 5] = -0.0
    axes = tuple(range(len(shape) - 1))
    got = fuse._relu_grad_sum_rows(np, g, y, axes)
    r = np.where(np.invert(np.less_equal(y, 0)), g, 0).astype(dtype)
    assert got[0].shape == shape and got[0].tobytes() == r.tobytes()
    assert got[1].tobytes() == np.add.reduce(r, axes).tobytes()
    assert fuse._relu_grad_sum_rows_plan(  # the fused group of a 3-D batch is recognized
        [("t1", "less_equal", ["in1", 0], {}), ("t2", "invert", ["t1"], {}), ("t3", "where", ["t2", "in0", 0], {}),
         ("t4", "sum", ["t3"], {"axis": axes, "keepdims": False})], ["t3", "t4"]) == (0, 1)


def test_other_operands_fall_back() -> None:
    g = np.ones((4, 3), np.float32)
    assert fuse._relu_grad_sum_rows(np, g, np.ones((4, 3), np.float64)) is None  # mixed dtypes
    assert fuse._relu_grad_sum_rows(np, g, np.ones((4, 3), np.float32)) is not None
    assert fuse._relu_grad_sum_rows(np, g, np.ones((4, 3), np.float32).T.copy().T) is None  # column-major
    assert fuse._relu_grad_sum_rows(np, np.ones((3, 4), np.float32).T, np.ones((4, 3), np.float32)) is None
    assert fuse._relu_grad_sum_rows(np, g.reshape(2, 2, 3), g.reshape(2, 2, 3)) is None  # not a matrix (axis 0)
    assert fuse._relu_grad_sum_rows(np, g.reshape(2, 2, 3), g.reshape(2, 2, 3), (0, 2)) is None  # not leading axes
    assert fuse._relu_grad_sum_rows(np, g.astype(np.float16), g.astype(np.float16)) is None


def test_compiled_mlp_step_runs_it_and_matches_the_numpy_path(monkeypatch) -> None:
    def train(native: bool) -> tuple:
        if not native:
            monkeypatch.setattr(fuse, "_relu_grad_sum_rows", lambda xp, g, y: None)
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(20, 32), ember.nn.ReLU(), ember.nn.Linear(32, 4))
        opt = ember.optim.Adam(model.parameters(), 1e-2)
        x, t = ember.randn(16, 20), ember.tensor(np.arange(16) % 4)

        step = classification_step(model, opt)

        fn = ember.compile(step, measure=False)
        losses = [float(fn(x, t)) for _ in range(5)]
        kernels = [n.op.impl for n in fn.last.executable.nodes if n.op.category == "fused"]
        found = any(getattr(k, "relu_grad_sum_rows", None) for k in kernels)
        monkeypatch.undo()
        return losses, [p.detach().numpy().copy() for p in model.parameters()], found

    losses, params, found = train(True)
    assert found  # the pattern was recognized in the traced step
    ref_losses, ref_params, _ = train(False)
    assert losses == ref_losses
    for p, q in zip(params, ref_params):
        assert p.tobytes() == q.tobytes()
