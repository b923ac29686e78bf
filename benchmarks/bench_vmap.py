"""Per-sample gradients with ember.func: vmap(grad(loss)) over a batch vs one batched backward, and vs torch.func.

A small MLP (in -> hidden -> classes, ReLU, cross entropy) and 256 samples. Three contenders, timed in
alternating rounds in CPU time (``time.process_time``: the machine is shared, wall time measures the
scheduler as much as the code):

* ``per-sample (vmap)``: ``vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)`` -> one gradient per sample;
* ``batched backward``: ``loss(model(x), y).backward()`` on the whole batch -> one summed gradient;
* ``torch.func``: PyTorch's vmap(grad) on the same model and data, and PyTorch's own batched backward (when
  torch is installed), for PyTorch's ratio of the two.

The target (issue 16): per-sample gradients within 2x of the batched backward. Also checks that
ember's per-sample gradients equal a Python loop of single-sample backward passes.

    python benchmarks/bench_vmap.py [--sizes 32,64,10] [--batch 256] [--rounds 9] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

# One BLAS thread for every contender: CPU time would otherwise count OpenBLAS/OpenMP workers spinning idle
# (tiny GEMMs here), and torch gets set_num_threads(1) below. Set before NumPy loads its BLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.func as ef  # noqa: E402
from _ab import cpu_model  # noqa: E402


def cpu_medians(fns: dict[str, Callable[[], Any]], rounds: int, min_time: float = 0.3) -> dict[str, float]:
    """Median CPU seconds per call, the contenders alternating round by round."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        start = time.process_time()
        fn()
        calls[name] = max(1, int(min_time / rounds / max(time.process_time() - start, 1e-6)))
    samples: dict[str, list] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.process_time()
            for _ in range(calls[name]):
                fn()
            samples[name].append((time.process_time() - start) / calls[name])
    return {name: statistics.median(v) for name, v in samples.items()}


def build(lib: Any, sizes: tuple, seed: int = 0) -> Any:
    lib.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(lib.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(lib.nn.ReLU())
    return lib.nn.Sequential(*layers)


def ember_contenders(sizes: tuple, x_np: np.ndarray, y_np: np.ndarray, device: str) -> tuple:
    model = build(ember, sizes).to(device)
    x, y = ember.tensor(x_np, device=device), ember.tensor(y_np, device=device)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p: dict, xi: Any, yi: Any) -> Any:
        out = ef.functional_call(model, p, (xi.unsqueeze(0),))
        return ember.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_sample = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))

    def batched() -> None:
        model.zero_grad()
        ember.nn.functional.cross_entropy(model(x), y).backward()

    return model, params, (lambda: per_sample(params, x, y)), batched, loss


def check_against_loop(params: dict, per_sample_fn: Callable, loss: Callable, x_np: np.ndarray, y_np: np.ndarray,
                       device: str, count: int = 8) -> float:
    """Largest difference between vmap's per-sample gradients and single-sample backward passes."""
    grads = per_sample_fn()
    worst = 0.0
    for i in range(min(count, len(x_np))):
        g = ef.grad(loss)(params, ember.tensor(x_np[i], device=device), ember.tensor(y_np[i], device=device))
        for k in g:
            worst = max(worst, float(np.abs(grads[k][i].cpu().numpy() - g[k].cpu().numpy()).max()))
    return worst


def torch_contenders(sizes: tuple, x_np: np.ndarray, y_np: np.ndarray) -> tuple | None:
    try:
        import torch
        from torch.func import functional_call, grad, vmap
    except ImportError:
        return None
    torch.set_num_threads(1)
    model = build(torch, sizes)
    x, y = torch.tensor(x_np), torch.tensor(y_np)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p: dict, xi: Any, yi: Any) -> Any:
        return torch.nn.functional.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    fn = vmap(grad(loss), in_dims=(None, 0, 0))

    def batched() -> None:
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()

    return (lambda: fn(params, x, y)), batched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="32,64,10", help="layer widths, input first")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (the stand-in device: EMBER_CUDA_STANDIN=1)")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((args.batch, sizes[0])).astype(np.float32)
    y_np = rng.integers(0, sizes[-1], args.batch)

    _, params, per_sample, batched, loss = ember_contenders(sizes, x_np, y_np, args.device)
    error = check_against_loop(params, per_sample, loss, x_np, y_np, args.device)
    fns = {"per-sample (vmap)": per_sample, "batched backward": batched}
    torch_fns = torch_contenders(sizes, x_np, y_np) if args.device == "cpu" else None
    if torch_fns is not None:
        fns["torch.func vmap(grad)"], fns["torch batched backward"] = torch_fns
    times = cpu_medians(fns, args.rounds)

    print(f"Per-sample gradients, MLP {'-'.join(map(str, sizes))}, batch {args.batch}, float32, device {args.device}")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; numpy {np.__version__}; one BLAS thread; CPU time, median "
          f"of {args.rounds} alternating rounds")
    print(f"max |vmap per-sample grad - single-sample backward| over 8 samples: {error:.2e}")
    base = times["batched backward"]
    for name, t in times.items():
        print(f"  {name:<24} {t * 1e3:8.3f} ms   {t / base:5.2f}x batched backward")
    ratio = times["per-sample (vmap)"] / base
    print(f"ratio per-sample / batched backward: {ratio:.2f} (target <= 2)")
    if torch_fns is not None:
        print(f"ratio torch.func per-sample / torch batched backward: "
              f"{times['torch.func vmap(grad)'] / times['torch batched backward']:.2f}")
        print(f"ratio ember per-sample / torch.func per-sample: "
              f"{times['per-sample (vmap)'] / times['torch.func vmap(grad)']:.2f}")


if __name__ == "__main__":
    main()
