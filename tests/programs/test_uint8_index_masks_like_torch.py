"""uint8 index tensors are boolean masks, as in PyTorch (with its deprecation warning).

Found by sgrvinod's SSD tutorial (``detect_objects``: ``suppress = torch.max(suppress, overlap > t)`` keeps uint8,
then ``boxes[1 - suppress]``): ember read the uint8 tensor as integer indices and returned rows 0/1 repeated, so
the boxes and their labels came out with different lengths.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember

CASES = {
    "1d": (lambda t, m: t[m], (5,), [1, 0, 1, 0, 1]),
    "1d_not": (lambda t, m: t[1 - m], (5,), [1, 0, 1, 0, 0]),
    "2d_full": (lambda t, m: t[m], (2, 3), [[1, 0, 1], [0, 1, 0]]),
    "2d_rows": (lambda t, m: t[m], (3, 2), [0, 1, 1]),
    "2d_cols": (lambda t, m: t[:, m], (2, 3), [1, 0, 1]),
    "with_slice": (lambda t, m: t[m, 1:], (2, 3), [1, 0]),
    "all_zero": (lambda t, m: t[m], (4,), [0, 0, 0, 0]),
}


def _run(lib, case):
    fn, shape, mask = CASES[case]
    t = lib.arange(float(np.prod(shape))).reshape(shape)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(t, lib.tensor(mask, dtype=lib.uint8))
    return out.numpy(), [str(x.message).split(" (Triggered")[0] for x in w]


@pytest.mark.parametrize("case", sorted(CASES))
def test_getitem_uint8_is_mask_like_torch(case):
    got, got_w = _run(ember, case)
    want, want_w = _run(torch, case)
    np.testing.assert_array_equal(got, want)
    assert got_w == want_w and len(want_w) == 1


def test_setitem_and_grad_through_uint8_mask_like_torch():
    results = []
    for lib in (ember, torch):
        x = lib.arange(5.0).requires_grad_()
        m = lib.tensor([1, 0, 1, 0, 0], dtype=lib.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (x[m] * lib.tensor([2.0, 3.0])).sum().backward()
            y = lib.zeros(5)
            y[m] = lib.tensor([1.0, 2.0])
        results.append((x.grad.numpy(), y.numpy()))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_numpy_uint8_index_is_mask_like_torch():
    m = np.array([0, 1, 1], dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(ember.arange(3.0)[m].numpy(), torch.arange(3.0)[m].numpy())
