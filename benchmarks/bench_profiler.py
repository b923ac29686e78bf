"""Profiler overhead: the smallest ops and small training steps, profiler off vs on, and off vs the same
code with the profiler's hook lines removed ("before", timed in a subprocess).

    .venv/bin/python benchmarks/bench_profiler.py                   # off vs on, and vs a hook-free copy
    .venv/bin/python benchmarks/bench_profiler.py --no-before       # off vs on only
    .venv/bin/python benchmarks/bench_profiler.py --against main    # also the shapes recorder of git ref `main`

Modes: ``off`` (nothing records), ``on`` (``profile()``: which op ran when), ``on+shapes``
(``profile(record_shapes=True, profile_memory=True, with_flops=True)``, which all record the same: also
shapes, dtypes and the attributes that cost rules read, from which FLOPs, bytes and allocations are
computed after recording). "before" is a copy of this checkout's ``ember/``
with the hook lines deleted from dispatch, the autograd engine and device transfers (made by
:func:`make_before`), so off/before is what the hooks cost when nothing records.

Rounds alternate (off, on, on+shapes, off, ...), one training step (or 200 small ops) per sample, so a
noisy shared machine slows every contender alike; hundreds of rounds give per-step quantiles (the 25th
percentile and the median are printed: the low quantile is what the code costs, the median what a busy
machine gives), and the median of each round's own ratio (paired, the steadiest figure on a shared
machine) beside the ratio of the means (which keeps garbage-collector pauses and other outliers). Each sample is timed twice: wall clock and this thread's CPU time (CPU time does not
count time the scheduler gave to other processes; every workload here runs on one thread). The
"before" process is stepped once per round over a pipe, in the same alternation.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The hook lines, as they appear in the source: deleted to make the "before" tree.
_HOOK_LINES = re.compile(r"^\s*(t0 = (dispatch\.)?PROFILER and .*|(el)?if t0 and (dispatch\.)?PROFILER is not None:.*|"
                         r"(dispatch\.)?PROFILER\.(op|node|array_node|copy)\(.*)$")


def make_before(target: str) -> str:
    """Copy ``ember/`` to ``target`` and delete the profiler's hook lines (``t0`` becomes 0)."""
    shutil.copytree(os.path.join(ROOT, "ember"), os.path.join(target, "ember"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    removed = 0
    for path in ("ops/dispatch.py", "autograd/engine.py", "tensor.py"):
        full = os.path.join(target, "ember", path)
        lines = open(full).read().splitlines(keepends=True)
        kept = []
        for line in lines:
            if _HOOK_LINES.match(line):
                removed += 1
                continue
            kept.append(line)
        open(full, "w").write("".join(kept))
    if removed < 12:
        raise SystemExit(f"make_before: removed only {removed} hook lines; the hook code changed, update _HOOK_LINES")
    return target


def workloads() -> dict:
    import ember

    a, b = ember.randn(4), ember.randn(4)
    ga, gb = ember.randn(4, requires_grad=True), ember.randn(4, requires_grad=True)
    model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.ReLU(), ember.nn.Linear(128, 10))
    x, y = ember.randn(32, 64), ember.randint(0, 10, (32,))
    opt = ember.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        ember.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    tiny = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.Tanh(), ember.nn.Linear(16, 16), ember.nn.Tanh(),
                               ember.nn.Linear(16, 2))
    tx, ty = ember.randn(4, 8), ember.randint(0, 2, (4,))
    tiny_opt = ember.optim.Adam(tiny.parameters())

    def tiny_step() -> None:  # every op a few microseconds: the worst case for a Python-side profiler
        tiny_opt.zero_grad()
        ember.nn.functional.cross_entropy(tiny(tx), ty).backward()
        tiny_opt.step()

    from ember.train.mnist import build_cnn

    cnn = build_cnn()
    cnn_opt = ember.optim.Adam(cnn.parameters())
    images, labels = ember.randn(64, 1, 28, 28), ember.randint(0, 10, (64,))

    def cnn_step() -> None:  # the demo's training step (batch 64)
        cnn_opt.zero_grad()
        ember.nn.functional.cross_entropy(cnn(images), labels).backward()
        cnn_opt.step()

    # name: (fn, calls per sample, sample every n-th round)
    return {"a + b": (lambda: a + b, 200, 1), "a + b (requires_grad)": (lambda: ga + gb, 200, 1),
            "tiny MLP Adam step (4x8)": (tiny_step, 1, 1), "MLP SGD step (32x64)": (step, 1, 1),
            "demo CNN Adam step (64)": (cnn_step, 1, 10)}


def timed(fn, calls: int) -> tuple:
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls, (time.thread_time() - cpu) / calls


_RECORDERS: dict = {}
_REF_MODULE: list = []  # the recorder module of --against REF, once loaded


def load_recorder(ref: str):
    """``ember/profiler/_recorder.py`` as it is at git ``ref``, imported as a module of its own (its Recorder
    gets the same hook calls: the hooks call methods only)."""
    import importlib.util

    source = subprocess.check_output(["git", "-C", ROOT, "show", f"{ref}:ember/profiler/_recorder.py"])
    path = os.path.join(tempfile.mkdtemp(prefix="ember_recorder_"), "_recorder_ref.py")
    with open(path, "wb") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("_recorder_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _REF_MODULE.append(module)
    return module


def recorder(mode: str, key: str = ""):
    """One recorder per mode and workload for the whole run, as one profile spans many steps (a fresh one
    per sample would charge every sample for interning the step's signatures, which a profile pays once)."""
    from ember.profiler import _recorder

    if mode == "off":
        return None
    if (mode, key) not in _RECORDERS:
        make = _REF_MODULE[0].Recorder if mode == "+shapes ref" else _recorder.Recorder
        _RECORDERS[mode, key] = make(shapes=mode != "on")
    return _RECORDERS[mode, key]


def run_mode(mode: str, fn, calls: int, key: str = "") -> tuple:
    from ember.profiler import _recorder

    rec = recorder(mode, key)
    if rec is None:
        return timed(fn, calls)
    _recorder.attach(rec)
    try:
        return timed(fn, calls)
    finally:
        _recorder.detach(rec)


def events_per_call(fn) -> int:
    from ember.profiler import _recorder

    rec = _recorder.Recorder()
    _recorder.attach(rec)
    try:
        fn()
    finally:
        _recorder.detach(rec)
    return rec.count()


def worker(rounds: int) -> None:
    """The "before" process: time each workload once per line read on stdin (the line is the round number)."""
    loads = workloads()
    for fn, calls, _ in loads.values():
        for _ in range(3):
            timed(fn, calls)
    for _ in range(rounds):
        r = int(sys.stdin.readline())
        out = {}
        for name, (fn, calls, every) in loads.items():
            if r % every == 0:
                fn()  # untimed, as in the main process
                out[name] = timed(fn, calls)
        print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-before", action="store_true", help="skip the hook-free copy")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--against", metavar="REF", help="also time the shapes recorder of this git ref (e.g. main)")
    args = parser.parse_args()
    if args.worker:
        return worker(args.rounds)
    from _timing import environment_line

    from ember import hardware

    print(f"CPU: {hardware.cpu_model()}; {environment_line()}; python {sys.version.split()[0]}")
    modes = ["off", "on", "on+shapes"]
    if args.against:
        load_recorder(args.against)
        modes.append("+shapes ref")
        print(f"'+shapes ref': the shapes recorder of {args.against}, timed in the same rotation")
    loads = workloads()
    for name, (fn, calls, _) in loads.items():
        for mode in modes:
            run_mode(mode, fn, calls, name)
    events = {name: events_per_call(fn) for name, (fn, _, _) in loads.items()}
    before = None
    if not args.no_before:
        tree = make_before(tempfile.mkdtemp(prefix="ember_before_"))
        env = dict(os.environ, PYTHONPATH=tree)
        before = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "--rounds", str(args.rounds)],
                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree)
    samples: dict = {name: {m: [] for m in ["before"] + modes} for name in loads}
    for r in range(args.rounds):
        if before is not None:
            before.stdin.write(f"{r}\n")
            before.stdin.flush()
            for name, value in json.loads(before.stdout.readline()).items():
                samples[name]["before"].append(tuple(value))
        for name, (fn, calls, every) in loads.items():
            if r % every == 0:
                fn()  # untimed: the workload's code and data back in cache, so no mode pays for the switch
                k = r % len(modes)
                for mode in modes[k:] + modes[:k]:  # each mode goes first in as many rounds
                    samples[name][mode].append(run_mode(mode, fn, calls, name))
    if before is not None:
        before.wait()
        shutil.rmtree(tree, ignore_errors=True)

    def quantile(xs: list, q: float) -> float:
        return sorted(xs)[int(q * (len(xs) - 1))] if xs else float("nan")

    for clock, k in (("wall clock", 0), ("thread CPU time", 1)):
        print(f"\n{clock}, median over {args.rounds} rounds of each round's ratio (paired: a load spike hits both "
              f"sides of a ratio), and ratio of the means (GC pauses and other outliers included)")
        ref = "+shapes ref" in modes
        print(f"{'workload':<26}{'events':>7}{'off/before':>16}{'on/off':>16}{'+shapes/off':>16}"
              + (f"{'ref/off':>16}" if ref else ""))
        for name, by in samples.items():
            def ratio(a: str, b: str) -> str:
                pairs = [(x[k], y[k]) for x, y in zip(by[a], by[b])]
                if not pairs:
                    return f"{'-':>16}"
                paired = statistics.median(x / y for x, y in pairs)
                means = statistics.mean(x for x, _ in pairs) / statistics.mean(y for _, y in pairs)
                return f"{paired:>9.3f}x/{means:.2f}x"
            print(f"{name:<26}{events[name]:>7}{ratio('off', 'before')}{ratio('on', 'off')}{ratio('on+shapes', 'off')}"
                  + (ratio("+shapes ref", "off") if ref else ""))
        for label, q in (("25th percentile", 0.25), ("median", 0.5)):
            print(f"\n{clock}, {label} of {args.rounds} alternating rounds")
            print(f"{'workload':<26}{'events':>7}{'before':>12}{'off':>12}{'on':>12}{'on+shapes':>12}"
                  f"{'off/before':>11}{'on/off':>8}{'+shapes/off':>12}{'us/event':>9}")
            for name, by in samples.items():
                v = {m: quantile([s[k] for s in xs], q) for m, xs in by.items()}
                per_event = (v["on"] - v["off"]) / max(events[name], 1) * 1e6
                print(f"{name:<26}{events[name]:>7}{v['before'] * 1e6:>10.2f}us{v['off'] * 1e6:>10.2f}us"
                      f"{v['on'] * 1e6:>10.2f}us{v['on+shapes'] * 1e6:>10.2f}us{v['off'] / v['before']:>10.3f}x"
                      f"{v['on'] / v['off']:>7.3f}x{v['on+shapes'] / v['off']:>11.3f}x{per_event:>9.2f}")


if __name__ == "__main__":
    main()
