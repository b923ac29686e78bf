"""AdaptiveLogSoftmaxWithLoss against torch 2.13 on the same weights (float64): outputs, loss, every gradient,
log_prob, predict, unbatched rows, empty clusters, state_dict keys and errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(cutoffs: list, head_bias: bool) -> tuple:
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 60, cutoffs, div_value=2.0, head_bias=head_bias).double()
    e = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 60, cutoffs, div_value=2.0, head_bias=head_bias).double()
    state = {k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()}
    assert list(state) == list(e.state_dict())
    e.load_state_dict(state)
    return t, e


@pytest.mark.parametrize("cutoffs, head_bias, only_shortlist", [
    ([10, 30, 45], False, False), ([5], True, False), ([10, 30, 45], True, True),
])
def test_forward_backward_log_prob_predict_equal_torch(cutoffs: list, head_bias: bool, only_shortlist: bool) -> None:
    rng = np.random.default_rng(len(cutoffs))
    t, e = _pair(cutoffs, head_bias)
    x = rng.standard_normal((13, 16))
    y = np.full(13, 3) if only_shortlist else rng.integers(0, 60, 13)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    to, eo = t(tx, torch.tensor(y)), e(ex, ember.tensor(y))
    np.testing.assert_allclose(eo.output.detach().numpy(), to.output.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(eo.loss.item(), to.loss.item(), atol=1e-12)
    to.loss.backward()
    eo.loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    for (name, tp), (_, ep) in zip(t.named_parameters(), e.named_parameters()):
        assert (tp.grad is None) == (ep.grad is None), name  # a cluster with no rows gets no gradient
        if tp.grad is not None:
            np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), atol=1e-12, err_msg=name)
    np.testing.assert_allclose(e.log_prob(ex).detach().numpy(), t.log_prob(tx).detach().numpy(), atol=1e-12)
    np.testing.assert_array_equal(e.predict(ex).numpy(), t.predict(tx).numpy())
    one_t, one_e = t(tx[0], torch.tensor(y[0])), e(ex[0], ember.tensor(y[0]))
    assert tuple(one_e.output.shape) == ()
    np.testing.assert_allclose(one_e.output.item(), one_t.output.item(), atol=1e-12)


def test_errors_name_the_problem() -> None:
    _, e = _pair([10, 30], False)
    with pytest.raises(RuntimeError, match=r"target values should be in \[0, 59\]"):
        e(ember.randn(3, 16).double(), ember.tensor([1, 2, 99]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        e(ember.randn(1, 16).double(), ember.tensor([[1]]))
    with pytest.raises(ValueError, match="sorted in an increasing order"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])
