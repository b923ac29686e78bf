"""``prune.PruningContainer`` is a sequence of its pruning history, as PyTorch's (pytorch/tutorials'
pruning_tutorial prints ``list(hook)``; ember's container was not iterable)."""
import pytest

import ember
import ember.nn.utils.prune as eprune

torch = pytest.importorskip("torch")
tprune = pytest.importorskip("torch.nn.utils.prune")


def _history(lib, prune):
    conv = lib.nn.Conv2d(1, 6, 3)
    prune.random_unstructured(conv, name="weight", amount=0.3)
    prune.l1_unstructured(conv, name="bias", amount=3)
    prune.ln_structured(conv, name="weight", amount=0.5, n=2, dim=0)
    hook = next(h for h in conv._forward_pre_hooks.values() if h._tensor_name == "weight")
    return hook


def test_container_iterates_and_indexes_like_torch():
    th, eh = _history(torch, tprune), _history(ember, eprune)
    assert [type(m).__name__ for m in th] == [type(m).__name__ for m in eh] == ["RandomUnstructured", "LnStructured"]
    assert len(eh) == len(th) == 2
    assert type(eh[0]).__name__ == type(th[0]).__name__ and eh[-1] is list(eh)[-1]
    with pytest.raises(IndexError):
        eh[2]
