"""linear_cross_entropy / LinearCrossEntropyLoss against torch 2.13 (float64): the reference and the chunked
paths for every reduction, class weights, ignore_index, bias, unbatched input, K-dimensional weights and
label smoothing; the chunked path's gradients through any chunk size and retain_graph."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [None, 1, 3])
@pytest.mark.parametrize("class_weights", [False, True])
def test_values_and_gradients_equal_torch(reduction: str, chunk: int | None, class_weights: bool) -> None:
    rng = np.random.default_rng(7)
    x, w, b = rng.standard_normal((7, 5)), rng.standard_normal((11, 5)), rng.standard_normal(11)
    y = rng.integers(0, 11, 7)
    y[2] = -100
    cw = rng.random(11) if class_weights else None
    options = None if chunk is None else ember.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ex, ew, eb = (ember.tensor(v, requires_grad=True) for v in (x, w, b))
    tl = TF.linear_cross_entropy(tx, tw, torch.tensor(y), linear_bias=tb, reduction=reduction,
                                 weight=None if cw is None else torch.tensor(cw))
    el = EF.linear_cross_entropy(ex, ew, ember.tensor(y), linear_bias=eb, reduction=reduction, options=options,
                                 weight=None if cw is None else ember.tensor(cw))
    np.testing.assert_allclose(el.detach().numpy(), tl.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(tl.shape))
    tl.backward(torch.tensor(g))
    el.backward(ember.tensor(g), retain_graph=True)
    for e_grad, t_grad in ((ex.grad, tx.grad), (ew.grad, tw.grad), (eb.grad, tb.grad)):
        np.testing.assert_allclose(e_grad.numpy(), t_grad.numpy(), rtol=1e-10, atol=1e-12)
    el.backward(ember.tensor(g))  # a second backward through the chunked path adds the same again
    np.testing.assert_allclose(ew.grad.numpy(), 2 * tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_unbatched_kdim_and_label_smoothing_equal_torch() -> None:
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal(5), rng.standard_normal((7, 5))
    for options in (None, ember.nn.LinearCrossEntropyOptions()):
        e = EF.linear_cross_entropy(ember.tensor(x), ember.tensor(w), ember.tensor(3), options=options)
        t = TF.linear_cross_entropy(torch.tensor(x), torch.tensor(w), torch.tensor(3))
        np.testing.assert_allclose(e.item(), t.item(), rtol=1e-12)
    x, w, y = rng.standard_normal((4, 5)), rng.standard_normal((3, 2, 5)), rng.integers(0, 3, (4, 2))
    e = EF.linear_cross_entropy(ember.tensor(x), ember.tensor(w), ember.tensor(y), label_smoothing=0.1)
    t = TF.linear_cross_entropy(torch.tensor(x), torch.tensor(w), torch.tensor(y), label_smoothing=0.1)
    np.testing.assert_allclose(e.item(), t.item(), rtol=1e-12)
    with pytest.warns(UserWarning, match="options.*ignored"):
        EF.linear_cross_entropy(ember.tensor(x), ember.tensor(w), ember.tensor(y),
                                options=ember.nn.LinearCrossEntropyOptions())


def test_module_loads_torch_weights_and_matches_float32_chunked() -> None:
    rng = np.random.default_rng(9)
    tm = torch.nn.LinearCrossEntropyLoss(16, 1000, bias=True)
    em = ember.nn.LinearCrossEntropyLoss(16, 1000, bias=True, options=ember.nn.LinearCrossEntropyOptions(
        batch_chunk_size=8))
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x, y = rng.standard_normal((33, 16)).astype(np.float32), rng.integers(0, 1000, 33)
    np.testing.assert_allclose(em(ember.tensor(x), ember.tensor(y)).item(),
                               tm(torch.tensor(x), torch.tensor(y)).item(), rtol=1e-5)
    assert repr(em).startswith("LinearCrossEntropyLoss(\n  in_features=16, num_classes=1000, out_features=(), bias=True")


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="in_features"):
        EF.linear_cross_entropy(ember.randn(3, 4), ember.randn(5, 6), ember.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="linear_bias shape"):
        EF.linear_cross_entropy(ember.randn(3, 4), ember.randn(5, 4), ember.tensor([0, 1, 2]),
                                linear_bias=ember.randn(4))


def test_chunked_path_is_differentiable_once_reference_twice() -> None:
    # As in torch 2.13: the chunked gradient does not require grad; the reference path's does.
    x = ember.randn(3, 4, requires_grad=True)
    w, y = ember.randn(5, 4), ember.tensor([0, 1, 2])
    chunked = EF.linear_cross_entropy(x, w, y, options=ember.nn.LinearCrossEntropyOptions())
    (g,) = ember.autograd.grad(chunked, x, create_graph=True)
    assert not g.requires_grad
    (g2,) = ember.autograd.grad(EF.linear_cross_entropy(x, w, y), x, create_graph=True)
    np.testing.assert_allclose(g2.detach().numpy(), g.numpy(), rtol=1e-5, atol=1e-6)
    assert g2.requires_grad
