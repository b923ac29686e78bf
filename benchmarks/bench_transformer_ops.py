"""The per-element ops of a Transformer training step, ember against PyTorch, per call, side by side:
layer_norm, rms_norm, gelu (erf and tanh forms), softmax and log_softmax (last dim), forward alone and
forward + backward, on the GPT (16 x 256 x 384, MLP 16 x 256 x 1536) and W4 (16 x 128 x 256, MLP 16 x 128 x 1024)
shapes of ``bench_workloads.py``; "bwd" times the backward kernels alone (ember's backward records, torch's aten
backward ops: what a training step pays), "fwd+bwd" ``y = op(x); y.backward(g)`` (in ember that also copies the root
gradient and hands ``x.grad`` a copy, which a real step does not do for an intermediate); ``--compiled`` adds forward + backward through ``ember.compile``
(``measure=False``: the graph always runs, so its own speed is what is timed).

    python benchmarks/bench_transformer_ops.py                       # both shapes, float32
    python benchmarks/bench_transformer_ops.py --only gpt --ops layer_norm,gelu --compiled
    python benchmarks/bench_transformer_ops.py --threads 1 --clock cpu   # one thread, CPU time per call

Each contender is timed in interleaved rounds in one process (A, B, A, B, ...); the table prints the medians
in ms and ember / torch (< 1: ember is faster). The two libraries' results are compared before timing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

if __name__ == "__main__" and "--threads" in sys.argv:  # before NumPy and torch load their thread pools
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]
    os.environ["EMBER_CPU_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved_medians  # noqa: E402
import ember  # noqa: E402
from ember.nn import functional as F  # noqa: E402
from ember.ops import nn_ops  # noqa: E402
from _timing import environment_line  # noqa: E402
from bench_workloads import cpu_model  # noqa: E402

import torch  # noqa: E402

SHAPES = {"gpt": ((16, 256, 384), (16, 256, 1536)), "w4": ((16, 128, 256), (16, 128, 1024))}


def op_pairs(model: str) -> dict[str, tuple[tuple, Callable, Callable, bool]]:
    """name -> (input shape, ember fn(x, w, b), torch fn(x, w, b), uses weight): the same call in both."""
    width, mlp = SHAPES[model]
    d = width[-1]
    return {
        "layer_norm": (width, lambda x, w, b: F.layer_norm(x, (d,), w, b),
                       lambda x, w, b: torch.nn.functional.layer_norm(x, (d,), w, b), True),
        "rms_norm": (width, lambda x, w, b: F.rms_norm(x, (d,), w, 1e-6),
                     lambda x, w, b: torch.nn.functional.rms_norm(x, (d,), w, 1e-6), True),
        "gelu": (mlp, lambda x, w, b: F.gelu(x), lambda x, w, b: torch.nn.functional.gelu(x), False),
        "gelu_tanh": (mlp, lambda x, w, b: F.gelu(x, approximate="tanh"),
                      lambda x, w, b: torch.nn.functional.gelu(x, approximate="tanh"), False),
        "softmax": (width, lambda x, w, b: F.softmax(x, dim=-1),
                    lambda x, w, b: torch.softmax(x, dim=-1), False),
        "log_softmax": (width, lambda x, w, b: F.log_softmax(x, dim=-1),
                        lambda x, w, b: torch.log_softmax(x, dim=-1), False),
    }


def backward_only(name: str, x: np.ndarray, g: np.ndarray, w: np.ndarray) -> tuple | None:
    """(ember, torch) calls of the op's backward kernel alone (ember's backward record, torch's aten backward op):
    what a training step's backward pays for the op, without the root-gradient copy and the leaf's ``.grad``
    that ``y.backward(g)`` on a lone op adds in ember. None for composites (rms_norm in both libraries)."""
    ex, eg, ew = ember.tensor(x), ember.tensor(g), ember.tensor(w)
    tx, tg, tw = torch.tensor(x), torch.tensor(g), torch.tensor(w)
    apply = ember.ops.dispatch.apply
    d = x.shape[-1]
    if name == "layer_norm":
        with ember.no_grad():
            _, mean, rstd = apply(nn_ops.LAYER_NORM, (ex, ew, ew), {"count": 1, "eps": 1e-5, "has_weight": True})
        _, tmean, trstd = torch.ops.aten.native_layer_norm(tx, [d], tw, tw, 1e-5)
        return (lambda: apply(nn_ops.LAYER_NORM_BACKWARD, (eg, ex, mean, rstd, ew), {"count": 1}),
                lambda: torch.ops.aten.native_layer_norm_backward(tg, tx, [d], tmean, trstd, tw, tw,
                                                                  [True, True, True]))
    if name in ("gelu", "gelu_tanh"):
        form = "tanh" if name == "gelu_tanh" else "none"
        return (lambda: apply(nn_ops.GELU_BACKWARD, (eg, ex), {"approximate": form}),
                lambda: torch.ops.aten.gelu_backward(tg, tx, approximate=form))
    if name in ("softmax", "log_softmax"):
        soft = name == "softmax"
        with ember.no_grad():
            ey = (F.softmax if soft else F.log_softmax)(ex, dim=-1)
        ty = (torch.softmax if soft else torch.log_softmax)(tx, -1)
        record = nn_ops.SOFTMAX_BACKWARD if soft else nn_ops.LOG_SOFTMAX_BACKWARD
        aten = torch.ops.aten._softmax_backward_data if soft else torch.ops.aten._log_softmax_backward_data
        return (lambda: apply(record, (eg, ey), {"dim": x.ndim - 1}), lambda: aten(tg, ty, -1, tx.dtype))
    return None


def contenders(name: str, shape: tuple, ember_fn: Callable, torch_fn: Callable, affine: bool, dtype: str,
               compiled: bool) -> dict[str, Callable]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = (1.0 + 0.1 * rng.standard_normal(shape[-1])).astype(dtype)
    b = (0.1 * rng.standard_normal(shape[-1])).astype(dtype)
    ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(g)
    ew, eb = ember.tensor(w, requires_grad=affine), ember.tensor(b, requires_grad=affine)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g)
    tw, tb = torch.tensor(w, requires_grad=affine), torch.tensor(b, requires_grad=affine)
    ex_const, tx_const = ember.tensor(x), torch.tensor(x)

    def ember_fwd() -> object:
        with ember.no_grad():
            return ember_fn(ex_const, ew, eb)

    def torch_fwd() -> object:
        with torch.no_grad():
            return torch_fn(tx_const, tw, tb)

    def ember_fwd_bwd() -> None:
        ex.grad = ew.grad = eb.grad = None
        ember_fn(ex, ew, eb).backward(eg)

    def torch_fwd_bwd() -> None:
        tx.grad = tw.grad = tb.grad = None
        torch_fn(tx, tw, tb).backward(tg)

    fns = {"ember fwd": ember_fwd, "torch fwd": torch_fwd}
    backward_ops = backward_only(name, x, g, w)
    if backward_ops is not None:
        fns["ember bwd"], fns["torch bwd"] = backward_ops
    fns.update({"ember fwd+bwd": ember_fwd_bwd, "torch fwd+bwd": torch_fwd_bwd})
    if compiled:
        graph = ember.compile(ember_fn, measure=False)

        def ember_compiled() -> None:
            ex.grad = ew.grad = eb.grad = None
            graph(ex, ew, eb).backward(eg)

        fns["ember compiled fwd+bwd"] = ember_compiled
    return fns


def check(fns: dict, tensors: tuple) -> None:
    """ember's and torch's forward agree before their times mean anything."""
    e = fns["ember fwd"]().numpy()
    t = fns["torch fwd"]().numpy()
    err = float(np.nanmax(np.abs(e - t)))
    if err > 1e-3 * max(1.0, float(np.abs(t).max())):
        raise AssertionError(f"ember and torch differ by {err:.2e}")


def _interleaved(fns: dict, rounds: int, min_time: float, clock: Callable) -> dict:
    """The shared interleaved timer (benchmarks/_timing.py) with this benchmark's warm-up."""
    return interleaved_medians(fns, rounds, min_time, warmup=2, clock=clock)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(SHAPES), help="one workload's shapes")
    parser.add_argument("--ops", help="comma-separated ops (default: all)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--compiled", action="store_true", help="also forward + backward through ember.compile")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per contender per op")
    parser.add_argument("--threads", type=int, help="BLAS/OpenMP/torch/ember threads (default: the libraries' own)")
    parser.add_argument("--clock", choices=("wall", "cpu", "process"), default="wall",
                        help="cpu: time.thread_time (with --threads 1 only); process: time.process_time")
    args = parser.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu counts the calling thread only: use it with --threads 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = {"cpu": time.thread_time, "process": time.process_time, "wall": time.perf_counter}[args.clock]
    print(f"{cpu_model()}; {environment_line()}; torch {torch.__version__} ({torch.get_num_threads()} threads); "
          f"ember threads {os.environ.get('EMBER_CPU_THREADS', '(default)')}; numba "
          f"{'yes' if ember.backends.native_kernel(np, 'gelu_f32') is not None else 'no'}; {args.dtype}; "
          f"clock: {args.clock}")
    wanted = args.ops.split(",") if args.ops else None
    parts = ["fwd", "bwd", "fwd+bwd"] + (["compiled fwd+bwd"] if args.compiled else [])
    for model in ([args.only] if args.only else list(SHAPES)):
        print(f"\n{model}: ms per call, ember / torch (ratio)")
        print(f"  {'op':<13}{'shape':<16}" + "".join(f"{p:>26}" for p in parts))
        for name, (shape, ember_fn, torch_fn, affine) in op_pairs(model).items():
            if wanted and name not in wanted:
                continue
            fns = contenders(name, shape, ember_fn, torch_fn, affine, args.dtype, args.compiled)
            check(fns, ())
            t = _interleaved(fns, args.rounds, args.min_time, clock)
            cells = []
            for part in parts:
                if f"ember {part}" not in t:
                    cells.append("-")
                    continue
                e, p = t[f"ember {part}"], t[f"torch {part.replace('compiled ', '')}"]
                cells.append(f"{e * 1e3:8.3f} / {p * 1e3:7.3f} {e / p:5.2f}x")
            print(f"  {name:<13}{'x'.join(map(str, shape)):<16}" + "".join(f"{c:>26}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
