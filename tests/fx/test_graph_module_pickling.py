"""GraphModule pickling (pickle, torch.save/load with weights_only=False, copy.deepcopy), as torch.fx allows,
but without running code from the file: the graph travels as data and forward is generated again on load."""
import copy
import io
import pickle

import numpy as np
import pytest

import ember
import ember.fx as fx
from ember.fx.graph_module import _NodeRef, _rebuild_graph_module


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(3, 2)
        self.register_buffer("shift", ember.ones(2))

    def forward(self, x, scale: float = 2.0):
        return ember.relu(self.lin(x)).mul(scale) + self.shift + x.sum(dim=1, keepdim=True)


def _traced():
    ember.manual_seed(0)
    return fx.symbolic_trace(Net())


def test_pickle_round_trip_keeps_graph_code_and_values():
    gm = _traced()
    x = ember.randn(4, 3)
    loaded = pickle.loads(pickle.dumps(gm))
    assert loaded.code == gm.code and str(loaded.graph) == str(gm.graph)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), gm(x).detach().numpy())
    np.testing.assert_array_equal(loaded(x, 3.0).detach().numpy(), gm(x, 3.0).detach().numpy())
    assert isinstance(loaded, fx.GraphModule) and type(loaded).__name__ == "Net" and type(loaded) is not type(gm)


def test_an_edited_graph_survives_pickling():
    gm = _traced()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is ember.relu:
            node.target = ember.tanh
    gm.recompile()
    loaded = pickle.loads(pickle.dumps(gm))
    x = ember.randn(2, 3)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), gm(x).detach().numpy())
    assert "tanh" in loaded.code


def test_deepcopy_copies_weights():
    gm = _traced()
    twin = copy.deepcopy(gm)
    assert twin.lin.weight is not gm.lin.weight
    with ember.no_grad():
        twin.lin.weight.add_(1.0)
    x = ember.randn(2, 3)
    assert not np.allclose(twin(x).detach().numpy(), gm(x).detach().numpy())


def test_save_load_needs_weights_only_false_like_torch():
    gm = _traced()
    buffer = io.BytesIO()
    ember.save(gm, buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="_rebuild_graph_module"):
        ember.load(buffer)
    buffer.seek(0)
    loaded = ember.load(buffer, weights_only=False)
    x = ember.randn(3, 3)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), gm(x).detach().numpy())


def test_a_tampered_graph_is_refused_by_the_graph_checks():
    gm = _traced()
    state = {k: v for k, v in gm.__dict__.items() if k not in ("_graph", "_code")}
    x_ref = _NodeRef("x")
    for bad in ([("placeholder", "x", "x; import os", (), {}, None)],
                [("placeholder", "x", "x", (), {}, None), ("call_method", "m", "__class__.__init__", (x_ref,), {}, None)],
                [("placeholder", "x", "x", (), {}, None), ("get_attr", "g", "lin.__init__.__globals__", (), {}, None)],
                [("call_function", "f", ember.relu, (_NodeRef("nowhere"),), {}, None)]):
        with pytest.raises((ValueError, RuntimeError, AttributeError)):
            _rebuild_graph_module(dict(state), bad, "Net")


def test_torch_pickles_the_same_module_too():
    torch = pytest.importorskip("torch")

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return torch.relu(self.lin(x))

    gm = torch.fx.symbolic_trace(TorchNet())
    assert isinstance(pickle.loads(pickle.dumps(gm)), torch.fx.GraphModule)  # what ember's behaviour mirrors
