"""This machine's limits: peak FLOP/s per dtype and memory bandwidth, measured once and cached.

:func:`peak` times a large matrix multiply per dtype (what the BLAS behind NumPy reaches, i.e. the
best a program on this machine can hope for) and a large copy (bytes read + written per second).
The result is cached in ``$EMBER_HOME/hardware.json`` (default ``~/.cache/ember``) under a key made
of the device model (the CPU's ``model name`` from ``/proc/cpuinfo`` and its core count), the NumPy
version and its BLAS, so a new machine or a new BLAS measures again. The whole measurement takes
about a second and a half.

:func:`roofline` turns (FLOPs, bytes, seconds) into what every ember report states: achieved FLOP/s,
fraction of peak (MFU), achieved bandwidth and which bound applies (compute or memory).

Example:
    >>> import ember
    >>> p = ember.hardware.peak()                        # doctest: +SKIP
    >>> r = ember.hardware.roofline(2e9, 1e8, 0.5)       # doctest: +SKIP
    >>> r.bound, f"{r.mfu:.1%}"                          # doctest: +SKIP
    ('compute', '4.1%')
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ember.backends import get_backend
from ember.dtypes import to_dtype

# GEMM sizes per dtype: big enough to reach the BLAS's steady state, small enough to stay quick.
# NumPy has no BLAS for 16-bit floats (it loops in C), so those get a small size and are slow.
_GEMM_SIZES = {"float64": 1024, "float32": 1024, "float16": 256, "bfloat16": 512}
_COPY_BYTES = 64 * 2**20
_FORMAT_VERSION = 1


@dataclass
class Peak:
    """Measured limits of one device: FLOP/s per dtype name and copy bandwidth in bytes/s."""

    device: str
    model: str
    flops: dict = field(default_factory=dict)
    bandwidth: float = 0.0
    measured_at: str = ""
    seconds: float = 0.0

    def flops_for(self, dtype: Any) -> float:
        """Peak FLOP/s for ``dtype`` (an ember/NumPy dtype or its name); float32's for unknown ones."""
        name = getattr(dtype, "name", None) or str(dtype)
        return self.flops.get(name) or self.flops.get("float32") or 1.0

    def ridge(self, dtype: Any = "float32") -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.flops_for(dtype) / self.bandwidth

    def __str__(self) -> str:
        rates = ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in self.flops.items())
        return f"{self.model} ({self.device}): {rates}; copy bandwidth {self.bandwidth / 1e9:.1f} GB/s"


def cpu_model() -> str:
    """The CPU's model name and logical core count, e.g. ``'AMD EPYC 7B13 (2 cores)'``."""
    name = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown CPU"
    return f"{name} ({os.cpu_count()} cores)"


def _blas_name() -> str:
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older NumPy: no dict mode
        return "blas"


def _device_backend(device: str) -> tuple:
    """(backend, index) serving a non-CPU device string such as ``'cuda'`` or ``'cuda:1'``."""
    kind, _, index = str(device).partition(":")
    return get_backend(kind), int(index or 0)


def device_model(device: str = "cpu") -> str:
    """The model of ``device``: the CPU's (:func:`cpu_model`) or the GPU's name as its backend reports it."""
    if str(device) == "cpu":
        return cpu_model()
    backend, index = _device_backend(device)
    props = backend.device_properties(index)
    return f"{props['name']} ({props['multi_processor_count']} SMs, {props['total_memory'] / 2**30:.0f} GiB)"


def cache_key(device: str = "cpu") -> str:
    """What a cached measurement is valid for: device model + NumPy + BLAS (on a GPU: its backend and library)."""
    if str(device) == "cpu":
        return f"{device}|{cpu_model()}|numpy {np.__version__}|{_blas_name()}"
    backend, _ = _device_backend(device)
    library = getattr(backend.xp, "__version__", None) or getattr(backend.xp, "__name__", "?")
    return f"{device}|{device_model(device)}|{backend.name} {library}"


def cache_path() -> Path:
    home = os.environ.get("EMBER_HOME")
    root = Path(home) if home else Path.home() / ".cache" / "ember"
    return root / "hardware.json"


def _best_rate(work: float, fn: Any, budget: float) -> float:
    """``work`` per second of the fastest of repeated ``fn()`` calls within ``budget`` seconds."""
    fn()  # warm up (page in, BLAS threads start)
    best = float("inf")
    start = time.perf_counter()
    runs = 0
    while runs < 3 or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
        if runs >= 50:
            break
    return work / best


def measure_gemm(dtype: str, n: int | None = None, budget: float = 0.25) -> float:
    """Peak FLOP/s of an ``n x n`` matrix multiply in ``dtype`` (2 n^3 FLOPs)."""
    n = n or _GEMM_SIZES.get(dtype, 512)

    npd = to_dtype(dtype).np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(npd)
    b = rng.standard_normal((n, n)).astype(npd)
    out = np.empty((n, n), dtype=np.result_type(a, b))
    return _best_rate(2.0 * n**3, lambda: np.matmul(a, b, out=out), budget)


def measure_bandwidth(nbytes: int = _COPY_BYTES, budget: float = 0.3) -> float:
    """Copy bandwidth in bytes/s: a copy of ``nbytes`` reads and writes each byte once."""
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    return _best_rate(2.0 * src.nbytes, lambda: np.copyto(dst, src), budget)


def _timed_on_device(backend: Any, fn: Any) -> float:
    """Seconds of ``fn()``'s device work, timed with the backend's events (CUDA events on a GPU)."""
    start, end = backend.new_event(enable_timing=True), backend.new_event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def _best_device_rate(backend: Any, work_of: Any, make: Any, budget: float, sizes: tuple) -> float:
    """The best rate over growing problem sizes: the size grows while the rate still rises by 10% and a run
    lasts under a quarter second (a GPU needs large problems to reach its peak; a slow device must not run
    for minutes)."""
    best = 0.0
    for size in sizes:
        fn = make(size)
        fn()  # warm up: library handles, kernels compiled, memory paged in
        backend.synchronize(None)
        start, runs, fastest = time.perf_counter(), 0, float("inf")
        while runs < 3 or (time.perf_counter() - start < budget / len(sizes) and runs < 20):
            fastest = min(fastest, _timed_on_device(backend, fn))
            runs += 1
        rate = work_of(size) / max(fastest, 1e-9)
        if rate < 1.1 * best or fastest > 0.25:
            return max(best, rate)
        best = rate
    return best


def measure_device(device: str, dtypes: tuple = ("float32", "float64", "bfloat16", "float16"),
                   quick: bool = False) -> Peak:
    """A GPU's peak through its backend's array namespace: GEMMs per dtype (growing to 8192^2 until a run
    is long enough) and a device-to-device copy, timed with the backend's events."""
    backend, index = _device_backend(device)
    xp = backend.xp
    begin = time.perf_counter()
    budget = 0.1 if quick else 0.6
    sizes = (128, 256) if quick else (128, 256, 512, 1024, 2048, 4096, 8192)
    flops = {}
    for name in dtypes:
        try:
            npd = to_dtype(name).np
            a = backend.asarray(np.ones((8, 8), dtype=npd), index=index)
            xp.matmul(a, a)  # a dtype the library cannot multiply is skipped, not guessed
        except Exception:
            continue

        def gemm(n: int, npd: Any = npd) -> Any:
            host = np.random.default_rng(0).standard_normal((n, n)).astype(npd)
            a, b = backend.asarray(host, index=index), backend.asarray(host.T.copy(), index=index)
            return lambda: xp.matmul(a, b)

        flops[name] = _best_device_rate(backend, lambda n: 2.0 * n**3, gemm, budget, sizes)

    def copy(nbytes: int) -> Any:
        src = backend.asarray(np.ones(nbytes // 8), index=index)
        dst = backend.asarray(np.zeros(nbytes // 8), index=index)
        return lambda: xp.copyto(dst, src)

    byte_sizes = (2**22, 2**24) if quick else (2**22, 2**24, 2**26, 2**28)
    bandwidth = _best_device_rate(backend, lambda n: 2.0 * (n // 8) * 8, copy, budget, byte_sizes)
    return Peak(device=str(device), model=device_model(device), flops=flops, bandwidth=bandwidth,
                measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), seconds=time.perf_counter() - begin)


def measure(device: str = "cpu", dtypes: tuple = ("float32", "float64", "bfloat16", "float16"),
            quick: bool = False) -> Peak:
    """Measure now (no cache). ``quick`` shrinks sizes and budgets (for tests). A GPU (``'cuda'``,
    ``'cuda:1'``) is measured through its backend (:func:`measure_device`)."""
    if str(device) != "cpu":
        return measure_device(device, dtypes, quick)
    start = time.perf_counter()
    flops = {}
    for name in dtypes:
        n = min(_GEMM_SIZES.get(name, 512), 256) if quick else None
        flops[name] = measure_gemm(name, n, budget=0.05 if quick else 0.2)
    bandwidth = measure_bandwidth(16 * 2**20 if quick else _COPY_BYTES, budget=0.05 if quick else 0.2)
    return Peak(device=device, model=cpu_model(), flops=flops, bandwidth=bandwidth,
                measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                seconds=time.perf_counter() - start)


_MEMO: dict = {}


def peak(device: str = "cpu", refresh: bool = False) -> Peak:
    """This device's limits, measured once per machine (cached on disk) and per process (memory).

    Example:
        >>> ember.hardware.peak().flops_for(ember.float32) > 0   # doctest: +SKIP
        True
    """
    key = cache_key(device)
    if not refresh and key in _MEMO:
        return _MEMO[key]
    path = cache_path()
    stored = _read_cache(path)
    entry = stored.get(key)
    if refresh or not _valid(entry):
        result = measure(device)
        stored[key] = {"version": _FORMAT_VERSION, **asdict(result)}
        _write_cache(path, stored)
    else:
        fields = {k: entry[k] for k in ("device", "model", "flops", "bandwidth", "measured_at", "seconds")}
        result = Peak(**fields)
    _MEMO[key] = result
    return result


def _valid(entry: Any) -> bool:
    """A cache entry is used only if it has the current layout and sane numbers (the file is data,
    never trusted blindly)."""
    try:
        return (entry["version"] == _FORMAT_VERSION and float(entry["bandwidth"]) > 0
                and all(float(v) > 0 for v in entry["flops"].values()) and "float32" in entry["flops"])
    except (TypeError, KeyError, ValueError, AttributeError):
        return False


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, data: dict) -> None:
    """Atomic: a temporary file in the same folder, then a rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: keep the measurement in memory only


@dataclass
class Roofline:
    """What a run achieved against this machine's roofs."""

    flops: float
    bytes: float
    seconds: float
    peak_flops: float
    peak_bandwidth: float

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def mfu(self) -> float:
        """Achieved FLOP/s as a fraction of the peak (model FLOPs utilization)."""
        return self.flops_per_s / self.peak_flops

    @property
    def bandwidth_fraction(self) -> float:
        return self.bytes_per_s / self.peak_bandwidth

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def bound(self) -> str:
        """``'compute'`` or ``'memory'``: the roof that caps this intensity (the roofline model)."""
        return "compute" if self.intensity >= self.peak_flops / self.peak_bandwidth else "memory"

    @property
    def attained(self) -> float:
        """Achieved fraction of the roof that applies (1.0 = on the roofline)."""
        limit = min(self.peak_flops, self.intensity * self.peak_bandwidth)
        return self.flops_per_s / limit if limit else 0.0

    def __str__(self) -> str:
        return (f"{self.flops_per_s / 1e9:.2f} GFLOP/s = {self.mfu:.1%} of peak (MFU), "
                f"{self.bytes_per_s / 1e9:.2f} GB/s = {self.bandwidth_fraction:.1%} of bandwidth; "
                f"{self.bound}-bound (intensity {self.intensity:.2f} FLOP/B, ridge "
                f"{self.peak_flops / self.peak_bandwidth:.1f}), {self.attained:.0%} of that roof")


_REMEASURED: set = set()


def observed(achieved_flops: float, achieved_bandwidth: float, dtype: Any = "float32", device: str = "cpu") -> Peak:
    """The peak, corrected when a real run went faster than it (the measurement ran while the machine was
    busy): re-measure once per process (that measurement is cached), and if the run still beats it, the run's
    rate becomes the peak for the rest of this process only. A run's rate is never written to the cache: a
    run whose FLOPs are approximated (fit counts the first step's and scales by samples) or whose window was
    mis-timed would otherwise lower every later MFU on this machine, in every process."""
    p = peak(device)
    name = getattr(dtype, "name", None) or str(dtype)
    if achieved_flops <= p.flops_for(dtype) and achieved_bandwidth <= p.bandwidth:
        return p
    if device not in _REMEASURED:
        _REMEASURED.add(device)
        p = peak(device, refresh=True)
    if achieved_flops > p.flops_for(dtype) or achieved_bandwidth > p.bandwidth:
        flops = dict(p.flops)
        if name in flops or name == "float32":
            flops[name] = max(flops.get(name, 0.0), achieved_flops)
        p = Peak(p.device, p.model, flops, max(p.bandwidth, achieved_bandwidth), p.measured_at, p.seconds)
        _MEMO[cache_key(device)] = p
    return p


def roofline(flops: float, nbytes: float, seconds: float, dtype: Any = "float32", device: str = "cpu") -> Roofline:
    """Achieved rates of a run of ``flops`` FLOPs moving ``nbytes`` bytes in ``seconds`` on ``device``.

    A run faster than the recorded peak corrects it (:func:`observed`), so MFU never exceeds 100%."""
    p = peak(device)
    if seconds > 0 and (flops / seconds > p.flops_for(dtype) or nbytes / seconds > p.bandwidth):
        p = observed(flops / seconds, nbytes / seconds, dtype, device)
    return Roofline(float(flops), float(nbytes), float(seconds), p.flops_for(dtype), p.bandwidth)
