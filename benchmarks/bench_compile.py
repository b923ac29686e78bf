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
    def step(x=x, y=y):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with lib.no_grad():
            w1.sub_(LR * w1.grad)
            w2.sub_(LR * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()
        return loss
    return step


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


def main(quick: bool = False) -> dict:
    repeat = 30 if quick else 200
    rows: dict[str, dict[str, float]] = {"W1": {}, "W5": {}}
    # ember eager and compiled
    x, y, w1, w2 = w1_data(ember)
    rows["W1"]["ember eager"] = median_us(w1_step(ember, x, y, w1, w2), repeat)
    x, y, w1, w2 = w1_data(ember)
    compiled = ember.compile(w1_step(ember, x, y, w1, w2))
    compiled()
    start = time.perf_counter()
    compiled()  # the trace happens on the second call (the first warms up eagerly)
    first = time.perf_counter() - start
    rows["W1"]["ember compiled"] = median_us(compiled, repeat)
    xs, ps = w5_data(ember)
    rows["W5"]["ember eager"] = median_us(w5_step(ember, xs, ps), repeat)
    w5c = ember.compile(w5_step(ember, xs, ps))
    rows["W5"]["ember compiled"] = median_us(w5c, repeat)
    try:
        import torch

        tx, ty, tw1, tw2 = w1_data(torch)
        rows["W1"]["torch eager"] = median_us(w1_step(torch, tx, ty, tw1, tw2), repeat)
        txs, tps = w5_data(torch)
        rows["W5"]["torch eager"] = median_us(w5_step(torch, txs, tps), repeat)
        for name, fn in (("W1", w1_step(torch, *w1_data(torch))), ("W5", w5_step(torch, *w5_data(torch)))):
            try:
                tc = torch.compile(fn)
                tc()
                rows[name]["torch.compile"] = median_us(tc, repeat)
            except Exception as error:  # noqa: BLE001 - no C++ toolchain, unsupported backend...
                print(f"torch.compile {name}: unavailable ({type(error).__name__})")
    except ImportError:
        print("torch not installed: no PyTorch columns")
    jx = jax_versions()
    if jx is not None:
        jw1, jw5, jnp = jx
        rng = np.random.RandomState(0)
        w = (jnp.asarray(rng.randn(D_IN, H), jnp.float32), jnp.asarray(rng.randn(H, D_OUT), jnp.float32))
        jxv, jyv = jnp.asarray(rng.randn(N, D_IN), jnp.float32), jnp.asarray(rng.randn(N, D_OUT), jnp.float32)
        rows["W1"]["jax jit"] = median_us(lambda: jw1(w, jxv, jyv)[0].block_until_ready(), repeat)
        jp, jx5 = jnp.ones(W5_SIZE, jnp.float32), jnp.ones(W5_SIZE, jnp.float32)
        rows["W5"]["jax jit"] = median_us(lambda: jw5(jp, jx5)[0].block_until_ready(), repeat)
    for name, row in rows.items():
        base = row.get("torch eager")
        print(f"{name}:")
        for impl, us in row.items():
            ratio = f"  {us / base:6.3f}x torch eager" if base else ""
            print(f"  {impl:16s} {us:10.1f} us{ratio}")
    print(f"W1 first compiled call (trace + passes + first run): {first:.3f} s "
          f"(trace + passes alone: {compiled.last.trace_seconds:.3f} s)")
    return rows


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
