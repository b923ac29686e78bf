"""The generated harness refuses an op record that has no spec line (issue 15, point 3): registering a
record without adding an OpSpec makes test_every_op_has_a_spec fail, naming the record. And a second
registration of a name fails at once (at import, where records are registered)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ember.ops.registry import OPS, OpDef, register

_GENERATED = Path(__file__).with_name("test_ops_generated.py")


def _coverage_check():
    spec = importlib.util.spec_from_file_location("_ops_generated_for_refusal", _GENERATED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.test_every_op_has_a_spec


def test_a_record_without_a_spec_fails_the_harness():
    check = _coverage_check()
    check()  # the real registry passes
    register(OpDef(name="zz_unspecified_op", category="unary", impl=lambda xp, x: x))
    try:
        with pytest.raises(AssertionError, match="zz_unspecified_op"):
            check()
    finally:
        del OPS["zz_unspecified_op"]


def test_a_second_registration_of_a_name_is_an_error():
    with pytest.raises(ValueError, match="'relu' is already registered"):
        register(OpDef(name="relu", category="unary", impl=lambda xp, x: x))
