"""The trust fuzzer: seeded random snippets run on ember and on torch 2.13 (CPU), compared.

Each area has a generator in ``trust_cases.py``; every case is compared on values, dtypes, shapes, the
inputs after the call (in-place writes through views), gradients where asked, and errors (ember must raise
where torch raises). Differences that are decisions are in ``trust_allow.py`` with their reasons; any other
difference fails, naming the seed (reproduce with ``python tests/trust/trust_fuzz_cli.py AREA --seed N``).

The default run covers a fixed block of seeds per area; ``-m slow`` sweeps many more.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_allow import allowed  # noqa: E402
from trust_cases import GENERATORS  # noqa: E402
import trust_cases_nn  # noqa: E402,F401 - registers the functional and optim areas
import trust_cases_more  # noqa: E402,F401 - registers reduce_args, index_ops and dtype_pairs
import trust_cases_layers  # noqa: E402,F401 - registers layers and spatial
import trust_cases_autograd  # noqa: E402,F401 - registers autograd_views, ternary_out, reduce_edge, index_grad
import trust_cases_overlap  # noqa: E402,F401 - registers overlap (writes whose inputs share the written memory)
import trust_cases_21  # noqa: E402,F401 - registers layouts (explored from the CLI) and grad2
import trust_cases_22  # noqa: E402,F401 - registers unary_dtypes (one function of one tensor, every dtype)
from trust_diff import compare  # noqa: E402

# area -> cases in the default run (about 1 ms of CPU per case on each side)
DEFAULT = {"promotion": 1200, "indexing": 800, "views": 500, "reductions": 800, "gradients": 500, "functional": 600,
           "optim": 200, "reduce_args": 400, "index_ops": 300, "dtype_pairs": 400, "layers": 300, "spatial": 300,
           "autograd_views": 300, "ternary_out": 300, "reduce_edge": 300, "index_grad": 200, "overlap": 300,
           "grad2": 200, "unary_dtypes": 400}
CHUNK = 100
SLOW_FACTOR = 12


def _run(area: str, seeds: range) -> list:
    failures = []
    for seed in seeds:
        case = GENERATORS[area](np.random.default_rng(seed))
        problem = compare(case)
        if problem is not None and allowed(case, problem) is None:
            failures.append(f"seed {seed}: {case}\n  {problem}")
    return failures


def _blocks(factor: int = 1, offset: int = 0) -> list:
    out = []
    for area, count in DEFAULT.items():
        if area not in GENERATORS:
            continue
        total = count * factor
        for start in range(offset, offset + total, CHUNK):
            out.append(pytest.param(area, start, id=f"{area}-{start}"))
    return out


@pytest.mark.parametrize("area,start", _blocks())
def test_ember_agrees_with_torch(area: str, start: int) -> None:
    failures = _run(area, range(start, start + CHUNK))
    assert not failures, f"{len(failures)} differences from torch:\n" + "\n".join(failures[:5])


@pytest.mark.slow
@pytest.mark.parametrize("area,start", _blocks(SLOW_FACTOR, offset=100_000))
def test_ember_agrees_with_torch_sweep(area: str, start: int) -> None:
    failures = _run(area, range(start, start + CHUNK))
    assert not failures, f"{len(failures)} differences from torch:\n" + "\n".join(failures[:5])
