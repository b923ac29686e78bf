"""ember compiled vs ember eager on the workloads of bench_workloads.py, call by call, in one process.

Each round runs one eager step and one compiled step (``ember.compile(step, measure=False)``, so the
graph always runs and nothing is decided for us), alternating which goes first, and records the
wall time and the process's CPU time of each. Prints medians, the compiled/eager ratio, what
``ember.compile`` itself would decide (a second compiled copy with the speed trial on) and the CPU.
On a shared machine read the CPU-time column with every library on one thread:
    OPENBLAS_NUM_THREADS=1 EMBER_CPU_THREADS=1 python benchmarks/bench_compile_vs_eager.py --only resnet18,gpt
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
import bench_workloads as bw  # noqa: E402
import workload_models as models  # noqa: E402


def _data(name: str) -> tuple:
    rng = np.random.default_rng(0)
    if name == "resnet18":
        return (models.resnet18, lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
                bw.cross_entropy, rng.standard_normal((128, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, 128))
    if name == "gpt":
        tokens = rng.integers(0, 65, (16, 257))
        return (models.gpt, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=3e-4), bw.cross_entropy,
                tokens[:, :-1].copy(), tokens[:, 1:].copy())
    if name == "w2":
        mlp = lambda lib: lib.nn.Sequential(lib.nn.Linear(784, 512), lib.nn.ReLU(), lib.nn.Linear(512, 10))  # noqa: E731
        return (mlp, lambda lib, m: lib.optim.Adam(m.parameters(), 1e-3), bw.cross_entropy,
                rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256))
    if name in ("w3", "mnist"):
        return (models.mnist_cnn, lambda lib, m: lib.optim.SGD(m.parameters(), 0.01, momentum=0.9 if name == "mnist" else 0),
                bw.cross_entropy, rng.standard_normal((64, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 64))
    if name == "w4":
        block = lambda lib: lib.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, norm_first=True)  # noqa: E731
        x = rng.standard_normal((16, 128, 256)).astype(np.float32)
        return block, lambda lib, m: lib.optim.Adam(m.parameters(), 1e-3), bw.mean_square, x, x
    raise SystemExit(f"unknown workload {name!r}")


def _w1_steps() -> dict:
    """W1 (two-layer net, manual SGD: no module or optimizer), the arrays of bench_workloads.py's W1."""
    rng = np.random.RandomState(0)
    arrays = [rng.randn(64, 1000), rng.randn(64, 10), rng.randn(1000, 100), rng.randn(100, 10)]
    out = {}
    for mode in ("eager", "compiled", "compiled (trial on)"):
        x, y, w1, w2 = (ember.tensor(a.astype(np.float32)) for a in arrays)
        w1.requires_grad_(True)
        w2.requires_grad_(True)
        step = models.two_layer_step(ember, w1, w2, 1e-6)
        if mode != "eager":
            step = ember.compile(step, measure=mode == "compiled (trial on)")
        out[mode] = (step, x, y)
    return out


def steps(name: str) -> dict:
    if name == "w1":
        return _w1_steps()
    build, make_opt, loss_fn, x, y = _data(name)
    out = {}
    for mode in ("eager", "compiled", "compiled (trial on)"):
        ember.manual_seed(0)
        model = build(ember)
        step = bw.train_step(ember, model, make_opt(ember, model), loss_fn)
        if mode != "eager":
            step = ember.compile(step, measure=mode == "compiled (trial on)")
        out[mode] = (step, ember.from_numpy(x), ember.from_numpy(y))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="w1,w2,w3,w4,resnet18,gpt")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"CPU: {bw.cpu_model()}\n{bw.versions()}")
    for name in args.only.split(","):
        modes = steps(name)
        for step, x, y in modes.values():
            for _ in range(3):
                step(x, y).item()
        wall: dict = {"eager": [], "compiled": []}
        cpu: dict = {"eager": [], "compiled": []}
        for r in range(args.rounds):
            order = ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")
            for mode in order:
                step, x, y = modes[mode]
                w, c = time.perf_counter(), time.process_time()
                step(x, y).item()
                wall[mode].append(time.perf_counter() - w)
                cpu[mode].append(time.process_time() - c)
            trial, tx, ty = modes["compiled (trial on)"]
            trial(tx, ty).item()  # untimed: lets the speed trial run to its decision
        med = {m: (statistics.median(wall[m]), statistics.median(cpu[m])) for m in wall}
        trial_fn = modes["compiled (trial on)"][0]
        decision = trial_fn.eager_reason or trial_fn.last.speed_note if trial_fn.last is not None else "?"
        print(f"\n{name}: median of {args.rounds} alternating calls")
        print(f"  eager     wall {med['eager'][0] * 1e3:9.2f} ms   cpu {med['eager'][1] * 1e3:9.2f} ms")
        print(f"  compiled  wall {med['compiled'][0] * 1e3:9.2f} ms   cpu {med['compiled'][1] * 1e3:9.2f} ms")
        print(f"  compiled / eager: wall {med['compiled'][0] / med['eager'][0]:.3f}x, "
              f"cpu {med['compiled'][1] / med['eager'][1]:.3f}x")
        print(f"  ember.compile's own decision: {decision}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
