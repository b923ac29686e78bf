"""torch.autograd.function.NestedIOFunction (nested tuple inputs/outputs, saved tensors, non-differentiable
outputs) and enforce_grad_layout_policy, run with the same code on torch and ember."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.run.alias import module_for

torch = pytest.importorskip("torch")


def _classes(lib):
    base = lib.autograd.NestedIOFunction

    class MulAdd(base):
        def forward_extended(self, pair, c):
            a, b = pair
            self.save_for_backward(a, (b, c))
            return a * b + c, (a - c).exp()

        def backward_extended(self, g_out, g_exp):
            a, (b, c) = self.saved_tensors
            e = (a - c).exp()
            return (g_out * b + g_exp * e, g_out * a), g_out - g_exp * e

    return MulAdd


def test_nested_io_function_matches_plain_autograd() -> None:
    """torch 2.13's own NestedIOFunction no longer runs (its legacy ``_do_forward`` is gone), so the reference
    is torch autograd through the same arithmetic written as plain ops."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(3) for _ in range(3)]
    a, b, c = (ember.tensor(x, requires_grad=True) for x in arrays)
    out, ex = _classes(ember)()((a, b), c)
    (out.sum() + 2 * ex.sum()).backward()
    ta, tb, tc = (torch.tensor(x, requires_grad=True) for x in arrays)
    t_out, t_ex = ta * tb + tc, (ta - tc).exp()
    (t_out.sum() + 2 * t_ex.sum()).backward()
    for got, want in zip((out, ex, a.grad, b.grad, c.grad), (t_out, t_ex, ta.grad, tb.grad, tc.grad)):
        np.testing.assert_allclose(np.asarray(got.detach().numpy()), want.detach().numpy(), rtol=1e-12)


def test_enforce_grad_layout_policy_is_a_thread_local_switch() -> None:
    policy = ember.autograd.enforce_grad_layout_policy
    assert policy.is_enabled()
    with policy(False):
        assert not policy.is_enabled()
        p = ember.ones(2, 3).t().requires_grad_()
        (p * 2).sum().backward()  # gradients keep their values whatever the policy
        assert p.grad.tolist() == [[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]
    assert policy.is_enabled()
    with torch.autograd.enforce_grad_layout_policy(False):
        pass


def test_sdp_kernel_sets_and_restores_flags_like_torch() -> None:
    for lib in (torch, ember):
        # torch.backends.cuda is ember.backends.cuda_flags (ember.backends.cuda is the CUDA backend module)
        cuda = torch.backends.cuda if lib is torch else module_for("torch.backends.cuda")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
                inside = (cuda.flash_sdp_enabled(), cuda.math_sdp_enabled(), cuda.mem_efficient_sdp_enabled())
        assert inside == (False, True, False), lib.__name__
        assert cuda.flash_sdp_enabled() and cuda.mem_efficient_sdp_enabled()
        if lib is ember:  # (torch's decorator warns once per process, so its warning may be gone already)
            assert any(issubclass(w.category, FutureWarning) and "sdp_kernel" in str(w.message) for w in caught)
