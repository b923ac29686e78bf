"""``make test-programs``: run the real PyTorch programs through ``ember run`` and compare with PyTorch.

The programs (pytorch/examples, nanoGPT, minGPT) are never committed: ``../shared/programs`` (or
``EMBER_PROGRAMS_HOME``) holds the runner and the manifest, and ``PROGRAMS_DIR`` (default: its
``programs/`` folder) the files ``prep/materialize.py`` brought in. Where either is missing this says so
and exits 0 (a clean skip).

Usage:
    python tools/run_programs.py [--only NAME,...] [other run.py options]
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    candidates = [os.path.join(os.path.dirname(ROOT), "shared", "programs"),  # ../shared/programs
                  os.path.join(os.path.dirname(os.path.dirname(ROOT)), "shared", "programs")]  # from a worktree
    home = os.environ.get("EMBER_PROGRAMS_HOME") or next((c for c in candidates if os.path.isdir(c)), candidates[0])
    runner = os.path.join(home, "run.py")
    programs = os.environ.get("PROGRAMS_DIR") or os.path.join(home, "programs")
    if not os.path.isfile(runner):
        print(f"test-programs: skipped (no runner at {runner}; set EMBER_PROGRAMS_HOME)")
        return 0
    if not os.path.isdir(os.path.join(programs, "pytorch_examples")):
        print(f"test-programs: skipped (no programs under {programs}; bring them in with "
              f"{os.path.join(home, 'prep', 'materialize.py')} and set PROGRAMS_DIR)")
        return 0
    try:
        import torch  # noqa: F401  (the reference side of each comparison)
    except ImportError:
        print("test-programs: skipped (the reference torch is not installed: make test installs it)")
        return 0
    # The ember side runs through `ember run` from this checkout (run.py replaces PYTHONPATH).
    launcher = f"{sys.executable} -c \"import sys; sys.path.insert(1, {ROOT!r}); from ember.cli import main; " \
               f"sys.exit(main())\" run"
    # Both runs use the runner's torchvision stand-in (same data subsets), not ember.vision.
    env = dict(os.environ, PROGRAMS_DIR=programs, EMBER_RUN_NO_VISION="1")
    return subprocess.call([sys.executable, runner, "--ember-cmd", launcher, *argv], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
