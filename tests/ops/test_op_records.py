"""The op records themselves: one registration per name, typed fields, no hidden second copies."""
from __future__ import annotations

import dataclasses

import pytest

import ember  # noqa: F401  (registers every op)
from ember.onnx import complex_emitters
from ember.ops import extra_math, nn_ops
from ember.ops.registry import OPS, OpDef, register


def test_registering_a_name_twice_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        register(OpDef(name="exp", category="unary", impl=lambda xp, x: x))
    # the original record is untouched (its ONNX emitter: Exp on real values, the pair formula on complex ones)
    assert OPS["exp"].impl is not None and OPS["exp"].onnx is complex_emitters.exp


def test_flags_are_typed_fields_not_a_bag_of_keys():
    names = {f.name for f in dataclasses.fields(OpDef)}
    assert "extra" not in names and "expr" not in names
    for op in OPS.values():
        for flag in ("float_only", "view", "side_effect", "random", "comm"):
            assert isinstance(getattr(op, flag), bool), (op.name, flag)
        assert op.ufunc is None or isinstance(op.ufunc, str)
        assert op.simplify is None or callable(op.simplify)


def test_expm1_is_registered_once_and_shared():
    assert OPS["expm1"] is extra_math.EXPM1 is nn_ops.EXPM1


def test_simplify_rules_sit_on_the_records_where_the_ops_are_defined():
    from ember.ops import simplify

    assert OPS["reshape"].simplify is simplify.same_value
    assert OPS["permute"].simplify is simplify.permute_rule
    assert OPS["matmul"].simplify is not None and OPS["matmul_t"].simplify is not None
