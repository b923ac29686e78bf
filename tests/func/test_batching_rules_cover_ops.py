"""Every op record decides how it batches under vmap: a rule (its own, or a generic one by name), or the
explicit per-sample loop, which docs/func.md must list with a reason. Adding an op forces the decision."""
from __future__ import annotations

import os
import re

import ember  # noqa: F401  (registers every record)
from ember.ops import batching
from ember.ops.registry import OPS

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "func.md")


def _documented_loop_ops() -> set:
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Ops that run once per sample", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    return names


def test_every_record_has_a_batching_rule_or_is_on_the_loop_list():
    undecided = [name for name, op in OPS.items() if batching.rule_for(op) is None]
    assert not undecided, (f"op records without a batching rule: {undecided}; give each a `batch=` field "
                           "(ember/ops/batching.py) or batch=\"loop\" plus a line in docs/func.md")


def test_generic_rule_names_exist():
    for name, op in OPS.items():
        if isinstance(op.batch, str):
            assert op.batch in batching.GENERIC, (name, op.batch)


def test_loop_records_are_exactly_the_documented_ones():
    looped = {name for name, op in OPS.items() if batching.rule_for(op) is batching.loop}
    documented = _documented_loop_ops()
    assert looped == documented, (f"on the loop but not in docs/func.md: {sorted(looped - documented)}; "
                                  f"documented but batched now: {sorted(documented - looped)}")
