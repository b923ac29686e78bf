"""The NumPy-only optimizer steps (ember/optim/numpy_step.py, numpy_kernels.py) against torch.optim and float64.

Without numba, Adam/AdamW, SGD, RMSprop, Adagrad, Adadelta and Adamax run their own few-pass NumPy steps instead of the
compiled graph. They round differently from torch (no fused multiply-adds, bias corrections folded into eps and
the step size), so they are held to float32 tolerances over many steps against torch's float32 run, and must be
about as close to torch's float64 run as torch's own float32 run is; float64 parameters to 1e-12. Special
points (zero, inf, nan, huge and subnormal gradients, eps = 0, lr = 0, beta1 = 0) must give torch's inf/nan
pattern and its finite values.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_threads
from ember.graph.passes import fuse_numba
from ember.optim import numpy_blas, numpy_step

torch = pytest.importorskip("torch")

CONFIGS = [
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, betas=(0.3, 0.8), weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=1e-2, amsgrad=True, eps=1e-3, foreach=True)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=1e-2, betas=(0.0, 0.5), maximize=True)),
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.25, maximize=True)),
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=1e-2, momentum=0.9, maximize=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=1.0, weight_decay=0.1, maximize=True, rho=0.5)),
    ("Adamax", dict(lr=1e-2)),
    ("Adamax", dict(lr=1e-2, betas=(0.5, 0.9), weight_decay=0.1, maximize=True)),
]
SHAPES = [(3000,), (7, 5), (1,)]  # with 4 KiB blocks: 3 blocks, the last partial; one block; one element


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """torch's thread pool slows to a crawl on a shared, loaded machine (60 Adam steps: 48 s of wall time for 1.5 s of
    CPU); one thread is fast and steady."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CONFIGS]


@pytest.fixture
def numpy_only(monkeypatch):
    """No numba (the path is chosen when an optimizer's compiled entry is made), small blocks, and a record
    of the groups the NumPy steps ran."""
    monkeypatch.setattr(fuse_numba, "available", lambda: False)
    monkeypatch.setattr(numpy_step, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(numpy_step, "SMALL", 100)  # 3000 elements: blocks and BLAS; 35 and 1: NumPy's passes whole
    ran = []
    original = numpy_step.run

    def recording(*args):
        done = original(*args)
        ran.append(done)
        return done

    monkeypatch.setattr(numpy_step, "run", recording)
    return ran


def _trajectory(name, kwargs, grads, init, library, dtype):
    """Parameters and state buffers after stepping through ``grads`` (lists of arrays per step)."""
    if library == "torch":
        params = [torch.nn.Parameter(torch.tensor(a.astype(dtype))) for a in init]
        opt = getattr(torch.optim, name)(params, **kwargs)
    else:
        params = [ember.nn.Parameter(ember.tensor(a.astype(dtype))) for a in init]
        opt = getattr(ember.optim, name)(params, **kwargs)
    ember.optim.Optimizer.fast_path = library != "ember op by op"
    try:
        for step in grads:
            for p, g in zip(params, step):
                p.grad = (torch.tensor if library == "torch" else ember.tensor)(g.astype(dtype))
            opt.step()
    finally:
        ember.optim.Optimizer.fast_path = True
    out = []
    for p in params:
        out.append(p.detach().numpy().astype(np.float64))
        for key, value in sorted(opt.state[p].items()):
            if key != "step":
                out.append(np.asarray(value.detach().numpy() if hasattr(value, "detach") else value, np.float64))
    steps = [float(opt.state[p]["step"]) for p in params if "step" in opt.state[p]]
    return out, steps


def _inputs(seed=0, steps=40):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) * rng.choice([1e-3, 1.0, 30.0]) for s in SHAPES] for _ in range(steps)]
    return init, grads


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_numpy_step_within_float32_tolerance_of_torch_over_40_steps(config, numpy_only):
    name, kwargs = config
    init, grads = _inputs()
    got, got_steps = _trajectory(name, kwargs, grads, init, "ember", np.float32)
    assert numpy_only and all(numpy_only[2:])  # the NumPy step ran (SGD's first step makes its buffer on the graph)
    want, want_steps = _trajectory(name, kwargs, grads, init, "torch", np.float32)
    exact, _ = _trajectory(name, kwargs, grads, init, "torch", np.float64)
    assert got_steps == want_steps
    for g, w, e in zip(got, want, exact):
        scale = max(np.abs(e).max(), 1.0)  # normwise: momentum's cancellations leave small values of big sums
        assert np.abs(g - w).max() <= 5e-6 * scale
        # as close to float64 as torch's float32 run is (within 2x and a few ulp)
        assert np.abs(g - e).max() <= 2 * np.abs(w - e).max() + 1e-6 * scale


@pytest.mark.parametrize("config", CONFIGS[::3], ids=IDS[::3])
def test_numpy_step_float64_matches_torch_to_1e_12(config, numpy_only):
    name, kwargs = config
    init, grads = _inputs(1, steps=20)
    got, _ = _trajectory(name, kwargs, grads, init, "ember", np.float64)
    assert numpy_only and all(numpy_only[2:])
    want, _ = _trajectory(name, kwargs, grads, init, "torch", np.float64)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e20, -3e19, 3e38, 1e-40, -1e-30, 1.0, -2.5], np.float32)


@pytest.mark.parametrize("config", [
    ("Adam", dict(lr=1e-2)), ("Adam", dict(lr=1e-2, eps=0.0)), ("Adam", dict(lr=0.0, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-2, amsgrad=True, betas=(0.0, 0.9))), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5)), ("RMSprop", dict(lr=1e-2, eps=0.0)),
    ("Adagrad", dict(lr=0.1)), ("Adadelta", dict(lr=1.0, eps=0.0)), ("Adadelta", dict(lr=1.0, weight_decay=0.1)),
    ("Adamax", dict(lr=1e-2)),
], ids=lambda c: f"{c[0]}-{c[1]}")
def test_special_points_give_torchs_inf_nan_pattern_and_values(config, numpy_only):
    """Every pair (parameter, gradient) of special values, over three steps (the second with zero gradients):
    the parameter's inf/nan where torch has them, the state's non-finite values where torch's are (an infinite
    moment stays infinite where torch's ``lerp_`` turns it into nan a step later: ``inf + w * (0 - inf)``; the
    parameter is nan from the infinite gradient's step on in both), finite values within float32 tolerance.
    Adadelta's NumPy step squares first (``grad * grad * (1 - rho)``, which overflows above ~1.8e19 where torch's
    ``addcmul_(value=1 - rho)`` and ember's op path do not): its finite entries with a parameter or gradient over
    1e19 are left out."""
    name, kwargs = config
    param = np.repeat(SPECIAL, SPECIAL.size)
    grad = np.tile(SPECIAL, SPECIAL.size)
    grads = [[grad], [np.zeros_like(grad)], [grad[::-1].copy()]]
    with np.errstate(all="ignore"):
        got, _ = _trajectory(name, kwargs, grads, [param], "ember", np.float32)
    assert all(numpy_only[2:])
    with np.errstate(all="ignore"):
        want, _ = _trajectory(name, kwargs, grads, [param], "torch",
                              np.float32)
    if name == "Adadelta":
        huge = (np.isfinite(param) & (np.abs(param) > 1e19)) | np.any(
            [np.isfinite(g[0]) & (np.abs(g[0]) > 1e19) for g in grads], axis=0)
        got, want = [g[~huge] for g in got], [w[~huge] for w in want]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(w))
        finite = np.isfinite(w)
        both = np.isinf(g) & np.isinf(w)
        np.testing.assert_array_equal(np.sign(g[both]), np.sign(w[both]))
        scale = np.maximum(np.abs(w[finite]), 1e-30)
        assert np.all(np.abs(g[finite] - w[finite]) <= 1e-5 * scale + 1e-37), (g[finite], w[finite])


def test_split_over_threads_equals_one_thread_bitwise(numpy_only, monkeypatch):
    """Big parameters run their blocks on ember's threads: blocks are independent, so the bits are the same."""
    monkeypatch.setattr(numpy_step, "PARALLEL_MIN", 1024)
    init, grads = _inputs(2, steps=5)
    results = []
    for threads in (1, 3):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        monkeypatch.setattr(cpu_threads, "_POOL", None)
        results.append(_trajectory("Adam", dict(lr=1e-2, amsgrad=True), grads, init, "ember", np.float32)[0])
        if threads == 3:
            assert cpu_threads._POOL is not None  # the 3000-element parameter was split
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_numpy_route_agrees_with_the_blas_route(numpy_only, monkeypatch):
    """The scaled adds by OpenBLAS's axpby (where NumPy ships OpenBLAS and it passed its self-test) and by three
    NumPy passes: within float32 rounding of each other."""
    init, grads = _inputs(3, steps=30)
    blas = _trajectory("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5), grads, init, "ember", np.float32)[0]
    monkeypatch.setitem(numpy_blas._STATE, "blas", {})
    plain = _trajectory("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5), grads, init, "ember", np.float32)[0]
    for a, b in zip(blas, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_blas_route_passes_its_self_test_where_numpy_ships_openblas():
    if not numpy_blas._find():
        pytest.skip("NumPy's BLAS here is not an OpenBLAS with ?axpby")
    assert numpy_blas.blas_ok()


def test_scheduled_lr_reaches_the_numpy_step(numpy_only):
    init, grads = _inputs(4, steps=20)
    results = []
    for lib, module in (("ember", ember), ("torch", torch)):
        p = (module.nn.Parameter)(module.tensor(init[0].astype(np.float32)))
        opt = module.optim.AdamW([p], lr=0.1)
        sched = module.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        for step in grads:
            p.grad = module.tensor(step[0].astype(np.float32))
            opt.step()
            sched.step()
        results.append(p.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_what_does_not_fit_runs_the_graph(numpy_only):
    """A non-contiguous gradient, float16 parameters or a subclass with its own update: the compiled graph
    runs (bitwise the op-by-op path), and with numba installed the NumPy step is never chosen."""
    w = ember.nn.Parameter(ember.ones(4, 3))
    opt = ember.optim.Adam([w], lr=0.1)
    for _ in range(3):
        w.grad = ember.ones(3, 4).t()  # a transposed view
        opt.step()
    assert not any(numpy_only)
    h = ember.nn.Parameter(ember.ones(5, dtype=ember.float16))
    opt = ember.optim.Adam([h], lr=0.1)
    for _ in range(3):
        h.grad = ember.ones(5, dtype=ember.float16)
        opt.step()
    assert not any(numpy_only)

    class Halved(ember.optim.SGD):
        @staticmethod
        def update(p, grad, state, hp):
            p.add_(grad, alpha=-0.5 * hp["lr"])

    v = ember.nn.Parameter(ember.ones(3))
    opt = Halved([v], lr=1.0)
    for _ in range(3):
        v.grad = ember.ones(3)
        opt.step()
    np.testing.assert_array_equal(v.detach().numpy(), [-0.5] * 3)
    assert all(e.kernel is None for e in opt._compiled.cache.values())


def test_numba_installed_keeps_the_compiled_graph():
    pytest.importorskip("numba")
    w = ember.nn.Parameter(ember.ones(8))
    opt = ember.optim.SGD([w], lr=0.1)  # one op: no numba loop to compile
    for _ in range(3):
        w.grad = ember.ones(8)
        opt.step()
    assert all(e.kernel is None for e in opt._compiled.cache.values())


@pytest.mark.parametrize("magnitude", [1e17, 1e18])  # (above ~4e18 the square overflows first: the test above)
def test_adadelta_exploding_gradients_keep_their_precision(magnitude, numpy_only):
    """The NumPy-only Adadelta takes one root of ``(acc + eps) / (sq + eps)``; a gradient of ~1e18 against a
    fresh ``acc`` puts that ratio below float32's normal range (1e-6 / 1e35: a subnormal with 3 digits), so
    such blocks are redone with torch's two roots. Compared with torch's float32 run, normal gradients in the
    same and in other blocks. (Without the fallback the 1e18 case is ~1% off torch.)"""
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(3000)]
    grads = []
    for _ in range(3):
        g = rng.standard_normal(3000)
        g[::97] *= magnitude  # a few exploding entries, in most of the 4 KiB blocks
        grads.append([g])
    got, _ = _trajectory("Adadelta", dict(lr=1.0), grads, init, "ember", np.float32)
    assert numpy_only and all(numpy_only)
    want, _ = _trajectory("Adadelta", dict(lr=1.0), grads, init, "torch", np.float32)
    for g, w in zip(got, want):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-30)
