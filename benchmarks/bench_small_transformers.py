"""Small vision transformers at 32x32, where per-op overhead is most of the step: torchvision's ViT and Swin
layouts at toy width (ember.vision against torchvision with the same weights), one training step each (forward,
cross entropy, backward, SGD), CPU time per step on one thread, ember and torch alternating in one process.

    python benchmarks/bench_small_transformers.py                       # ember / torch per model
    python benchmarks/bench_small_transformers.py --ab /work/main       # another checkout's ember (old) vs this one

``--ab OLD_REPO`` starts process pairs (old, new, then new, old, ...; ``PYTHONPATH`` set to each tree), each timing
both libraries, and prints the best per-process median of old and new ember, their ratios to torch and new/old.
The ViT is ``VisionTransformer(image_size=32, patch_size=4, num_layers=4, num_heads=4, hidden_dim=64, mlp_dim=128)``
(65 tokens), the Swin ``SwinTransformer(patch_size=[2, 2], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
window_size=[4, 4])`` (a 16x16 grid of patches, shifted windows, one patch merging); batch 8, float32.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vision"))
import ember  # noqa: E402
import ember.vision  # noqa: E402
from _ab import cpu_model  # noqa: E402
from torchvision_ref import import_torchvision, randomize_, state_dict_to_numpy  # noqa: E402

CONFIGS = {
    "vit": ("VisionTransformer", dict(image_size=32, patch_size=4, num_layers=4, num_heads=4, hidden_dim=64,
                                      mlp_dim=128, num_classes=10)),
    "swin": ("SwinTransformer", dict(patch_size=[2, 2], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                     window_size=[4, 4], num_classes=10)),
}


def steps(name: str, batch: int = 8) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(ember step, torch step) for one model, both starting from the same weights."""
    cls, config = CONFIGS[name]
    tv = import_torchvision()
    torch.manual_seed(0)
    reference = randomize_(getattr(tv.models, cls)(**config))
    model = getattr(ember.vision.models, cls)(**config)
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, batch)

    def make(lib: Any, net: Any) -> Callable[[], Any]:
        net.train()
        opt = lib.optim.SGD(net.parameters(), lr=1e-3)
        xb, yb = lib.from_numpy(x), lib.from_numpy(y)

        def step() -> Any:
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
            return loss
        return step

    return make(ember, model), make(torch, reference)


def measure(names: list[str], rounds: int, min_time: float) -> dict[str, tuple[float, float]]:
    """{model: (ember ms, torch ms)}, medians of alternating rounds of CPU time per step."""
    torch.set_num_threads(1)
    out = {}
    for name in names:
        pair = steps(name)
        calls = []
        for fn in pair:
            for _ in range(3):
                fn()
            start = time.process_time()
            fn()
            calls.append(max(1, int(min_time / max(time.process_time() - start, 1e-6))))
        samples: tuple[list, list] = ([], [])
        for _ in range(rounds):
            for k, fn in enumerate(pair):
                start = time.process_time()
                for _ in range(calls[k]):
                    fn()
                samples[k].append((time.process_time() - start) / calls[k] * 1e3)
        out[name] = (statistics.median(samples[0]), statistics.median(samples[1]))
    return out


def _child(repo: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=repo, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", EMBER_CPU_THREADS="1")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--json", "--rounds", str(args.rounds),
                          "--min-time", str(args.min_time), "--only", args.only],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="vit,swin")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.3, help="CPU seconds per library per round")
    parser.add_argument("--ab", metavar="OLD_REPO", help="compare OLD_REPO's ember (old) with this checkout's (new)")
    parser.add_argument("--processes", type=int, default=2, help="--ab: process pairs (old, new) to alternate")
    parser.add_argument("--json", action="store_true", help="print one JSON line of medians (used by --ab)")
    args = parser.parse_args()
    names = args.only.split(",")
    if args.json:
        print(json.dumps(measure(names, args.rounds, args.min_time)))
        return
    header = (f"{cpu_model()}, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}; one thread; "
              f"training step at 32x32, batch 8; CPU time per step, medians of {args.rounds} rounds")
    if not args.ab:
        print(header)
        for name, (e, t) in measure(names, args.rounds, args.min_time).items():
            print(f"  {name:6s} ember {e:8.2f} ms  torch {t:8.2f} ms  {e / t:6.2f}x")
        return
    new_repo = str(Path(__file__).resolve().parent.parent)
    runs: dict = {"old": [], "new": []}
    for k in range(args.processes):
        for side in (("old", "new") if k % 2 == 0 else ("new", "old")):
            runs[side].append(_child(args.ab if side == "old" else new_repo, args))
    print(header + f"; {args.processes} process pairs, best of the per-process medians\n"
          f"old: {args.ab}\nnew: {new_repo}")
    print(f"  {'model':6s} {'old':>10s} {'new':>10s} {'torch':>10s} {'old/torch':>9s} {'new/torch':>9s} {'new/old':>8s}")
    for name in names:
        old = min(r[name][0] for r in runs["old"])
        new = min(r[name][0] for r in runs["new"])
        ref = min(r[name][1] for r in runs["old"] + runs["new"])
        print(f"  {name:6s} {old:8.2f}ms {new:8.2f}ms {ref:8.2f}ms {old / ref:8.2f}x {new / ref:8.2f}x {new / old:7.3f}")


if __name__ == "__main__":
    main()
