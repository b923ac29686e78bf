"""torch's deprecated top-level linear algebra warns once per process in its own words (nflows calls
``torch.qr``, ``torch.lu``, ``torch.lu_solve``), and the functions torch removed in 1.9 raise its RuntimeError
naming the replacement (ember had no ``torch.solve``/``lstsq``/``eig``/``symeig``/``matrix_rank`` at all, so old
programs stopped with an AttributeError instead). torch's ``set_warn_always(True)`` repeats the once-only warnings
in both, which is how this test reads torch's text in one process."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

import ember
from ember import _warn_once

A = [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]]
B = [[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]]

CALLS = {
    "qr": lambda lib, a, b: lib.qr(a),
    "lu": lambda lib, a, b: lib.lu(a),
    "lu_solve": lambda lib, a, b: lib.lu_solve(b, *lib.linalg.lu_factor(a)),
    "cholesky": lambda lib, a, b: lib.cholesky(a),
    "chain_matmul": lambda lib, a, b: lib.chain_matmul(a, a, b),
    "triangular_solve": lambda lib, a, b: lib.triangular_solve(b, a.triu()),
    "set_default_tensor_type": lambda lib, a, b: lib.set_default_tensor_type(lib.FloatTensor),
    "Tensor.qr": lambda lib, a, b: a.qr(),
    "Tensor.cholesky": lambda lib, a, b: a.cholesky(),
}


def _messages(lib, name):
    a, b = lib.tensor(A, dtype=lib.float64), lib.tensor(B, dtype=lib.float64)
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = CALLS[name](lib, a, b)
    finally:
        lib.set_warn_always(False)
    # torch appends where its C++ source raised it; ember has no such source
    texts = [re.sub(r" \(Triggered internally at [^)]*\)$", "", str(w.message)) for w in caught]
    return texts, [w.filename for w in caught], out


@pytest.mark.parametrize("name", sorted(CALLS))
def test_deprecation_warning_text_and_values_like_torch(name):
    want, _, want_out = _messages(torch, name)
    got, files, got_out = _messages(ember, name)
    assert got == want and len(got) == 1
    assert files == [__file__]  # at the program's line, not inside ember
    for g, w in zip(got_out if isinstance(got_out, tuple) else [got_out],
                    want_out if isinstance(want_out, tuple) else [want_out]):
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)


def test_warns_once_per_process_without_warn_always(monkeypatch):
    monkeypatch.setattr(_warn_once, "_WARNED", set())
    a = ember.tensor(A, dtype=ember.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.qr(a)
        a.qr()  # the method shares the function's one warning, as in torch
        ember.lu(a)
        ember.lu(a)
    assert [str(w.message).split(" ")[0] for w in caught] == ["torch.qr", "torch.lu"]


@pytest.mark.parametrize("name", ["solve", "lstsq", "eig", "symeig", "matrix_rank"])
def test_removed_functions_raise_torchs_error(name):
    texts = []
    for lib in (torch, ember):
        a, b = lib.tensor(A, dtype=lib.float64), lib.tensor(B, dtype=lib.float64)
        args = (a,) if name in ("eig", "symeig", "matrix_rank") else (b, a)
        with pytest.raises(RuntimeError) as info:
            getattr(lib, name)(*args)
        texts.append(str(info.value))
        if name != "matrix_rank":  # torch has no Tensor.matrix_rank method
            with pytest.raises(RuntimeError) as info:
                getattr(args[0], name)(*args[1:])
            texts.append(str(info.value))
    half = len(texts) // 2
    assert texts[:half] == texts[half:]
    assert texts[0].startswith("This function was deprecated since version 1.9 and is now removed.")
