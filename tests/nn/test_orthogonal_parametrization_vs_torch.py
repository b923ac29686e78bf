"""parametrizations.orthogonal against torch 2.13 (float64): state_dict keys, the stored parameter and base, the
weight and every gradient for square, tall, wide and batched weights under each map, with and without the
trivialization; the weight is orthogonal; assignment and errors behave as in torch."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("trivialization", [True, False])
def test_orthogonal_equals_torch(shape, orthogonal_map, trivialization) -> None:
    rng = np.random.default_rng(len(shape) * 10 + shape[-1])
    w = rng.standard_normal(shape)
    tm, em = torch.nn.Module(), ember.nn.Module()
    tm.weight, em.weight = torch.nn.Parameter(torch.tensor(w)), ember.nn.Parameter(ember.tensor(w))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    ember.nn.utils.parametrizations.orthogonal(em, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    assert sorted(tm.state_dict()) == sorted(em.state_dict())
    weight = em.weight.detach().numpy()
    tall = weight if weight.shape[-2] >= weight.shape[-1] else np.swapaxes(weight, -1, -2)
    np.testing.assert_allclose(np.swapaxes(tall, -1, -2) @ tall, np.broadcast_to(np.eye(tall.shape[-1]), (
        *tall.shape[:-2], tall.shape[-1], tall.shape[-1])), atol=1e-10)
    if shape[-1] != shape[-2] and trivialization:
        return  # the base is completed with random columns, drawn by each library's own generator
    for key, value in tm.state_dict().items():
        np.testing.assert_allclose(em.state_dict()[key].detach().numpy(), value.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(weight, tm.weight.detach().numpy(), atol=1e-10)
    g = rng.standard_normal(shape)
    (tm.weight * torch.tensor(g)).sum().backward()
    (em.weight * ember.tensor(g)).sum().backward()
    ember_params = dict(em.named_parameters())
    for name, param in tm.named_parameters():
        np.testing.assert_allclose(ember_params[name].grad.numpy(), param.grad.numpy(), atol=1e-9, err_msg=name)


def test_assignment_training_step_and_errors() -> None:
    layer = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(4, 4))
    q = ember.linalg.qr(ember.randn(4, 4))[0]
    with ember.no_grad():
        layer.weight = q  # stored in the base; the parameter goes back to -I
    np.testing.assert_allclose(layer.weight.detach().numpy(), q.numpy(), atol=1e-6)
    opt = ember.optim.SGD(layer.parameters(), lr=0.1)
    layer(ember.randn(8, 4)).pow(2).sum().backward()
    opt.step()
    w = layer.weight.detach().numpy()
    np.testing.assert_allclose(w @ w.T, np.eye(4), atol=1e-5)  # still orthogonal after a step
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), name="bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of'):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), orthogonal_map="qr")
