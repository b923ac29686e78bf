"""Run the trust fuzzer from the command line and print the differences, grouped.

    python tests/trust/trust_fuzz_cli.py promotion 2000          # 2000 cases from seed 0
    python tests/trust/trust_fuzz_cli.py promotion --seed 1234   # one case
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from trust_allow import allowed  # noqa: E402
from trust_cases import GENERATORS  # noqa: E402
import trust_cases_nn  # noqa: E402,F401 - registers the nn areas
import trust_cases_more  # noqa: E402,F401 - registers reduce_args, index_ops and dtype_pairs
import trust_cases_layers  # noqa: E402,F401 - registers layers and spatial
import trust_cases_autograd  # noqa: E402,F401 - registers autograd_views, ternary_out, reduce_edge, index_grad
import trust_cases_overlap  # noqa: E402,F401 - registers overlap
import trust_cases_21  # noqa: E402,F401 - registers layouts and grad2
import trust_cases_22  # noqa: E402,F401 - registers unary_dtypes
from trust_diff import compare  # noqa: E402
import trust_cases_compile  # noqa: E402 - the fifth wave: compiled vs eager (its own comparison)
import trust_compile_diff  # noqa: E402

COMPILE_AREAS = trust_cases_compile.GENERATORS


def _compare(area: str, case: object) -> str | None:
    if area == "compile_train":
        return trust_compile_diff.compare_train(case)
    if area == "gradcheck_f64":
        return trust_compile_diff.compare_gradcheck(case)
    if area == "onnx_values":
        import trust_onnx_diff  # onnx and onnxruntime are optional

        return trust_onnx_diff.compare_onnx(case)
    return trust_compile_diff.compare(case) if area in COMPILE_AREAS else compare(case)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("area", choices=sorted(GENERATORS) + sorted(COMPILE_AREAS))
    parser.add_argument("count", type=int, nargs="?", default=500)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--all", action="store_true", help="also show allow-listed differences")
    args = parser.parse_args()
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    groups = collections.defaultdict(list)
    for seed in seeds:
        case = {**GENERATORS, **COMPILE_AREAS}[args.area](np.random.default_rng(seed))
        problem = _compare(args.area, case)
        if problem is None:
            continue
        reason = None if args.area in COMPILE_AREAS else allowed(case, problem)
        if reason and not args.all:
            continue
        key = re.sub(r"-?\d[\d.e+-]*|\[.*", "#", problem.split("\n")[0])[:90]
        groups[key].append((seed, case, problem))
    for key, found in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"== {len(found)} x {key}")
        for seed, case, problem in found[:3]:
            print(f"  seed {seed}: {case}\n    {problem[:600]}")
    print(sum(len(v) for v in groups.values()), "differences in", len(seeds), "cases")


if __name__ == "__main__":
    main()
