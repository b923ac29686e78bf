"""Compiled ember vs eager ember, PyTorch eager, torch.compile and JAX jit (where they install).

W1: the lectures' two-layer net training step (N=64, D_in=1000, H=100, D_out=10; forward, loss,
backward, SGD update under no_grad). W5: 100 tiny elementwise ops, forward + backward.
Prints medians and ratios to PyTorch eager.   Run: python benchmarks/bench_compile.py [--quick]
"""
from __future__ import annotations

import sys
import time

import numpy as np

import ember

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _timing import interleaved_medians  # noqa: E402
from ember.graph.showcase import two_layer_step  # noqa: E402

N, D_IN, H, D_OUT, LR = 64, 1000, 100, 10, 1e-6
W5_OPS, W5_SIZE = 100, 16


def median_us(fn, repeat: int = 200, warm: int = 5) -> float:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e6)


# ---- W1 ---------------------------------------------------------------------------------------------
def w1_step(lib, x, y, w1, w2):
    step = two_layer_step(lib, w1, w2, LR)
    return lambda x=x, y=y: step(x, y)


def w1_data(lib):
    rng = np.random.RandomState(0)
    make = (lambda a, g=False: lib.tensor(a.astype(np.float32), requires_grad=g))
    return (make(rng.randn(N, D_IN)), make(rng.randn(N, D_OUT)), make(rng.randn(D_IN, H), True),
            make(rng.randn(H, D_OUT), True))


# ---- W5 ---------------------------------------------------------------------------------------------
def w5_chain(y, lib):
    for i in range(W5_OPS):
        k = i % 5
        if k == 0:
            y = y * 1.01
        elif k == 1:
            y = y + 0.1
        elif k == 2:
            y = lib.tanh(y)
        elif k == 3:
            y = y - 0.05
        else:
            y = lib.sin(y)
    return y


def w5_step(lib, x, p):
    def step(x=x):
        p.grad = None
        loss = w5_chain(x * p, lib).sum()
        loss.backward()
        return loss, p.grad
    return step


def w5_data(lib):
    rng = np.random.RandomState(1)
    return (lib.tensor(rng.randn(W5_SIZE).astype(np.float32)),
            lib.tensor(rng.randn(W5_SIZE).astype(np.float32), requires_grad=True))


def jax_versions():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def w1_loss(w, x, y):
        h = jnp.maximum(x @ w[0], 0)
        return jnp.sum((h @ w[1] - y) ** 2)

    @jax.jit
    def w1(w, x, y):
        loss, g = jax.value_and_grad(w1_loss)(w, x, y)
        return loss, (w[0] - LR * g[0], w[1] - LR * g[1])

    def w5_loss(p, x):
        return jnp.sum(w5_chain(x * p, jnp))

    w5 = jax.jit(jax.value_and_grad(w5_loss))
    return w1, w5, jnp


# ---- W2 ---------------------------------------------------------------------------------------------
def w2_callables() -> dict:
    """MLP 784-512-10, batch 256, Adam, cross-entropy: eager and compiled ember, torch eager/compile."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_nn import copy_weights, make_step, mlp

    rng = np.random.default_rng(0)
    x_np, t_np = rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256)
    fns: dict = {}
    reference = None
    torch = _torch()
    if torch is not None:
        torch.manual_seed(0)
        reference = mlp(torch)
        tx, tt = torch.from_numpy(x_np), torch.from_numpy(t_np)
        fns["torch eager"] = make_step(torch, reference, torch.optim.Adam(reference.parameters(), 1e-3), tx, tt, "ce")
    ex, et = ember.from_numpy(x_np), ember.from_numpy(t_np)
    for name, wrap in (("ember eager", lambda f: f), ("ember compiled", ember.compile)):
        model = mlp(ember)
        if reference is not None:
            copy_weights(reference, model)
        fns[name] = wrap(make_step(ember, model, ember.optim.Adam(model.parameters(), 1e-3), ex, et, "ce"))
    if torch is not None:
        other = mlp(torch)
        fns["torch.compile"] = _torch_compile(
            torch, make_step(torch, other, torch.optim.Adam(other.parameters(), 1e-3), tx, tt, "ce"), "W2")
    return {k: v for k, v in fns.items() if v is not None}


def _torch():
    try:
        import torch

        return torch
    except ImportError:
        return None


def _torch_compile(torch, fn, name: str):
    try:
        compiled = torch.compile(fn)
        compiled()
        return compiled
    except Exception as error:  # noqa: BLE001 - no C++ toolchain, unsupported backend...
        print(f"torch.compile {name}: unavailable ({type(error).__name__})")
        return None


def main(quick: bool = False) -> dict:
    rounds, min_time = (3, 0.3) if quick else (9, 2.0)
    torch = _torch()
    workloads: dict[str, dict] = {}
    # W1
    fns: dict = {"ember eager": w1_step(ember, *w1_data(ember))}
    compiled = ember.compile(w1_step(ember, *w1_data(ember)))
    compiled()
    start = time.perf_counter()
    compiled()  # the trace happens on the second call (the first warms up eagerly)
    first = time.perf_counter() - start
    fns["ember compiled"] = compiled
    if torch is not None:
        fns["torch eager"] = w1_step(torch, *w1_data(torch))
    jx = jax_versions()
    if jx is not None:
        jw1, jw5, jnp = jx
        rng = np.random.RandomState(0)
        w = (jnp.asarray(rng.randn(D_IN, H), jnp.float32), jnp.asarray(rng.randn(H, D_OUT), jnp.float32))
        jxv, jyv = jnp.asarray(rng.randn(N, D_IN), jnp.float32), jnp.asarray(rng.randn(N, D_OUT), jnp.float32)
        fns["jax jit"] = lambda: jw1(w, jxv, jyv)[0].block_until_ready()
    if torch is not None:
        fns["torch.compile"] = _torch_compile(torch, w1_step(torch, *w1_data(torch)), "W1")
    workloads["W1"] = {k: v for k, v in fns.items() if v is not None}
    # W5
    fns = {"ember eager": w5_step(ember, *w5_data(ember)), "ember compiled": ember.compile(w5_step(ember, *w5_data(ember)))}
    if torch is not None:
        fns["torch eager"] = w5_step(torch, *w5_data(torch))
    if jx is not None:
        jp, jx5 = jnp.ones(W5_SIZE, jnp.float32), jnp.ones(W5_SIZE, jnp.float32)
        fns["jax jit"] = lambda: jw5(jp, jx5)[0].block_until_ready()
    if torch is not None:
        fns["torch.compile"] = _torch_compile(torch, w5_step(torch, *w5_data(torch)), "W5")
    workloads["W5"] = {k: v for k, v in fns.items() if v is not None}
    workloads["W2"] = w2_callables()

    rows: dict[str, dict[str, float]] = {}
    for name, fns in workloads.items():
        rows[name] = {k: v * 1e6 for k, v in interleaved_medians(fns, rounds=rounds, min_time=min_time).items()}
        base = rows[name].get("torch eager")
        print(f"{name}:")
        for impl, us in rows[name].items():
            ratio = f"  {us / base:6.3f}x torch eager" if base else ""
            print(f"  {impl:16s} {us:10.1f} us{ratio}")
    print(f"W1 first compiled call (trace + passes + first run): {first:.3f} s "
          f"(trace + passes alone: {compiled.last.trace_seconds:.3f} s)")
    return rows


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
