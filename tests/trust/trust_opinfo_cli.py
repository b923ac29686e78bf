"""Explore ember vs torch over torch's OpInfo database (see trust_opinfo.py); differences grouped by op.

    python tests/trust/trust_opinfo_cli.py                       # every op, every dtype, sample inputs
    python tests/trust/trust_opinfo_cli.py --ops add,sum --which reference
    python tests/trust/trust_opinfo_cli.py --grad                # float64 gradients
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import trust_opinfo as T  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--dtypes", default=",".join(T.DTYPES))
    ap.add_argument("--which", default="sample")
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--show", type=int, default=2)
    args = ap.parse_args()
    db = T.load_op_db()
    wanted = set(args.ops.split(",")) if args.ops else None
    dtypes = ["float64"] if args.grad else args.dtypes.split(",")
    total = 0
    t0 = time.process_time()
    for op in db:
        if wanted and op.name not in wanted and T.op_id(op) not in wanted:
            continue
        if args.grad and not op.supports_autograd:
            continue
        for dt in dtypes:
            if args.which != "error" and not T.supported(op, dt):
                continue
            try:
                problems = T.check_op(op, dt, args.which, args.limit, args.grad)
            except Exception as e:  # noqa: BLE001
                problems = [f"{T.op_id(op)} [{dt}] harness error {type(e).__name__}: {e}"]
            total += len(problems)
            for p in problems[: args.show]:
                print(p[:700], flush=True)
            if len(problems) > args.show:
                print(f"  ... {len(problems) - args.show} more for {T.op_id(op)} {dt}", flush=True)
            if args.which == "error":
                break
    print(f"{total} differences, {time.process_time() - t0:.1f} s CPU", file=sys.stderr)


if __name__ == "__main__":
    main()
