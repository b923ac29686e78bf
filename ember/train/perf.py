"""What ``fit`` reports about the machine each epoch: MFU and where the step time goes.

``StepStats`` adds up, per epoch, the time each training step waited for its batch (the DataLoader),
the time spent moving the batch to the model's device, and the whole step time; the FLOPs of one
sample come from counting the first step with :class:`ember.utils.flop_counter.FlopCounterMode`
(forward, backward and optimizer ops), and so do its bytes (the ideal traffic of those ops). MFU is the
achieved FLOP/s over the wall time of the steps divided by this machine's measured peak for the model's
dtype (:mod:`ember.hardware`); the achieved bandwidth is over the measured copy bandwidth, and the bound is
the roofline's: compute when the step's FLOPs per byte are above the machine's ridge, else memory.

Example:
    >>> s = StepStats(flops_per_sample=1e6, peak_flops=1e9, bytes_per_sample=4e5, peak_bandwidth=1e9)
    >>> s.add(wait=0.1, transfer=0.0, total=1.0, samples=100)
    >>> round(s.mfu, 3), round(s.data_wait_share, 2), round(s.bandwidth_fraction, 2), s.bound
    (0.1, 0.1, 0.04, 'compute')
"""
from __future__ import annotations

from dataclasses import dataclass
from ember import hardware

_STEPS_BEFORE_CORRECTING = 20  # a few steps' timing is too noisy to overrule a measured peak


@dataclass
class StepStats:
    flops_per_sample: float = 0.0
    peak_flops: float = 0.0
    wait_s: float = 0.0
    transfer_s: float = 0.0
    total_s: float = 0.0
    samples: int = 0
    steps: int = 0
    bytes_per_sample: float = 0.0
    peak_bandwidth: float = 0.0

    def reset(self) -> None:
        self.wait_s = self.transfer_s = self.total_s = 0.0
        self.samples = self.steps = 0

    def add(self, wait: float, transfer: float, total: float, samples: int) -> None:
        self.wait_s += wait
        self.transfer_s += transfer
        self.total_s += total
        self.samples += samples
        self.steps += 1

    @property
    def flops_per_s(self) -> float:
        return self.flops_per_sample * self.samples / self.total_s if self.total_s > 0 else 0.0

    dtype: str = "float32"
    device: str = "cpu"  # whose peak MFU is measured against (a model on a GPU: the GPU's)

    @property
    def mfu(self) -> float:
        if self.peak_flops <= 0:
            return 0.0
        if self.flops_per_s > self.peak_flops and self.steps >= _STEPS_BEFORE_CORRECTING:
            # The cached peak was measured on a busier machine: re-measure once (ember.hardware.observed),
            # else adopt the run's rate, so MFU is never reported above 100%.

            self.peak_flops = hardware.observed(self.flops_per_s, 0.0, self.dtype, self.device).flops_for(self.dtype)
        return min(self.flops_per_s / self.peak_flops, 1.0)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_per_sample * self.samples / self.total_s if self.total_s > 0 else 0.0

    @property
    def bandwidth_fraction(self) -> float:
        return min(self.bytes_per_s / self.peak_bandwidth, 1.0) if self.peak_bandwidth > 0 else 0.0

    @property
    def bound(self) -> str:
        """``compute`` when the step's FLOPs per byte reach the ridge (peak FLOP/s over bandwidth), else
        ``memory`` (the roofline model; ``''`` before anything is known)."""
        if self.bytes_per_sample <= 0 or self.peak_flops <= 0 or self.peak_bandwidth <= 0:
            return ""
        return "compute" if self.flops_per_sample / self.bytes_per_sample >= self.peak_flops / self.peak_bandwidth \
            else "memory"

    @property
    def data_wait_share(self) -> float:
        return self.wait_s / self.total_s if self.total_s > 0 else 0.0

    @property
    def transfer_share(self) -> float:
        return self.transfer_s / self.total_s if self.total_s > 0 else 0.0

    def postfix(self) -> str:
        """The progress-bar text: ``1.9 GFLOP/s = MFU 3.2% - 1.4 GB/s memory-bound - data 12% - xfer 0%``."""
        roof = f" - {self.bytes_per_s / 1e9:.3g} GB/s {self.bound}-bound" if self.bound else ""
        return (f"{self.flops_per_s / 1e9:.3g} GFLOP/s = MFU {self.mfu:.1%}{roof} - data {self.data_wait_share:.0%} - "
                f"xfer {self.transfer_share:.0%}")

    def scalars(self) -> dict:
        """TensorBoard tags and values (``perf/memory_bound``: 1 when the roofline says memory-bound, else 0)."""
        out = {"perf/mfu": self.mfu, "perf/gflops_per_s": self.flops_per_s / 1e9,
               "perf/data_wait_share": self.data_wait_share, "perf/transfer_share": self.transfer_share}
        if self.bound:
            out.update({"perf/gbytes_per_s": self.bytes_per_s / 1e9, "perf/bandwidth_fraction": self.bandwidth_fraction,
                        "perf/memory_bound": float(self.bound == "memory")})
        return out
