"""``state_dict()._metadata`` and the per-module ``local_metadata`` of ``_load_from_state_dict``, as PyTorch's.

torchvision's MNASNet overrides ``_load_from_state_dict`` and raises unless ``local_metadata["version"]``
is 1 or 2: ember's ``state_dict()`` carried no ``_metadata`` and ``load_state_dict`` passed every module the
same dict, so no torchvision MNASNet checkpoint loaded. The class: module versions (``_version``) written by
``state_dict``, handed back per module on load (BatchNorm's version 2 counter rule, InstanceNorm's
pre-0.4 running-stats rule), kept by save/load.
"""
import io
from collections import OrderedDict

import numpy as np
import pytest
import torch

import ember


def _model(L):
    return L.nn.Sequential(L.nn.Conv2d(2, 3, 3), L.nn.BatchNorm2d(3),
                           L.nn.Sequential(L.nn.InstanceNorm2d(3, affine=True), L.nn.Linear(4, 4)))


def test_state_dict_metadata_equals_torch():
    t, e = _model(torch).state_dict(), _model(ember).state_dict()
    assert list(e.keys()) == list(t.keys())
    assert dict(e._metadata) == dict(t._metadata)
    assert list(e._metadata) == list(t._metadata)


def _versioned(L, seen):
    class Versioned(L.nn.Module):
        _version = 3

        def __init__(self):
            super().__init__()
            self.new_name = L.nn.Parameter(L.zeros(2))

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            seen.append(dict(local_metadata))
            if local_metadata.get("version", None) in (None, 1):  # an old checkpoint: the key was renamed since
                old = prefix + "old_name"
                if old in state_dict:
                    state_dict[prefix + "new_name"] = state_dict.pop(old)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    return L.nn.Sequential(L.nn.Linear(2, 2), Versioned())


@pytest.mark.parametrize("assign", [False, True])
def test_each_module_gets_its_own_metadata_entry(assign):
    results = {}
    for L in (torch, ember):
        seen = []
        model = _versioned(L, seen)
        sd = model.state_dict()
        sd["1.new_name"] = L.tensor([1.0, 2.0])
        model.load_state_dict(sd, assign=assign)
        old = OrderedDict([("0.weight", L.ones(2, 2)), ("0.bias", L.ones(2)), ("1.old_name", L.tensor([3.0, 4.0]))])
        model.load_state_dict(old, assign=assign)  # a plain dict: no versions, so the rename applies
        results[L.__name__] = (seen, model[1].new_name.tolist())
    assert results["ember"] == results["torch"]
    assert results["ember"][0][0]["version"] == 3


def test_batch_norm_counter_rule_follows_the_version():
    for L in (torch, ember):
        bn = L.nn.BatchNorm1d(2)
        sd = bn.state_dict()
        del sd["num_batches_tracked"]
        with pytest.raises(RuntimeError, match="num_batches_tracked"):
            bn.load_state_dict(sd)  # version 2 says the key must be there
        sd._metadata[""]["version"] = 1
        bn.num_batches_tracked.fill_(7)
        bn.load_state_dict(sd)  # version 1 predates it: the module keeps its own counter
        assert int(bn.num_batches_tracked) == 7
        bn.load_state_dict(dict(sd))  # no metadata at all: same as version 1
        assert int(bn.num_batches_tracked) == 7


def test_instance_norm_refuses_old_running_stats_like_torch():
    messages = {}
    for L in (torch, ember):
        norm = L.nn.InstanceNorm1d(2)
        plain = {"running_mean": L.zeros(2), "running_var": L.ones(2)}
        with pytest.raises(RuntimeError) as err:
            norm.load_state_dict(plain)
        messages[L.__name__] = str(err.value)
        with pytest.raises(RuntimeError, match="Unexpected running stats"):  # an error message, not a key list
            norm.load_state_dict(plain, strict=False)
    assert messages["ember"] == messages["torch"]


def test_metadata_survives_save_and_load_both_ways(tmp_path):
    e_sd = _model(ember).state_dict()
    buffer = io.BytesIO()
    ember.save(e_sd, buffer)
    buffer.seek(0)
    assert dict(ember.load(buffer)._metadata) == dict(e_sd._metadata)
    path = tmp_path / "torch.pt"
    torch.save(_model(torch).state_dict(), path)
    loaded = ember.load(path)
    assert dict(loaded._metadata) == dict(e_sd._metadata)
    model = _model(ember)
    model.load_state_dict(loaded)
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), loaded["0.weight"].numpy())
