"""Interleaved rounds with each library in a process of its own, driven round by round through pipes.

Why: in one process the libraries share more than the cores. NumPy's OpenBLAS workers, woken by ember's
products, busy-wait for ~0.1 s after each call; torch's OpenMP and XLA's Eigen workers do the same; ember's
import sets glibc's malloc thresholds for the whole process. W1's torch eager measured 0.6-1.2 ms in
bench_workloads' shared-process rounds against 0.47-0.5 ms alone on the same idle machine. Here torch eager and
torch.compile run in one child process, ember eager and compiled in another, JAX in a third (none imports another
library), as each library's users run them; the parent only sends "run mode M for N calls" and reads back the
time per call. Before each round it waits until every other child's threads have stopped using the CPU (their
spinning workers asleep: summed per-thread run time from ``/proc/<pid>/task/*/schedstat``, nanoseconds), and it
records how much CPU the idle children took during the round (``spill``), so any interference that is left
shows in the report instead of in one library's time.

Protocol (JSON lines): the child sends ``{"modes": {name: seconds for one call}, "title", "scale", "notes"}``
when ready; the parent sends ``{"run": name, "calls": n}`` (answer ``{"t": seconds per call}``, on the child's
clock: wall or process CPU) or ``{"notes": 1}`` (answer ``{"notes": {...}}``) or ``{"exit": 1}``.

Example (what bench_workloads.main does per workload):
    >>> rounds = IsolatedRounds(["torch", "ember"], child_argv)          # doctest: +SKIP
    >>> medians = rounds.interleaved(rounds=5, budget=40.0, pause=0.3)   # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent / "bench_workloads.py"


def run_time_ns(pid: int) -> int:
    """Nanoseconds of CPU all threads of process ``pid`` have run (0 where /proc has no schedstat)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


class Child:
    """One library's process: its modes, their single-call times, its notes."""

    def __init__(self, group: str, argv: list[str]) -> None:
        self.group = group
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen([sys.executable, str(SCRIPT), *argv, "--child", group], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None, text=True, bufsize=1, env=env)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.group} benchmark process exited (code {self.proc.wait()})")
        return json.loads(line)

    def ask(self, message: dict) -> dict:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"exit": 1}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()


class IsolatedRounds:
    """The children of one workload and their interleaved rounds."""

    def __init__(self, groups: list[str], argv: list[str]) -> None:
        self.children: list[Child] = []
        for group in groups:
            try:
                self.children.append(Child(group, argv))
            except RuntimeError as error:
                print(f"  {group}: unavailable ({error})", flush=True)
        self.owner = {mode: child for child in self.children for mode in child.ready.get("modes", {})}
        self.spill: dict[str, float] = {}  # mode -> largest share of a core the other children used in its rounds
        self.waits: list[float] = []  # seconds spent waiting for the other children to go quiet

    def modes(self, order: tuple[str, ...]) -> list[str]:
        """The modes the children can run, in ``order`` first (then any others, e.g. --gemm extras)."""
        names = list(self.owner)
        return sorted(names, key=lambda m: (order.index(m) if m in order else len(order), names.index(m)))

    def first(self, key: str, default: Any = None) -> Any:
        for child in self.children:
            if child.ready.get(key):
                return child.ready[key]
        return default

    def _quiet(self, running: Child, pause: float, limit: float = 2.0) -> None:
        """Sleep ``pause``, then until the children other than ``running`` use < 2% of a core over 20 ms."""
        start = time.perf_counter()
        time.sleep(pause)
        others = [c.proc.pid for c in self.children if c is not running]
        while others and time.perf_counter() - start < limit:
            before = sum(run_time_ns(pid) for pid in others)
            time.sleep(0.02)
            if sum(run_time_ns(pid) for pid in others) - before < 0.02 * 0.02e9:
                break
        self.waits.append(time.perf_counter() - start - pause)

    def interleaved(self, order: tuple[str, ...], rounds: int, budget: float, pause: float) -> dict[str, list]:
        """Per-round seconds per call of each mode: rounds alternate A, B, C, A, B, C... across the processes."""
        modes = self.modes(order)
        calls = {m: max(1, int(budget / rounds / len(modes) / max(self.owner[m].ready["modes"][m], 1e-6)))
                 for m in modes}
        samples: dict[str, list] = {m: [] for m in modes}
        for _ in range(rounds):
            for mode in modes:
                child = self.owner[mode]
                self._quiet(child, pause)
                others = [c.proc.pid for c in self.children if c is not child]
                idle_before, wall = sum(run_time_ns(pid) for pid in others), time.perf_counter()
                samples[mode].append(child.ask({"run": mode, "calls": calls[mode]})["t"])
                wall = time.perf_counter() - wall
                share = (sum(run_time_ns(pid) for pid in others) - idle_before) / 1e9 / max(wall, 1e-9)
                self.spill[mode] = max(self.spill.get(mode, 0.0), share)
        return samples

    def notes(self) -> dict:
        out: dict = {}
        for child in self.children:
            out.update(child.ask({"notes": 1}).get("notes", {}))
        return out

    def close(self) -> None:
        for child in self.children:
            child.close()


def protocol_stream() -> Any:
    """The child's protocol stream, taken before anything is imported or printed: a copy of file descriptor 1,
    which (and ``sys.stdout``) then points at stderr, so whatever the libraries print reaches the terminal."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def serve(proto: Any, fns: dict[str, Any], ready: dict, clock: Any, notes: Any) -> None:
    """The child's side: announce ``ready`` on ``proto``, then run rounds until told to exit."""
    proto.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        message = json.loads(line)
        if "exit" in message:
            break
        if "notes" in message:
            proto.write(json.dumps({"notes": notes()}) + "\n")
            continue
        fn, calls = fns[message["run"]], message["calls"]
        start = clock()
        for _ in range(calls):
            fn()
        proto.write(json.dumps({"t": (clock() - start) / calls}) + "\n")


def round_medians(samples: dict[str, list]) -> dict[str, float]:
    return {mode: statistics.median(values) for mode, values in samples.items()}
