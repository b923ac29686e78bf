"""The torch.nn audit (``nn_audit.py``) against torch 2.13: every torch.nn Module class, default and typical
non-default constructor arguments (``nn_audit_cases.CASES``), compared on repr, parameters and buffers, state_dict
keys/order/_metadata, initial values under the same seed, half()/double() dtypes, and forward values and
gradients in train and eval mode (dropout draws included). The full sweep is slow; the default run checks one
configuration per class of difference the audit found (each fixed) and that no torch.nn class goes unaudited."""
from __future__ import annotations

import pytest

from nn_audit_cases import CASES, f, _adaptive_lsm, _mha, _mha_batch

torch = pytest.importorskip("torch")

from nn_audit import SKIP_AUTO, all_cases, audit_case, case_id, module_classes  # noqa: E402

# One configuration per difference found and fixed (see docs/pytorch-compat.md, eighteenth session).
FAST = [
    ("LazyBatchNorm1d", (), {}, None),  # UninitializedBuffer running stats, num_batches_tracked, version 2
    ("LazyInstanceNorm2d", (), {"affine": True}, None),
    ("LazyLinear", (3,), {}, None),  # an uninitialized parameter has no shape
    ("Conv1d", (3, 2, 3), {"padding": "same", "padding_mode": "reflect"}, f(2, 3, 7)),  # padding=same unquoted
    ("Embedding", (10, 3), {"max_norm": 1.0, "scale_grad_by_freq": True, "sparse": True}, None),
    ("LSTM", (4, 3), {"proj_size": 2, "bidirectional": True}, f(5, 2, 4)),  # proj_size printed second
    ("RNNCell", (4, 3), {"bias": False, "nonlinearity": "relu"}, f(2, 4)),
    ("CrossMapLRN2d", (3,), {"alpha": 0.1}, f(2, 5, 3, 3)),  # torch's legacy windows and backward
    ("FeatureAlphaDropout", (), {}, f(2, 3, 2, 2)),  # torch's bernoulli draws
    ("MultiheadAttention", (4, 2), {"dropout": 0.5}, _mha),  # weights returned after dropout
    ("MultiheadAttention", (4, 2), {"dropout": 0.5, "batch_first": True}, _mha_batch),
    ("TransformerEncoderLayer", (8, 2, 16), {"batch_first": True}, f(2, 5, 8)),  # dropout1 draws in torch's layout
    ("AdaptiveLogSoftmaxWithLoss", (8, 16, [4, 10]), {}, _adaptive_lsm),  # a 0-wide tail projection
    ("BatchNorm2d", (3,), {"momentum": None}, f(2, 3, 4, 4)),
    ("Linear", (4, 3), {"bias": False}, f(5, 2, 4)),
]


@pytest.mark.parametrize("case", FAST, ids=[case_id(c) for c in FAST])
def test_fixed_differences_stay_fixed(case) -> None:
    assert audit_case(*case) == []


def test_every_torch_nn_module_class_is_audited() -> None:
    covered = {c[0] for c in all_cases()}
    assert set(module_classes()) - covered == SKIP_AUTO  # only the abstract bases are left out
    assert len(CASES) >= 230


@pytest.mark.slow
def test_full_audit_finds_no_difference() -> None:
    differ = {case_id(c): d for c in all_cases() if (d := audit_case(*c))}
    assert differ == {}
