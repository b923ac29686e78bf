"""``logsumexp`` as one op record (ember/ops/reductions.py): values and gradients against torch over dims,
keepdim, 0-d inputs and special points (rows of -inf, +inf, NaN, +-1e30, signed zeros), half dtypes, second
derivatives through the ember-op rule, one autograd node, and the stand-in device."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.testing import standin_cuda


@pytest.mark.parametrize("shape, dim, keepdim", [((5, 5), 1, False), ((2, 3, 4), (0, 2), True), ((2, 3, 4), -1, False),
                                                 ((), 0, False), ((3,), 0, True), ((4, 3), (0, 1), False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_and_gradients_match_torch(shape, dim, keepdim, dtype) -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    eo, to = ember.logsumexp(e, dim, keepdim=keepdim), torch.logsumexp(t, dim, keepdim=keepdim)
    assert tuple(eo.shape) == tuple(to.shape)
    g = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), **tol)
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), **tol)


def test_special_points_match_torch() -> None:
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0], [1e30, -1e30], [0.0, -np.inf], [-0.0, 0.0],
                  [np.inf, np.inf], [-np.inf, 3.0]], np.float32)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with np.errstate(invalid="ignore"):
        eo = ember.logsumexp(e, 1)
        eo.sum().backward()
    to = torch.logsumexp(t, 1)
    to.sum().backward()
    np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_gradient_where_the_result_absorbs_log_n_is_the_softmax() -> None:
    """[1e30, 1e30] (float32): logsumexp is 1e30 (log 2 absorbed); torch's exp(x - out) gives 1 and 1, ember the
    exact derivative 0.5 and 0.5 (docs/special-points.md), as the composite this record replaced did."""
    e = ember.tensor(np.array([[1e30, 1e30, -1e30], [-1e30, -1e30, -np.inf]], np.float32), requires_grad=True)
    ember.logsumexp(e, 1).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])


@pytest.mark.parametrize("shape, dim, keepdim", [((4, 5), 1, False), ((2, 3, 4), (0, 2), True), ((), 0, False),
                                                 ((3, 4), (0, 1), False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_array_rule_equals_the_op_rule_bit_for_bit(shape, dim, keepdim, dtype) -> None:
    """A plain backward takes the array rule; create_graph=True the ember-op rule: the same bits."""
    a = (np.random.default_rng(4).standard_normal(shape) * 5).astype(dtype)
    g = np.random.default_rng(5).standard_normal(np.shape(torch.logsumexp(torch.tensor(a), dim, keepdim))).astype(dtype)
    grads = []
    for create_graph in (False, True):
        e = ember.tensor(a, requires_grad=True)
        (got,) = ember.autograd.grad(ember.logsumexp(e, dim, keepdim=keepdim), e, ember.tensor(g),
                                     create_graph=create_graph)
        grads.append(got.detach().numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_dtypes_compute_in_float32(dtype) -> None:
    a = np.linspace(-6, 6, 24, dtype=np.float32).reshape(4, 6)
    e = ember.tensor(a).to(getattr(ember, dtype))
    t = torch.tensor(a).to(getattr(torch, dtype))
    eo, to = ember.logsumexp(e, 1), torch.logsumexp(t, 1)
    assert str(eo.dtype).split(".")[-1] == dtype
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7  # torch rounds some intermediates: within one ulp
    np.testing.assert_allclose(eo.float().numpy(), to.float().numpy(), rtol=ulp, atol=0)


def test_one_node_and_second_derivatives_match_torch() -> None:
    a = np.random.default_rng(2).standard_normal((3, 4))
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    eo = ember.logsumexp(e, 1)
    assert eo.grad_fn.name() == "LogsumexpBackward0"  # one node (torch's name), straight onto the leaf
    assert "AccumulateGrad" in repr(eo.grad_fn.next_functions[0][0])
    (ge,) = ember.autograd.grad(eo.sum(), e, create_graph=True)
    (gt,) = torch.autograd.grad(torch.logsumexp(t, 1).sum(), t, create_graph=True)
    (ge * ge).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(ge.detach().numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_complex_is_refused_with_the_fix() -> None:
    with pytest.raises(RuntimeError, match="logsumexp: not supported for complex"):
        ember.logsumexp(ember.ones(2, dtype=ember.complex64), 0)


def test_standin_device_matches_cpu() -> None:
    a = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    cpu = ember.tensor(a, requires_grad=True)
    ember.logsumexp(cpu, 1).sum().backward()
    with standin_cuda():
        dev = ember.tensor(a, device="cuda", requires_grad=True)
        out = ember.logsumexp(dev, 1)
        out.sum().backward()
        assert out.device.type == "cuda"
        np.testing.assert_array_equal(out.detach().cpu().numpy(), ember.logsumexp(ember.tensor(a), 1).numpy())
        np.testing.assert_array_equal(dev.grad.cpu().numpy(), cpu.grad.numpy())
