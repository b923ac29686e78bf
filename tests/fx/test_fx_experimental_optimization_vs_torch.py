"""torch.fx.experimental.optimization under ember: fuse (conv/linear + batch norm folding), remove_dropout and
extract_subgraph give torch 2.13's graphs and values on the same weights."""
import numpy as np
import pytest

import ember
from ember.fx.experimental import optimization as eopt

torch = pytest.importorskip("torch")
topt = pytest.importorskip("torch.fx.experimental.optimization")


def _build(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
            self.c2, self.b3 = nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)
            self.d = nn.Dropout(0.5)
            self.l, self.b2 = nn.Linear(4, 5), nn.BatchNorm1d(5)
            self.c3, self.b4 = nn.Conv1d(4, 4, 1), nn.BatchNorm1d(4, track_running_stats=False)

        def forward(self, x):
            y = self.b1(self.c1(x))
            z = self.c2(y)
            w = self.b3(z) + z  # c2's output has two users: its batch norm stays
            v = self.b4(self.c3(w.mean(3)))  # no running statistics: stays
            return self.b2(self.l(self.d(v.mean(2))))

    return Net()


def _pair():
    reference, model = _build(torch), _build(ember)
    gen = torch.Generator().manual_seed(0)
    for m in reference.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            m.running_mean.copy_(torch.rand(m.num_features, generator=gen) * 2 - 1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.rand(m.num_features, generator=gen) - 0.5)
    model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    return reference.eval(), model.eval()


def _targets(gm):
    return [(n.op, str(n.target)) for n in gm.graph.nodes]


def test_fuse_like_torch():
    reference, model = _pair()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    before = model(ember.from_numpy(x)).detach().numpy()
    theirs, ours = topt.fuse(reference), eopt.fuse(model)
    assert _targets(ours) == _targets(theirs)
    assert "b1" not in dict(ours.named_modules()) or "b1" not in [n.target for n in ours.graph.nodes]
    with torch.no_grad():
        expected = theirs(torch.from_numpy(x)).numpy()
        unfused = reference(torch.from_numpy(x)).numpy()
    got = ours(ember.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, unfused, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model(ember.from_numpy(x)).detach().numpy(), before)  # the original is untouched


def test_remove_dropout_like_torch():
    reference, model = _pair()
    assert _targets(eopt.remove_dropout(model)) == _targets(topt.remove_dropout(reference))


def test_extract_subgraph_like_torch():
    reference, model = _pair()
    t_gm, e_gm = torch.fx.symbolic_trace(reference), ember.fx.symbolic_trace(model)
    t_nodes, e_nodes = list(t_gm.graph.nodes), list(e_gm.graph.nodes)
    t_sub = topt.extract_subgraph(t_gm, t_nodes[1:3], [t_nodes[0]], [t_nodes[2]])
    e_sub = eopt.extract_subgraph(e_gm, e_nodes[1:3], [e_nodes[0]], [e_nodes[2]])
    assert _targets(e_sub) == _targets(t_sub)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        expected = t_sub(torch.from_numpy(x))
    got = e_sub(ember.from_numpy(x))
    np.testing.assert_allclose(got[0].detach().numpy(), expected[0].numpy(), rtol=1e-5, atol=1e-6)
