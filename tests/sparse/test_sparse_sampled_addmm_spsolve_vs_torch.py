"""``ember.sparse.sampled_addmm`` against torch 2.13 (values, gradients to mat1, mat2 and the CSR values, special values,
empty patterns, error types and messages, the stand-in device) and ``ember.sparse.spsolve`` against NumPy's dense
solve and torch.linalg.solve's gradients (torch 2.13's CPU build has no spsolve: it raises NotImplementedError),
and float64 central differences."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
pytestmark = [pytest.mark.filterwarnings("ignore:Sparse CSR tensor support"),
              pytest.mark.filterwarnings("ignore:Sparse CSC tensor support")]


def _pattern(rng, m, n, density=0.4, dtype=np.float64):
    a = rng.standard_normal((m, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((m, n)).astype(dtype)
    a[rng.random((m, n)) > density] = 0
    a[min(1, m - 1), :] = 0  # an empty row
    return a


def _csr_pair(a, requires_grad=False):
    """The same CSR matrix in ember and torch, with leaf values (torch's CSR constructor has no complex autograd:
    its complex matrix is built without a graph, and the tests use the dense reference for complex gradients)."""
    t = torch.tensor(a).to_sparse_csr()
    crow, col, values = t.crow_indices().numpy(), t.col_indices().numpy(), t.values().numpy()
    ev = ember.tensor(values, requires_grad=requires_grad)
    tv = torch.tensor(values, requires_grad=requires_grad)
    tv_csr = tv if not values.dtype.kind == "c" else tv.detach()
    return (ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ev, a.shape), ev,
            torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), tv_csr, a.shape), tv)


def _entries(ts):
    """(rows, cols) of a torch CSR matrix's stored values, in storage order."""
    crow = ts.crow_indices()
    rows = torch.repeat_interleave(torch.arange(crow.numel() - 1), crow[1:] - crow[:-1])
    return rows, ts.col_indices()


def _torch_sampled_addmm(ts, tv, t1, t2, beta, alpha):
    """torch's sampled_addmm values; for complex (no CSR autograd in torch) the same formula on dense tensors,
    read at the stored entries, so torch differentiates it."""
    if not tv.is_complex():
        return torch.sparse.sampled_addmm(ts, t1, t2, beta=beta, alpha=alpha).values()
    rows, cols = _entries(ts)
    return alpha * (t1 @ t2)[rows, cols] + beta * tv


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.5, 2.0), (0.0, -1.5)])
@pytest.mark.parametrize("sizes", [(6, 4, 5), (1, 3, 1), (5, 1, 7)])
def test_sampled_addmm_values_and_gradients_equal_torch(dtype, scales, sizes, rng):
    beta, alpha = scales
    m, k, n = sizes
    a = _pattern(rng, m, n, dtype=dtype)
    m1 = _pattern(rng, m, k, density=1.1, dtype=dtype)
    m2 = _pattern(rng, k, n, density=1.1, dtype=dtype)
    s, sv, ts, tv = _csr_pair(a, requires_grad=True)
    e1, e2 = ember.tensor(m1, requires_grad=True), ember.tensor(m2, requires_grad=True)
    t1, t2 = torch.tensor(m1, requires_grad=True), torch.tensor(m2, requires_grad=True)
    ours = ember.sparse.sampled_addmm(s, e1, e2, beta=beta, alpha=alpha)
    theirs = _torch_sampled_addmm(ts, tv, t1, t2, beta, alpha)
    assert ours.layout is ember.sparse_csr and ours.shape == (m, n) and ours.dtype is s.dtype
    np.testing.assert_array_equal(ours.crow_indices().numpy(), ts.crow_indices().numpy())
    np.testing.assert_array_equal(ours.col_indices().numpy(), ts.col_indices().numpy())
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.values().detach().numpy(), theirs.detach().numpy(), **tol)
    # a non-uniform weight per stored value: the gradients see which entry is which
    w = np.linspace(-1.0, 2.0, ours._nnz()).astype(dtype)
    if np.dtype(dtype).kind == "c":
        w = w * (1 - 0.5j)
    (ours.values() * ember.tensor(w)).sum().abs().backward() if np.dtype(dtype).kind == "c" else \
        (ours.values() * ember.tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().abs().backward() if np.dtype(dtype).kind == "c" else \
        (theirs * torch.tensor(w)).sum().backward()
    for mine, ref in ((e1.grad, t1.grad), (e2.grad, t2.grad), (sv.grad, tv.grad)):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), **tol)


def test_sampled_addmm_gradients_match_central_differences(rng):
    """Independent of torch: float64 central differences of a weighted sum of the result's values."""
    a = _pattern(rng, 5, 4)
    m1, m2 = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    s, sv, _, _ = _csr_pair(a, requires_grad=True)
    w = np.linspace(-1, 1, s._nnz())

    def f(v, x, y):
        return float((ember.sparse.sampled_addmm(ember.sparse_csr_tensor(s.crow_indices(), s.col_indices(),
                                                                         ember.tensor(v), a.shape),
                                                 ember.tensor(x), ember.tensor(y), beta=0.7, alpha=-1.3)
                      .values() * ember.tensor(w)).sum().item())

    e1, e2 = ember.tensor(m1, requires_grad=True), ember.tensor(m2, requires_grad=True)
    (ember.sparse.sampled_addmm(s, e1, e2, beta=0.7, alpha=-1.3).values() * ember.tensor(w)).sum().backward()
    args = [sv.detach().numpy().copy(), m1.copy(), m2.copy()]
    for i, got in enumerate((sv.grad.numpy(), e1.grad.numpy(), e2.grad.numpy())):
        numeric = np.zeros_like(args[i])
        for j in np.ndindex(args[i].shape):
            plus, minus = [x.copy() for x in args], [x.copy() for x in args]
            plus[i][j] += 1e-6
            minus[i][j] -= 1e-6
            numeric[j] = (f(*plus) - f(*minus)) / 2e-6
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


def test_sampled_addmm_special_values_and_empty_patterns_equal_torch():
    inf, nan = np.inf, np.nan
    m1 = np.array([[inf, 0.0], [1.0, 2.0]])
    m2 = np.array([[0.0, 1.0], [1.0, 0.0]])
    for a, beta in ((np.eye(2), 1.0), (np.eye(2), 0.0), (np.array([[nan, 0.0], [0.0, 1.0]]), 0.0),
                    (np.array([[0.0, -inf], [0.0, 0.0]]), 2.0)):
        s, _, ts, _ = _csr_pair(a)
        ours = ember.sparse.sampled_addmm(s, ember.tensor(m1), ember.tensor(m2), beta=beta).values().numpy()
        theirs = torch.sparse.sampled_addmm(ts, torch.tensor(m1), torch.tensor(m2), beta=beta).values().numpy()
        np.testing.assert_array_equal(ours, theirs)  # inf * 0 -> NaN in the product; NaN * beta=0 stays NaN
    empty, _, tempty, _ = _csr_pair(np.zeros((3, 4)))
    assert ember.sparse.sampled_addmm(empty, ember.ones(3, 2, dtype=ember.float64),
                                      ember.ones(2, 4, dtype=ember.float64))._nnz() == 0
    s, _, ts, _ = _csr_pair(np.eye(3))
    k0 = ember.sparse.sampled_addmm(s, ember.zeros(3, 0, dtype=ember.float64), ember.zeros(0, 3, dtype=ember.float64))
    np.testing.assert_array_equal(k0.values().numpy(), torch.sparse.sampled_addmm(
        ts, torch.zeros(3, 0, dtype=torch.float64), torch.zeros(0, 3, dtype=torch.float64)).values().numpy())


ERRORS = {
    "mat shapes": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(3, 4, dtype=lib.float64),
                                                          lib.ones(5, 3, dtype=lib.float64)),
    "rows": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(2, 4, dtype=lib.float64),
                                                    lib.ones(4, 3, dtype=lib.float64)),
    "cols": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(3, 4, dtype=lib.float64),
                                                    lib.ones(4, 2, dtype=lib.float64)),
    "self dtype": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(3, 4), lib.ones(4, 3)),
    "mat dtypes": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(3, 4), lib.ones(4, 3, dtype=lib.float64)),
    "vector": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(4, dtype=lib.float64),
                                                      lib.ones(4, 3, dtype=lib.float64)),
    "csc input": lambda lib, s: lib.sparse.sampled_addmm(s.to_dense().to_sparse_csc(), lib.ones(3, 4, dtype=lib.float64),
                                                         lib.ones(4, 3, dtype=lib.float64)),
    "sparse mat1": lambda lib, s: lib.sparse.sampled_addmm(s, lib.ones(3, 4, dtype=lib.float64).to_sparse_csr(),
                                                           lib.ones(4, 3, dtype=lib.float64)),
    "integer input": lambda lib, s: lib.sparse.sampled_addmm(s.to_dense().long().to_sparse_csr(),
                                                             lib.ones(3, 4, dtype=lib.int64),
                                                             lib.ones(4, 3, dtype=lib.int64)),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_sampled_addmm_errors_are_torchs(case):
    caught = []
    for lib in (ember, torch):
        with pytest.raises(Exception) as info:
            ERRORS[case](lib, lib.eye(3, dtype=lib.float64).to_sparse_csr())
        caught.append(info.value)
    ours, theirs = caught
    assert type(ours) is type(theirs), (ours, theirs)
    assert str(ours).startswith(str(theirs).strip()), (str(ours), str(theirs))  # ember may add sizes or the fix


def test_sampled_addmm_on_the_standin_device(rng):
    a, m1, m2 = _pattern(rng, 5, 4, dtype=np.float32), rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    m1, m2 = m1.astype(np.float32), m2.astype(np.float32)
    want = torch.sparse.sampled_addmm(torch.tensor(a).to_sparse_csr(), torch.tensor(m1), torch.tensor(m2),
                                      alpha=0.5).values().numpy()
    with ember.testing.standin_cuda():
        s = ember.tensor(a).to("cuda").to_sparse_csr()
        e1 = ember.tensor(m1).to("cuda").requires_grad_()
        out = ember.sparse.sampled_addmm(s, e1, ember.tensor(m2).to("cuda"), alpha=0.5)
        assert out.values().device.type == "cuda"
        out.values().sum().backward()
        assert e1.grad.device.type == "cuda"
        np.testing.assert_allclose(out.values().detach().cpu().numpy(), want, rtol=1e-5, atol=1e-6)


# ---- spsolve ---------------------------------------------------------------------------------------------
def _system(rng, n, dtype=np.float64):
    a = _pattern(rng, n, n, density=0.3, dtype=dtype)
    a[min(1, n - 1), min(1, n - 1)] = 1.0  # the empty row gets a diagonal entry only
    return a + np.diag(np.full(n, 4.0 + 0.5 * np.arange(n))).astype(dtype)  # nonsingular, non-symmetric


def test_torch_cpu_has_no_spsolve():
    """Why the references below are dense solves: torch 2.13's CPU build refuses spsolve."""
    with pytest.raises(NotImplementedError):
        torch.sparse.spsolve(torch.eye(2, dtype=torch.float64).to_sparse_csr(), torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("rhs", [(7,), (7, 3)])
def test_spsolve_values_and_gradients_equal_dense_solve(dtype, rhs, rng):
    a = _system(rng, 7, dtype)
    b = _pattern(rng, *(rhs if len(rhs) == 2 else rhs + (1,)), density=1.1, dtype=dtype).reshape(rhs)
    s, sv, ts, tv = _csr_pair(a, requires_grad=True)
    eb, tb = ember.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    x = ember.sparse.spsolve(s, eb)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(a, b), **tol)
    assert x.dtype is eb.dtype and tuple(x.shape) == rhs
    # torch's reference gradient: linalg.solve on the dense matrix built from the same CSR values
    rows, cols = _entries(ts)
    dense = torch.zeros(a.shape, dtype=tv.dtype).index_put((rows, cols), tv)  # differentiable in tv, complex too
    tx = torch.linalg.solve(dense, tb)
    w = np.linspace(-1.0, 1.5, x.numel()).reshape(rhs).astype(dtype)
    loss = (x * ember.tensor(w)).sum()
    tloss = (tx * torch.tensor(w)).sum()
    (loss.abs() if np.dtype(dtype).kind == "c" else loss).backward()
    (tloss.abs() if np.dtype(dtype).kind == "c" else tloss).backward()
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), **tol)
    np.testing.assert_allclose(sv.grad.numpy(), tv.grad.numpy(), **tol)  # the gradient at the stored entries only


def test_spsolve_leaf_gradient_has_the_pattern_and_matches_central_differences(rng):
    a = _system(rng, 5)
    b = rng.standard_normal(5)
    leaf = ember.tensor(a).to_sparse_csr().requires_grad_()
    ember.sparse.spsolve(leaf, ember.tensor(b)).sum().backward()
    assert leaf.grad.layout is ember.sparse_csr
    np.testing.assert_array_equal(leaf.grad.col_indices().numpy(), leaf.col_indices().numpy())
    values = leaf.values().detach().numpy()
    rows, cols = leaf._entries()
    numeric = np.zeros_like(values)
    for j in range(values.size):
        step = np.zeros_like(a)
        step[rows.numpy()[j], cols.numpy()[j]] = 1e-6
        numeric[j] = (np.linalg.solve(a + step, b).sum() - np.linalg.solve(a - step, b).sum()) / 2e-6
    np.testing.assert_allclose(leaf.grad.values().numpy(), numeric, rtol=1e-6, atol=1e-9)


def test_spsolve_errors():
    s = ember.eye(3, dtype=ember.float64).to_sparse_csr()
    with pytest.raises(NotImplementedError, match="only left=True"):
        ember.sparse.spsolve(s, ember.ones(3, dtype=ember.float64), left=False)
    with pytest.raises(RuntimeError, match="expected a square input matrix, got size \\(3, 2\\)"):
        ember.sparse.spsolve(ember.ones(3, 2, dtype=ember.float64).to_sparse_csr(), ember.ones(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="sparse CSR matrix, got layout SparseCsc"):
        ember.sparse.spsolve(s.to_dense().to_sparse_csc(), ember.ones(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="expected other of size \\(3,\\)"):
        ember.sparse.spsolve(s, ember.ones(4, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.sparse.spsolve(s, ember.ones(3))
    with pytest.raises(ember.linalg.LinAlgError):  # a singular system: linalg.solve's error
        ember.sparse.spsolve(ember.zeros(3, 3, dtype=ember.float64).to_sparse_csr(), ember.ones(3, dtype=ember.float64))
