"""The speed trial behind "``ember.compile`` is never slower than eager".

A compiled whole step is timed against the eager step on real calls of the user's loop: after
``WARM`` untimed compiled runs (they pay one-time costs: planned buffers' first use, and numba compiling
the short fused loops that move from NumPy to a compiled loop on their fourth run, ``fuse_later.RUNS``;
with one warm run those compiles fell inside the timed pairs, and W1's first trial chose eager on
pairs whose compiled calls were NumPy replays and a 0.2 s compile), ``PAIRS`` pairs of calls run compiled and eager back to back, the order flipping
from pair to pair, each call timed on two clocks: the wall clock and the process's CPU clock.

Decisions (and why):

* **Ratios within pairs, medians over pairs.** A load that comes and goes (other processes on a
  shared machine) moves both calls of a pair alike; the median ignores the pair that a burst hit.
  The earlier rule (fastest compiled call against fastest eager call, wall clock only) chose eager
  for a ResNet-18 step whose graph used 5% less CPU per call: under load one descheduled call set
  the eager figure.
* **Both clocks must say "slower".** Compiled and eager run the same op kernels with the same
  threads, so a graph that costs less CPU but measured slower on the wall clock was descheduled,
  not slower; a graph slower on both clocks is slower. So the signature runs eagerly only when the
  median wall ratio *and* the median CPU ratio exceed ``1 + MARGIN``.
* **Except when the graph keeps fewer cores busy.** "Same kernels, same threads" is not always true: a fused
  loop that ends in a reduction runs on one thread where eager's native kernels (gelu, its backward) use every
  core. Then the graph costs less CPU and more wall time on a quiet machine, which the rule above would keep.
  So the CPU seconds per wall second of each mode are compared too: when eager measurably used more than one
  core (above ``1 + CORES_MARGIN``) and the graph used ``CORES_MARGIN`` less, and the graph is slower on the
  wall clock, it runs eagerly (with one thread, or with every call descheduled, eager's figure stays at or
  below one core and this rule stays out of the way).
* **A tie runs eagerly.** The graph is kept only when it wins: its median ratio is below ``1 - WIN`` on at
  least one clock (and it is not slower on both). A graph within noise of eager on both clocks (a CNN whose
  step is convolutions that compiling leaves as they are: the graph runs eager's kernels and saves a few
  microseconds of dispatch per op) cannot win, and keeping it would make "compiled" a coin toss between 1%
  faster and 1% slower; eager is the reference, so such a signature runs eagerly and ``eager_reason`` says
  why, with the graph's size and its number of fused kernels (``hint``). Before, only a graph slower on both
  clocks by ``MARGIN`` ran eagerly (issue 11's run: MNIST compiled 1.06x against eager 1.05x).
* **Re-checked later.** The first calls of a run are the noisiest (allocator, caches, the other
  processes' own start-up), so the trial runs again after ``RECHECK_AFTER`` further calls and its
  new decision replaces the old one. Checking a graph that loses costs at most ``PAIRS`` slower calls
  in 50, then in 500.
* **Said once, kept visible.** The first time a function's signature switches to eager, the reason
  (both ratios, the medians, the number of pairs) is logged as a WARNING on the ``ember.compile``
  logger; every decision is logged at INFO and stays readable as ``compiled.eager_reason`` and in
  the first line of ``compiled.explain()``.
* **The clocks are a module attribute** (``CLOCKS``) so tests inject a fake clock and check the
  decision deterministically.

Example:
    >>> trial = SpeedTrial()
    >>> trial.next_mode()   # the first compiled calls are not timed
    'warm'
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

PAIRS = 5             # timed (compiled, eager) pairs per trial
WARM = 4              # untimed compiled calls before the first trial's pairs (fuse_later.RUNS + 1); 1 before a re-check
MARGIN = 0.03         # slower than eager on both clocks by more than this: runs eagerly
WIN = 0.02            # kept only when this much faster than eager on at least one clock (the median ratio)
CORES_MARGIN = 0.1    # eager above 1.1 cores and the graph 10% fewer: a wall-clock loss is the graph's
RECHECK_AFTER = (50, 500)  # calls after a decision at which the trial runs again
CLOCKS: tuple[Callable[[], float], Callable[[], float]] = (time.perf_counter, time.process_time)


class SpeedTrial:
    """The trial state of one compiled signature: which mode the next call runs and what was decided."""

    def __init__(self, hint: str = "") -> None:
        self.hint = hint                # what the graph is (nodes, fused kernels), said when it cannot win
        self.eager = False              # the current decision: run this signature eagerly
        self.running = True
        self.turn = 0                   # calls into the current trial
        self.warm = WARM                # untimed compiled calls that open the current trial
        self.pairs: list[tuple] = []    # (compiled wall, compiled cpu, eager wall, eager cpu)
        self._half: tuple | None = None
        self.rechecks = list(RECHECK_AFTER)
        self.since_decision = 0
        self.trials = 0                 # trials finished
        self.note = "speed trial: not finished"
        self.reason: str | None = None  # why the signature runs eagerly, when it does

    def next_mode(self) -> str:
        """``"warm"`` (compiled, untimed), ``"compiled"`` or ``"eager"`` (timed), or, once decided,
        ``"run compiled"``/``"run eager"``."""
        if not self.running:
            return "run eager" if self.eager else "run compiled"
        if self.turn < self.warm:
            return "warm"
        pair, second = divmod(self.turn - self.warm, 2)
        compiled_first = pair % 2 == 0
        return "compiled" if compiled_first != bool(second) else "eager"

    def record(self, mode: str, wall: float, cpu: float) -> bool:
        """Account for a call made in ``mode`` (timed with ``wall`` and ``cpu`` seconds); True when this call
        finished a trial (``self.eager``, ``self.reason`` and ``self.note`` then hold its decision)."""
        if not self.running:
            self.since_decision += 1
            if self.rechecks and self.since_decision >= self.rechecks[0]:
                self.rechecks.pop(0)
                self.running, self.turn, self.pairs, self._half, self.warm = True, 0, [], None, 1
            return False
        self.turn += 1
        if mode == "warm":
            return False
        if self._half is None:
            self._half = (mode, wall, cpu)
            return False
        first, self._half = self._half, None
        compiled, eager = (first, (mode, wall, cpu)) if first[0] == "compiled" else ((mode, wall, cpu), first)
        self.pairs.append((compiled[1], compiled[2], eager[1], eager[2]))
        if len(self.pairs) < PAIRS:
            return False
        return self._decide()

    def _decide(self) -> bool:
        tiny = 1e-9
        wall = statistics.median(c / max(e, tiny) for c, _, e, _ in self.pairs)
        cpu = statistics.median(c / max(e, tiny) for _, c, _, e in self.pairs)
        compiled_ms = statistics.median(p[0] for p in self.pairs) * 1e3
        eager_ms = statistics.median(p[2] for p in self.pairs) * 1e3
        figures = (f"compiled {compiled_ms:.3f} ms, eager {eager_ms:.3f} ms per call (wall, medians); "
                   f"compiled/eager {wall:.3f}x wall, {cpu:.3f}x CPU (medians of {len(self.pairs)} alternating pairs)")
        slower = wall > 1 + MARGIN and cpu > 1 + MARGIN
        wins = wall < 1 - WIN or cpu < 1 - WIN
        cores_c = statistics.median(c / max(w, tiny) for w, c, _, _ in self.pairs)
        cores_e = statistics.median(c / max(w, tiny) for _, _, w, c in self.pairs)
        fewer_cores = wall > 1 + MARGIN and cores_e > 1 + CORES_MARGIN and cores_c < cores_e * (1 - CORES_MARGIN)
        self.eager = slower or fewer_cores or not wins
        self.trials += 1
        self.running, self.since_decision, self.pairs = False, 0, []
        recheck = f"; checked again after {self.rechecks[0]} calls" if self.rechecks else ""
        if slower:
            self.reason = (f"the compiled graph is slower than eager on both clocks ({figures}), so this "
                           f"signature runs eagerly{recheck}")
        elif fewer_cores:
            self.reason = (f"the compiled graph is slower than eager on the wall clock and keeps fewer cores busy "
                           f"({cores_c:.2f} against eager's {cores_e:.2f} CPU seconds per second; {figures}), so this "
                           f"signature runs eagerly{recheck}")
        elif self.eager:
            graph = f" ({self.hint})" if self.hint else ""
            self.reason = (f"the compiled graph does not beat eager by {WIN:.0%} on either clock ({figures}): "
                           f"most of the step is in kernels the graph runs as eager does{graph}, so this signature "
                           f"runs eagerly{recheck}")
        if self.eager:
            self.note = "speed trial: " + self.reason
        else:
            self.reason = None
            self.note = f"speed trial: graph kept: {figures}{recheck}"
        return True
