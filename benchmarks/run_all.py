"""Run every benchmark, one after another, each in its own process (so no library's threads or
allocator state leak into the next). Run alone on the machine: `make bench`."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = ["bench_core.py", "bench_nn.py", "bench_compile.py", "bench_dataloader.py", "bench_distributed.py",
          "bench_workloads.py", "bench_vision.py"]


def main() -> int:
    failed = []
    for name in SUITES:
        print(f"\n===== {name} =====", flush=True)
        if subprocess.run([sys.executable, str(HERE / name)]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
