"""``torch.utils.swap_tensors`` and the ``torch.__future__`` module-conversion switches, against torch 2.13
(pytorch/tutorials' recipes/swap_tensors.py stopped at ``torch.utils.swap_tensors``)."""
import weakref

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_swap_exchanges_values_shapes_classes_and_grads_like_torch():
    for lib in (torch, ember):
        a, b = lib.arange(2), lib.arange(3.0).requires_grad_()
        b.grad = lib.ones(3)
        a_id, b_id = id(a), id(b)
        lib.utils.swap_tensors(a, b)
        assert (id(a), id(b)) == (a_id, b_id)
        assert a.tolist() == [0.0, 1.0, 2.0] and b.tolist() == [0, 1]
        assert a.requires_grad and not b.requires_grad
        assert a.grad.tolist() == [1.0, 1.0, 1.0] and b.grad is None
        p, t = lib.nn.Parameter(lib.ones(2)), lib.zeros(2)
        t.note = "plain"
        lib.utils.swap_tensors(p, t)
        assert type(p) is lib.Tensor and type(t) is lib.nn.Parameter
        assert p.note == "plain" and not hasattr(t, "note")


def test_swap_refuses_weakly_referenced_tensors_like_torch():
    for lib in (torch, ember):
        a, b = lib.zeros(1), lib.ones(1)
        ref = weakref.ref(a)
        with pytest.raises(RuntimeError, match="weakref"):
            lib.utils.swap_tensors(a, b)
        del ref


def test_swap_keeps_an_optimizer_reference_valid():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.5)
    ember.utils.swap_tensors(p, ember.nn.Parameter(ember.full((2,), 3.0)))
    p.sum().backward()
    opt.step()
    assert opt.param_groups[0]["params"][0] is p and p.tolist() == [2.5, 2.5]


@pytest.mark.parametrize("flag", ["swap", "overwrite", None])
def test_module_conversion_switches_like_torch(flag):
    seen = {}
    for lib in (torch, ember):
        fut = lib.__future__
        try:
            fut.set_swap_module_params_on_conversion(flag == "swap")
            fut.set_overwrite_module_params_on_conversion(flag == "overwrite")
            m = lib.nn.Linear(3, 2)
            w = m.weight
            m.weight.grad = lib.ones(2, 3)
            m.double()
            seen[lib.__name__] = (m.weight is w, w.dtype == lib.float64, m.weight.dtype == lib.float64,
                                  type(m.weight).__name__, m.weight.grad.dtype == lib.float64,
                                  fut.get_swap_module_params_on_conversion())
        finally:
            fut.set_swap_module_params_on_conversion(False)
            fut.set_overwrite_module_params_on_conversion(False)
    assert seen["ember"] == seen["torch"]
    np.testing.assert_equal(seen["ember"][0], flag != "overwrite")
