"""Sparse COO and CSR on a Cora-sized graph: a 2-layer GCN step (forward + backward) in ember vs PyTorch, sparse vs dense.

The graph has Cora's sizes: 2,708 nodes, 10,556 directed edges (5,278 random undirected pairs), self-loops
added and normalized as Kipf & Welling (D^-1/2 (A + I) D^-1/2, 13,264 stored entries), 1,433 binary features
at Cora's density (49,216 nonzeros), 16 hidden units, 7 classes. The step is pytorch/examples' GCN:
``relu(A @ (X @ W1)) -> A @ (h @ W2) -> cross_entropy`` and ``backward()``, with A and X sparse COO tensors
(or dense tensors, for the dense rows). Contenders run in alternating rounds; each reports the median wall
time and the median CPU time (``time.process_time``, all threads of the process) per step: the machine is
shared, and CPU time is the steadier figure there.

    python benchmarks/bench_sparse.py [--rounds 9] [--threads N]

Rows: ember sparse (numba kernels), ember sparse with the NumPy kernels (``EMBER_CPU_KERNELS=numpy``'s
path), torch sparse, the same three with A and X in the CSR layout, ember dense, torch dense; then the
sparse @ dense product alone (COO and CSR).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ab import cpu_model  # noqa: E402

import ember  # noqa: E402
from ember import _config  # noqa: E402
from ember.backends import cpu_kernels  # noqa: E402

NODES, EDGES, FEATURES, HIDDEN, CLASSES, FEATURE_NNZ = 2708, 10556, 1433, 16, 7, 49216


def cora_like(seed: int = 0) -> dict:
    """Random graph and features with Cora's sizes (NumPy arrays; both libraries build from them)."""
    rng = np.random.default_rng(seed)
    pairs: set = set()
    while len(pairs) < EDGES // 2:
        a, b = rng.integers(0, NODES, 2)
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    half = np.array(sorted(pairs), dtype=np.int64)
    edges = np.concatenate([half, half[:, ::-1]])
    loops = np.arange(NODES)
    rows, cols = np.concatenate([edges[:, 0], loops]), np.concatenate([edges[:, 1], loops])
    degree = np.bincount(rows, minlength=NODES).astype(np.float64)
    values = (1 / np.sqrt(degree[rows] * degree[cols])).astype(np.float32)
    order = np.lexsort((cols, rows))
    flat = rng.choice(NODES * FEATURES, FEATURE_NNZ, replace=False)
    flat.sort()
    x_idx = np.stack([flat // FEATURES, flat % FEATURES])
    return dict(adj_idx=np.stack([rows[order], cols[order]]), adj_val=values[order], x_idx=x_idx,
                x_val=np.ones(FEATURE_NNZ, np.float32), labels=rng.integers(0, CLASSES, NODES),
                w1=(rng.standard_normal((FEATURES, HIDDEN)) * 0.05).astype(np.float32),
                w2=(rng.standard_normal((HIDDEN, CLASSES)) * 0.2).astype(np.float32))


def gcn_step(lib: Any, data: dict, sparse: bool, layout: str = "coo") -> Callable[[], float]:
    """One training step's forward and backward in ``lib`` (ember or torch); ``layout="csr"``: A and X as CSR."""
    adj = lib.sparse_coo_tensor(lib.tensor(data["adj_idx"]), lib.tensor(data["adj_val"]), (NODES, NODES)).coalesce()
    x = lib.sparse_coo_tensor(lib.tensor(data["x_idx"]), lib.tensor(data["x_val"]), (NODES, FEATURES)).coalesce()
    if not sparse:
        adj, x = adj.to_dense(), x.to_dense()
    elif layout == "csr":
        adj, x = adj.to_sparse_csr(), x.to_sparse_csr()
    spmm = lib.spmm if layout == "coo" else lib.mm
    w1 = lib.tensor(data["w1"], requires_grad=True)
    w2 = lib.tensor(data["w2"], requires_grad=True)
    labels = lib.tensor(data["labels"])
    cross_entropy = lib.nn.functional.cross_entropy

    def step() -> float:
        w1.grad = w2.grad = None
        h = lib.relu(spmm(adj, lib.mm(x, w1)))
        out = spmm(adj, h @ w2)
        loss = cross_entropy(out, labels)
        loss.backward()
        return float(loss)

    return step


def product(lib: Any, data: dict, layout: str = "coo") -> Callable[[], Any]:
    adj = lib.sparse_coo_tensor(lib.tensor(data["adj_idx"]), lib.tensor(data["adj_val"]), (NODES, NODES)).coalesce()
    if layout == "csr":
        adj = adj.to_sparse_csr()
    dense = lib.tensor(np.random.default_rng(1).standard_normal((NODES, HIDDEN)).astype(np.float32))
    return lambda: lib.sparse.mm(adj, dense)


def numpy_kernels(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run on ember's portable NumPy path (native kernels off for the call)."""
    def run() -> Any:
        previous = _config.CPU_KERNELS
        _config.CPU_KERNELS = "numpy"
        cpu_kernels.reset()
        try:
            return fn()
        finally:
            _config.CPU_KERNELS = previous
            cpu_kernels.reset()
    return run


def alternating(fns: dict[str, Callable[[], Any]], rounds: int, min_time: float = 0.4) -> dict[str, tuple]:
    """Median (wall, CPU) seconds per call of each function, timed in alternating rounds."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, int(min_time / max(time.perf_counter() - start, 1e-6)))
    wall: dict[str, list] = {name: [] for name in fns}
    cpu: dict[str, list] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(0.1)  # let the other library's worker threads stop spinning
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls[name]):
                fn()
            wall[name].append((time.perf_counter() - w0) / calls[name])
            cpu[name].append((time.process_time() - c0) / calls[name])
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in fns}


def report(title: str, results: dict[str, tuple], baseline: str) -> None:
    base_wall, base_cpu = results[baseline]
    print(f"\n{title}")
    print(f"  {'':<34}{'wall':>10}{'CPU':>10}   CPU / {baseline}")
    for name, (w, c) in results.items():
        print(f"  {name:<34}{w * 1e3:8.2f}ms{c * 1e3:8.2f}ms   {c / base_cpu:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    data = cora_like()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"numpy {np.__version__}, ember CPU threads {os.environ.get('EMBER_CPU_THREADS', 'default')}")
    print(f"graph: {NODES} nodes, {data['adj_idx'].shape[1]} stored adjacency entries, features {NODES}x{FEATURES} "
          f"with {FEATURE_NNZ} nonzeros; GCN {FEATURES} -> {HIDDEN} -> {CLASSES}")
    steps = {
        "ember sparse (numba kernels)": gcn_step(ember, data, True),
        "ember sparse (NumPy kernels)": numpy_kernels(gcn_step(ember, data, True)),
        "torch sparse": gcn_step(torch, data, True),
        "ember CSR (numba kernels)": gcn_step(ember, data, True, "csr"),
        "ember CSR (NumPy kernels)": numpy_kernels(gcn_step(ember, data, True, "csr")),
        "torch CSR": gcn_step(torch, data, True, "csr"),
        "ember dense": gcn_step(ember, data, False),
        "torch dense": gcn_step(torch, data, False),
    }
    losses = {name: fn() for name, fn in steps.items()}
    spread = max(losses.values()) - min(losses.values())
    print(f"losses agree: {min(losses.values()):.6f} .. {max(losses.values()):.6f} (spread {spread:.1e})")
    report("2-layer GCN step, forward + backward", alternating(steps, args.rounds), "torch sparse")
    products = {
        "ember sparse.mm (numba)": product(ember, data),
        "ember sparse.mm (NumPy)": numpy_kernels(product(ember, data)),
        "torch sparse.mm": product(torch, data),
        "ember CSR sparse.mm (numba)": product(ember, data, "csr"),
        "ember CSR sparse.mm (NumPy)": numpy_kernels(product(ember, data, "csr")),
        "torch CSR sparse.mm": product(torch, data, "csr"),
    }
    report(f"sparse @ dense alone: ({NODES}x{NODES}, {data['adj_idx'].shape[1]} entries) @ ({NODES}x{HIDDEN})",
           alternating(products, args.rounds), "torch sparse.mm")


if __name__ == "__main__":
    main()
