"""``torch.utils.benchmark``: time statements with ``Timer`` and read ``Measurement`` s, as PyTorch's tutorials do.

``Timer(stmt, setup, globals=...)`` runs Python statements through :mod:`timeit` (``torch`` in the statement is
ember unless ``globals`` says otherwise); ``timeit(n)`` measures one block of ``n`` runs, ``blocked_autorange`` grows
the block until the timer's overhead is negligible and then measures blocks for at least ``min_run_time`` seconds,
``adaptive_autorange`` measures until the spread (IQR / median) is below a threshold. A ``Measurement`` holds the
block times and answers per-run ``times``, ``median``, ``mean``, ``iqr`` and prints as PyTorch's does; ``Compare``
prints a table of measurements grouped by label (rows: sub_label, columns: description).

Example:
    >>> from ember.utils.benchmark import Timer
    >>> m = Timer("x + 1", setup="x = torch.ones(4)").timeit(100)
    >>> m.number_per_run, len(m.times), m.mean > 0
    (100, 1, True)
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import math
import textwrap
import timeit as _timeit
from typing import Any, Callable, Iterable, Iterator

import numpy as np

import ember
from ember import _config

__all__ = ["Timer", "Measurement", "TaskSpec", "Compare", "Language", "select_unit", "timer"]

timer = _timeit.default_timer
_IQR_WARN = 0.1        # IQR / median above this: "could indicate system fluctuation"
_IQR_GROSS_WARN = 0.25  # above this: "suggests significant environmental influence"
_MIN_INTERVAL = 25e-9  # seconds: the narrowest confidence interval significant_figures assumes


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What was timed (everything but the globals)."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        if self.setup in ("", "pass"):
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup else f"setup: {self.setup}"

    def summarize(self) -> str:
        parts = [p for p in (self.title, self.description or "", self.setup_str()) if p]
        return "\n".join(f"{p}\n" if "\n" in p else p for p in parts)


def select_unit(t: float) -> tuple[str, float]:
    """The unit that shows ``t`` seconds with a leading part of 1-999: ``select_unit(2e-3) == ("ms", 1e-3)``."""
    exponent = int(math.log10(t) // 3) if t > 0 and math.isfinite(t) else 0
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


@dataclasses.dataclass(repr=False)
class Measurement:
    """Block times of one statement: ``raw_times[i]`` is the time of ``number_per_run`` runs."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    def __getattr__(self, name: str) -> Any:  # the task's fields read through (m.stmt, m.label, ...)
        if name != "task_spec" and name in TaskSpec.__dataclass_fields__:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    @property
    def times(self) -> list[float]:
        """Seconds per run of each block."""
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q: float) -> float:
        return float(np.quantile(np.asarray(self.times, dtype=np.float64), q))

    @property
    def median(self) -> float:
        return self._quantile(0.5)

    @property
    def mean(self) -> float:
        return float(np.mean(self.times))

    @property
    def iqr(self) -> float:
        return self._quantile(0.75) - self._quantile(0.25)

    def meets_confidence(self, threshold: float = _IQR_WARN) -> bool:
        return self.iqr / self.median < threshold

    @property
    def has_warnings(self) -> bool:
        return bool(self._warnings())

    def _warnings(self) -> list[str]:
        if len(self.times) < 2 or self.meets_confidence(_IQR_WARN):
            return []
        why = ("This suggests significant environmental influence." if not self.meets_confidence(_IQR_GROSS_WARN)
               else "This could indicate system fluctuation.")
        return [f"  WARNING: Interquartile range is {self.iqr / self.median * 100:.1f}% of the median measurement.\n"
                f"           {why}"]

    @property
    def significant_figures(self) -> int:
        """A rough count of trustworthy digits, from the spread of the middle half of the times (1 to 4)."""
        ordered = sorted(self.times)
        middle = ordered[len(ordered) // 4: math.ceil(3 * len(ordered) / 4)]
        interval = max(1.645 * float(np.std(middle)) / math.sqrt(len(middle)), _MIN_INTERVAL)
        return min(max(int(math.floor(math.log10(self.median / interval))), 1), 4)

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str:
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

    def __repr__(self) -> str:
        n = len(self.times)
        unit, scale = select_unit(self.median)
        lines = [object.__repr__(self),
                 self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self.median / scale:.2f} {unit}"]
        if n >= 4:
            p25, p75 = self._quantile(0.25), self._quantile(0.75)
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({p25 / scale:.2f} to {p75 / scale:.2f})")
        threads = self.task_spec.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}")
        lines.extend(self._warnings())
        return "\n".join(lines)

    @staticmethod
    def merge(measurements: Iterable["Measurement"]) -> list["Measurement"]:
        """Replicates of the same task as one measurement each (times per run, ``number_per_run=1``)."""
        groups: dict[TaskSpec, list[float]] = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    before = ember.get_num_threads()
    if n == before:  # nothing to change (and nothing to restore: BLAS keeps the pool it has)
        yield
        return
    settings = ember.surface.constants._SETTINGS
    saved = settings["num_threads"], _config.CPU_THREADS  # "unset" included (set_num_threads sets both)
    ember.set_num_threads(n)
    try:
        yield
    finally:
        ember.set_num_threads(before)
        settings["num_threads"], _config.CPU_THREADS = saved


class Timer:
    """Time a Python statement: ``Timer("f(x)", globals={"f": f, "x": x}).blocked_autorange()``."""

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict | None = None, label: str | None = None,
                 sub_label: str | None = None, description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError(f"Timer: stmt must be a string of Python code, got {type(stmt).__name__}; "
                             "wrap a call as Timer('f(x)', globals={'f': f, 'x': x})")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Timer: only Python statements can be timed (language={language!r}); ember has no "
                             "C++ front end")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be "
                             "moved to `setup`.")
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", ember)
        stmt, setup = _clean(stmt), _clean(setup)
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt, setup, global_setup, label, sub_label, description, env, num_threads)

    def _time(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> Measurement:
        """One block of ``number`` runs (after a short warm-up of ``max(number // 100, 2)`` runs)."""
        with _threads(self._task_spec.num_threads):
            self._time(max(number // 100, 2))
            return Measurement(number, [self._time(number)], self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable | None = None) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self, min_run_time: float) -> int:
        """Runs per block: grow by 10x until the empty timer's overhead is below 1e-4 of a block."""
        with _threads(self._task_spec.num_threads):
            overhead = float(np.median([self._time(0) for _ in range(5)]))
            number = 1
            while True:
                taken = self._time(number)
                if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or taken > min_run_time:
                    return number
                if number * 10 > 2147483647:
                    return number
                number *= 10

    def _measure(self, number: int, stop: Callable[[list], bool], min_run_time: float,
                 max_run_time: float | None, callback: Callable | None) -> list[float]:
        times: list[float] = []
        total, done = 0.0, False
        with _threads(self._task_spec.num_threads):
            while total < min_run_time or not done:
                spent = self._time(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                done = stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def blocked_autorange(self, callback: Callable | None = None, min_run_time: float = 0.2) -> Measurement:
        """Blocks of a size that makes the timer's overhead negligible, for at least ``min_run_time`` seconds."""
        number = self._block_size(min_run_time)
        times = self._measure(number, lambda t: True, min_run_time, None, callback)
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01, max_run_time: float = 10.0,
                           callback: Callable | None = None) -> Measurement:
        """Measure blocks until IQR / median < ``threshold`` (after 4 blocks) or ``max_run_time`` seconds."""
        number = self._block_size(0.05)

        def stop(times: list) -> bool:
            return len(times) > 3 and Measurement(number, times, self._task_spec).meets_confidence(threshold)

        return Measurement(number, self._measure(number, stop, min_run_time, max_run_time, callback),
                           self._task_spec)

    def collect_callgrind(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("Timer.collect_callgrind needs valgrind and PyTorch's C++ bindings; ember has "
                                  "neither. Use blocked_autorange() or ember.profiler.")


def _clean(code: str) -> str:
    code = textwrap.dedent(code)
    return (code[1:] if code.startswith("\n") else code).rstrip()


class Compare:
    """A table of measurements: one block per label, rows by sub_label (or stmt), columns by description."""

    def __init__(self, results: list) -> None:
        self._results = [r for r in results if r is not None]
        self._trim = False
        self._colorize = False

    def colorize(self, rowwise: bool = False) -> None:
        self._colorize = True  # accepted; the table is printed without terminal colors

    def trim_significant_figures(self) -> None:
        self._trim = True

    def highlight_warnings(self) -> None:
        pass

    def extend_results(self, results: list) -> None:
        self._results.extend(results)

    def print(self) -> None:
        print(str(self))

    def __str__(self) -> str:
        blocks = []
        for label, group in _ordered_groups(Measurement.merge(self._results), lambda m: m.task_spec.label):
            blocks.append(self._table(label, group))
        return "\n".join(blocks)

    def _table(self, label: str | None, group: list) -> str:
        columns = list(dict.fromkeys(m.task_spec.description for m in group))
        rows = list(dict.fromkeys((m.task_spec.num_threads, m.as_row_name) for m in group))
        cell = {((m.task_spec.num_threads, m.as_row_name), m.task_spec.description): m for m in group}
        unit, scale = select_unit(min(m.median for m in group))
        texts = {}
        for key, m in cell.items():
            value = m.median / scale
            # trimmed: only the digits the spread supports (Measurement.significant_figures)
            if self._trim:
                decimals = max(m.significant_figures - int(math.ceil(math.log10(abs(value)))), 0) if value else 0
                texts[key] = f"{round(value, decimals):.{decimals}f}"
            else:
                texts[key] = f"{value:.1f}"
        name_width = max(len(r[1]) for r in rows) + 4
        widths = [max(len(c or ""), *(len(texts.get((r, c), "")) for r in rows)) + 4 for c in columns]
        header = " " * name_width + "|" + "|".join((c or "").center(w) for c, w in zip(columns, widths))
        width = len(header)
        lines = [f"[{(' ' + label + ' ') if label else '':-^{width - 2}}]", header]
        prior_threads = None
        for r in rows:
            if r[0] != prior_threads:
                lines.append(f"{r[0]} threads: ".ljust(width, "-"))
                prior_threads = r[0]
            lines.append(r[1].rjust(name_width - 2) + "  |" +
                         "|".join(texts.get((r, c), "").center(w) for c, w in zip(columns, widths)))
        names = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}
        lines += ["", f"Times are in {names[unit]} ({unit}).", ""]
        return "\n".join(lines)


def _ordered_groups(items: list, key: Callable) -> list:
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.items())
