"""var / std / var_mean / std_mean accept PyTorch's three overloads: ``(dim, unbiased, keepdim)`` positionally,
``(dim, *, correction, keepdim)``, and a bool ``unbiased`` in dim's place (vector-quantize-pytorch's
finite_scalar_perturbation calls ``torch.var_mean(x, dim=..., unbiased=False)``). Compared with torch 2.13."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = [
    "x.var(1, False)", "x.var(1, False, True)", "x.var(False)", "x.var(True)", "T.var(x, 1, False, True)",
    "x.std(1, False)", "x.std(0, True, True)", "T.std(x, False)", "T.std_mean(x, 1, False)", "T.var_mean(x, 1, False)",
    "T.var_mean(x, False)", "T.var_mean(x, dim=1, unbiased=False)", "T.var_mean(x, 1, True, True)",
    "T.std_mean(x, dim=(0, 1), unbiased=True, keepdim=True)", "x.var(dim=1, unbiased=False, keepdim=True)",
    "T.var_mean(x, (0, 1), correction=0)", "T.std_mean(x, 0, correction=2, keepdim=True)", "T.var_mean(x)",
]


@pytest.mark.parametrize("call", CALLS)
def test_overloads_equal_torch(call):
    data = np.random.default_rng(0).standard_normal((3, 4))
    want = eval(call, {"T": torch, "x": torch.tensor(data)})
    got = eval(call, {"T": ember, "x": ember.tensor(data)})
    want, got = (want if isinstance(want, tuple) else (want,)), (got if isinstance(got, tuple) else (got,))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("call", ["T.var_mean(x, 1, unbiased=False, correction=0)", "T.var(x, True, unbiased=True)",
                                  "T.std(x, 1, True, correction=1)"])
def test_conflicting_corrections_are_refused(call):
    with pytest.raises(TypeError):
        eval(call, {"T": torch, "x": torch.ones(3, 4)})
    with pytest.raises(TypeError, match="invalid combination"):
        eval(call, {"T": ember, "x": ember.ones(3, 4)})
