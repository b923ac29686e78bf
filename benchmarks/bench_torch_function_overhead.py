"""What ``__torch_function__`` support costs a program that uses no subclass and no mode, and what dispatch costs
one that does.

Plain cases (the fast path every program runs): operators and methods (untouched: a subclass gets its own
wrappers), public functions (one flag read in their wrapper), a factory, an nn step. Subclass cases (``sub_*``):
the same calls on a ``Tensor`` subclass with the default ``__torch_function__`` (results stay the subclass).

Usage (side by side with a checkout without the protocol, e.g. main before it landed):
    python benchmarks/bench_torch_function_overhead.py --ab /work/main --cpu-time --processes 4
    python benchmarks/bench_torch_function_overhead.py --only sub_
"""
from __future__ import annotations

import os
import sys
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ab import main  # noqa: E402


def cases() -> dict[str, Callable[[], object]]:
    import ember
    import ember.nn.functional as F

    a, b = ember.ones(4, 4), ember.ones(4, 4)
    w = ember.ones(4, 4, requires_grad=True)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 4))
    x, t = ember.randn(5, 8), ember.tensor([0, 1, 2, 3, 0])

    def mlp_step() -> None:
        model.zero_grad()
        F.cross_entropy(model(x), t).backward()

    out = {
        "a + b": lambda: a + b,
        "w * b (autograd)": lambda: w * b,
        "a.sum()": lambda: a.sum(),
        "ember.add(a, b)": lambda: ember.add(a, b),
        "F.relu(a)": lambda: F.relu(a),
        "ember.cat([a, b])": lambda: ember.cat([a, b]),
        "ember.zeros(4)": lambda: ember.zeros(4),
        "mlp step (fwd+bwd)": mlp_step,
    }
    # A live subclass turns the functions' argument check on for the whole process, so the subclass cases are
    # built only when asked for (``--only sub_``): the plain cases must measure the fast path.
    if hasattr(ember.Tensor, "as_subclass") and "sub_" in " ".join(sys.argv):
        class Sub(ember.Tensor):
            pass

        s = a.as_subclass(Sub)
        out.update({"sub_ s + b": lambda: s + b, "sub_ s.sum()": lambda: s.sum(),
                    "sub_ ember.add(s, b)": lambda: ember.add(s, b)})
        cases.keep = Sub  # type: ignore[attr-defined]  (alive for the whole run: the switch stays as measured)
    return out


if __name__ == "__main__":
    main(__file__, cases, __doc__)
