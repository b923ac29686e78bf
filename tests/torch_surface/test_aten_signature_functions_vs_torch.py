"""Top-level functions whose torch signature is ATen's, not nn.functional's (``torch.embedding(weight, indices)``,
``torch.batch_norm(input, weight, bias, running_mean, ...)``, losses with an int ``reduction``, tuple results of
``torch.embedding_bag`` / ``torch.adaptive_max_pool1d``), called positionally as programs call them (a VQ-VAE's
straight-through test compares its codebook gradient with ``torch.embedding``'s), against torch 2.13."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = {"ember": ember, "torch": torch}


def _data(t):
    rng = np.random.RandomState(0)

    def T(*shape, grad=False):
        return t.tensor(rng.rand(*shape).astype(np.float64) + 0.05, requires_grad=grad)

    d = {"x4": T(2, 3, 4, 4, grad=True), "x3": T(2, 3, 8, grad=True), "w": T(3, grad=True), "b": T(3, grad=True),
         "rm": T(3), "rv": T(3), "W": T(5, 4, grad=True), "a": T(4, 5, grad=True), "p": T(4, 5), "n": T(4, 5),
         "v": T(4, grad=True), "u": T(4), "m": T(3, 4, grad=True), "q": T(3, 4), "g": T(4)}
    d["idx"] = t.tensor([[0, 2], [1, 3]])
    d["flat"] = t.tensor([0, 2, 1, 3, 4, 0])
    d["offsets"] = t.tensor([0, 2, 5])
    d["sign"] = t.tensor([1.0, -1.0, 1.0, -1.0], dtype=t.float64)
    d["lp"] = t.log_softmax(T(6, 2, 5, grad=True), 2)
    return d


CALLS = {
    "embedding": lambda t, d: t.embedding(d["W"], d["idx"]),
    "embedding padding_idx": lambda t, d: t.embedding(d["W"], d["idx"], 2, False, False),
    "embedding_bag sum": lambda t, d: t.embedding_bag(d["W"], d["flat"], d["offsets"], False, 0),
    "embedding_bag sum float32": lambda t, d: t.embedding_bag(d["W"].float(), d["flat"], d["offsets"], False, 0),
    "embedding_bag sum padding": lambda t, d: t.embedding_bag(d["W"].float(), d["flat"], d["offsets"], False, 0,
                                                              False, None, False, 2),
    "losses default reduction": lambda t, d: (t.binary_cross_entropy_with_logits(d["m"], d["q"]),
                                              t.hinge_embedding_loss(d["v"], d["sign"]),
                                              t.triplet_margin_loss(d["a"], d["p"], d["n"])),
    "embedding_bag mean": lambda t, d: t.embedding_bag(d["W"], d["flat"], d["offsets"], False, 1),
    "embedding_bag max": lambda t, d: t.embedding_bag(d["W"], d["flat"], d["offsets"], False, 2),
    # the last offset ends the indices, as documented (torch's CPU mean divides the last bag by the count up to the
    # end of the indices even when the last offset stops earlier; ember divides by the bag's own size)
    "embedding_bag last offset": lambda t, d: t.embedding_bag(d["W"], d["flat"], t.tensor([0, 2, 6]), False, 1,
                                                              False, None, True),
    "batch_norm eval": lambda t, d: t.batch_norm(d["x4"], d["w"], d["b"], d["rm"].clone(), d["rv"].clone(), False,
                                                 0.1, 1e-5, False),
    "batch_norm train": lambda t, d: t.batch_norm(d["x4"], d["w"], d["b"], d["rm"].clone(), d["rv"].clone(), True,
                                                  0.1, 1e-5, False),
    "instance_norm": lambda t, d: t.instance_norm(d["x4"], d["w"], d["b"], None, None, True, 0.1, 1e-5, False),
    "group_norm": lambda t, d: t.group_norm(d["x4"], 3, d["w"], d["b"], 1e-5, False),
    "layer_norm": lambda t, d: t.layer_norm(d["x4"], [4], None, None, 1e-5, False),
    "kl_div default": lambda t, d: t.kl_div(t.log(d["m"]), d["q"]),
    "kl_div mean": lambda t, d: t.kl_div(t.log(d["m"]), d["q"], 1),
    "kl_div sum": lambda t, d: t.kl_div(t.log(d["m"]), d["q"], 2),
    "kl_div none log_target": lambda t, d: t.kl_div(t.log(d["m"]), t.log(d["q"]), 0, log_target=True),
    "bce_with_logits none": lambda t, d: t.binary_cross_entropy_with_logits(d["m"], d["q"], None, None, 0),
    "bce_with_logits pos_weight sum": lambda t, d: t.binary_cross_entropy_with_logits(d["m"], d["q"], None, d["g"], 2),
    "hinge_embedding_loss": lambda t, d: t.hinge_embedding_loss(d["v"], d["sign"], 1.0, 2),
    "cosine_embedding_loss": lambda t, d: t.cosine_embedding_loss(d["a"], d["p"], d["sign"], 0.1, 0),
    "margin_ranking_loss": lambda t, d: t.margin_ranking_loss(d["v"], d["u"], d["sign"], 0.1, 2),
    "triplet_margin_loss": lambda t, d: t.triplet_margin_loss(d["a"], d["p"], d["n"], 1.0, 2.0, 1e-6, True, 0),
    "poisson_nll_loss": lambda t, d: t.poisson_nll_loss(d["v"], d["u"], True, True, 1e-8, 2),
    "ctc_loss": lambda t, d: t.ctc_loss(d["lp"], t.tensor([[1, 2], [3, 4]]), [6, 6], [2, 2], 0, 0, False),
    "adaptive_max_pool1d": lambda t, d: t.adaptive_max_pool1d(d["x3"], 3),
}


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_values_tuples_and_gradients_match_torch(name):
    got = {}
    for lib_name, lib in LIBS.items():
        d = _data(lib)
        outs = _outputs(CALLS[name](lib, d))
        float_outs = [o for o in outs if o.dtype.is_floating_point]
        loss = sum((o * (1.0 + lib.arange(o.numel(), dtype=o.dtype).reshape(o.shape))).sum() for o in float_outs)
        leaves = [d[k] for k in ("x4", "x3", "w", "b", "W", "a", "v", "m")]
        grads = lib.autograd.grad(loss, leaves, allow_unused=True)
        got[lib_name] = ([o.detach().numpy() for o in outs], [None if g is None else g.numpy() for g in grads])
    (e_outs, e_grads), (t_outs, t_grads) = got["ember"], got["torch"]
    assert len(e_outs) == len(t_outs)
    for e, t in zip(e_outs, t_outs):
        assert e.shape == t.shape and e.dtype == t.dtype
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)
    for e, t in zip(e_grads, t_grads):
        assert (e is None) == (t is None)
        if e is not None:
            np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("lib", ["ember", "torch"])
def test_string_reduction_refused_as_torch(lib):
    t = LIBS[lib]
    with pytest.raises(TypeError, match="reduction"):
        t.kl_div(t.zeros(2), t.ones(2), "sum")


def test_nn_functional_keeps_its_own_signatures():
    w = ember.arange(6.0).reshape(3, 2)
    assert ember.nn.functional.embedding(ember.tensor([2]), w).tolist() == [[4.0, 5.0]]
    assert ember.embedding(w, ember.tensor([2])).tolist() == [[4.0, 5.0]]
    assert ember.nn.functional.kl_div(-ember.ones(2), ember.ones(2), reduction="sum").item() == 2.0
    assert ember.kl_div(-ember.ones(2), ember.ones(2)).tolist() == [1.0, 1.0]  # torch's top-level default: none
