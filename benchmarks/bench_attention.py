"""scaled_dot_product_attention and nn.MultiheadAttention: ember against PyTorch, per shape, forward and
forward + backward, timed in interleaved rounds in one process.

Shapes (the workloads' attention calls, laid out as the models produce them):
  gpt   B 16, 6 heads, T 256, head dim 64, is_causal=True; q, k, v head-split views of one qkv linear's output
        (bench_workloads.py's GPT block: ``view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)``)
  w4    B 16, 4 heads, T 128, head dim 64, no mask (nn.TransformerEncoderLayer 256 wide, 4 heads)
  mha   nn.MultiheadAttention(256, 4, batch_first=True) on (16, 128, 256), need_weights=False (W4's module call)

Prints per case: ember's and torch's median per call, ember / torch, and the CPU model. Examples:
    python benchmarks/bench_attention.py
    python benchmarks/bench_attention.py --only gpt --rounds 9
On a loaded machine compare one thread each on process CPU time:
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 EMBER_CPU_THREADS=1 \
    python benchmarks/bench_attention.py --threads 1 --clock cpu
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
from bench_workloads import cpu_model, versions  # noqa: E402

import torch  # noqa: E402

SHAPES = {"gpt": (16, 6, 256, 64, True), "w4": (16, 4, 128, 64, False)}


def _qkv(lib: Any, batch: int, heads: int, length: int, dim: int, grad: bool) -> tuple:
    """q, k, v as head-split views of one (B, T, 3, H, D) projection output, as a GPT block makes them."""
    rng = np.random.default_rng(0)
    packed = rng.standard_normal((batch, length, 3, heads, dim)).astype(np.float32)
    base = lib.tensor(packed, requires_grad=grad)
    return base, tuple(base.permute(2, 0, 3, 1, 4))


def sdpa_cases(lib: Any, name: str) -> dict:
    batch, heads, length, dim, causal = SHAPES[name]
    F = lib.nn.functional
    base, (q, k, v) = _qkv(lib, batch, heads, length, dim, True)
    grad = lib.tensor(np.random.default_rng(1).standard_normal((batch, heads, length, dim)).astype(np.float32))

    def forward() -> Any:
        with lib.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def forward_backward() -> Any:
        base.grad = None
        q2, k2, v2 = base.permute(2, 0, 3, 1, 4)
        F.scaled_dot_product_attention(q2, k2, v2, is_causal=causal).backward(grad)
        return base.grad

    return {f"{name} forward": forward, f"{name} forward+backward": forward_backward}


def mha_cases(lib: Any) -> dict:
    lib.manual_seed(0)
    mha = lib.nn.MultiheadAttention(256, 4, batch_first=True)
    x = lib.tensor(np.random.default_rng(2).standard_normal((16, 128, 256)).astype(np.float32), requires_grad=True)

    def forward() -> Any:
        with lib.no_grad():
            return mha(x, x, x, need_weights=False)[0]

    def forward_backward() -> Any:
        x.grad = None
        mha.zero_grad()
        mha(x, x, x, need_weights=False)[0].sum().backward()
        return x.grad

    return {"mha forward": forward, "mha forward+backward": forward_backward}


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, budget: float, clock: Callable[[], float]) -> dict:
    """Median seconds per call, contenders alternating round by round."""
    calls = {}
    for name, fn in fns.items():
        fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, int(budget / rounds / len(fns) / max(time.perf_counter() - start, 1e-6)))
    samples: dict[str, list] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(0.05)  # let the other library's spinning worker threads sleep
            start = clock()
            for _ in range(calls[name]):
                fn()
            samples[name].append((clock() - start) / calls[name])
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="gpt,w4,mha", help="comma-separated: gpt, w4, mha")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per case, all contenders together")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"CPU: {cpu_model()}\n{versions()}, ember threads {ember.get_num_threads()}, clock {args.clock}")
    print(f"{'case':<26}{'ember':>11}{'torch':>11}{'ember/torch':>13}")
    for name in args.only.split(","):
        ember_cases = mha_cases(ember) if name == "mha" else sdpa_cases(ember, name)
        torch_cases = mha_cases(torch) if name == "mha" else sdpa_cases(torch, name)
        for case in ember_cases:
            times = interleaved({"ember": ember_cases[case], "torch": torch_cases[case]}, args.rounds, args.budget,
                                clock)
            print(f"{case:<26}{times['ember'] * 1e3:9.2f}ms{times['torch'] * 1e3:9.2f}ms"
                  f"{times['ember'] / times['torch']:12.2f}x", flush=True)


if __name__ == "__main__":
    main()
