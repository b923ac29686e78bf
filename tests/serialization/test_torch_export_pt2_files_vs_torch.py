"""``ember.export.load`` of ``.pt2`` files written by real ``torch.export.save`` (torch 2.13): the ATen graph (JSON)
runs on ember's operators through the ``torch.ops.aten`` allow-list; outputs, gradients and mutated buffers must
equal ``torch.export.load(...).module()``'s on the same inputs. Files are made by torch into ``tmp_path``; hostile
variants of them are refused with the entry named.
"""
from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import ember
from ember.export.pt2 import Pt2Error

torch = pytest.importorskip("torch")
nn = torch.nn


def _export(tmp_path, module, args, name="m"):
    path = tmp_path / f"{name}.pt2"
    torch.export.save(torch.export.export(module, args), str(path))
    return path


def _flat(out):
    if isinstance(out, dict):
        return [leaf for key in sorted(out) for leaf in _flat(out[key])]
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _flat(item)]
    return [out]


def _compare(path, inputs, tol=2e-5, grads=True):
    theirs = torch.export.load(str(path)).module()
    ours = ember.export.load(path).module()
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(n for n, _ in theirs.named_parameters())
    t_in = [x.clone().requires_grad_(grads and x.is_floating_point()) for x in inputs]
    e_in = [ember.tensor(x.numpy()).requires_grad_(grads and x.is_floating_point()) for x in inputs]
    t_out, e_out = theirs(*t_in), ours(*e_in)
    assert type(e_out) is type(t_out) or isinstance(t_out, torch.Tensor)
    t_flat, e_flat = _flat(t_out), _flat(e_out)
    assert len(t_flat) == len(e_flat)
    for a, b in zip(e_flat, t_flat):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)
    if grads:
        gen = torch.Generator().manual_seed(3)
        weights = [torch.randn(b.shape, generator=gen, dtype=b.dtype) for b in t_flat]
        sum((b * w).sum() for b, w in zip(t_flat, weights) if b.is_floating_point()).backward()
        sum((a * ember.tensor(w.numpy())).sum() for a, w in zip(e_flat, weights) if a.is_floating_point()).backward()
        for a, b in zip(e_in, t_in):
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)
        t_params = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=tol, atol=tol, err_msg=name)
    t_buffers = dict(theirs.named_buffers())
    for name, b in ours.named_buffers():
        np.testing.assert_allclose(b.numpy(), t_buffers[name].numpy(), rtol=tol, atol=tol, err_msg=name)
    return ours, theirs


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.register_buffer("k", torch.linspace(0.5, 1.5, 3))

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x))) * self.k + 1


class Branches(nn.Module):
    """Several outputs in a dict and a tuple; slicing, cat, softmax, sizes."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        y = self.proj(x)
        a, b = y[:, :3], y[:, 3:]
        return {"soft": torch.softmax(a, -1), "cat": torch.cat([b, a * 2], 1)}, (y.mean(0), y.shape[0] * y)


@pytest.mark.parametrize("train", [False, True])
def test_linear_batch_norm(tmp_path, train):
    """In train mode batch norm's running statistics are buffer mutations: ember writes them back as torch does."""
    torch.manual_seed(0)
    x = torch.randn(5, 4)
    _compare(_export(tmp_path, Small().train(train), (x,)), [x])


def test_cnn(tmp_path):
    torch.manual_seed(1)
    cnn = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(6, 4, 3, stride=2, groups=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 5)).eval()
    x = torch.randn(2, 3, 12, 12)
    _compare(_export(tmp_path, cnn, (x,)), [x])


def test_outputs_tree(tmp_path):
    torch.manual_seed(2)
    x = torch.randn(4, 6)
    ours, _ = _compare(_export(tmp_path, Branches(), (x,)), [x])
    out = ours(ember.tensor(x.numpy()))
    assert isinstance(out, tuple) and isinstance(out[0], dict) and sorted(out[0]) == ["cat", "soft"]


def test_transformer_layer_and_lstm(tmp_path):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    _compare(_export(tmp_path, layer, (x,), "tr"), [x])

    class L(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 5, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]
    seq = torch.randn(2, 6, 4)
    _compare(_export(tmp_path, L(), (seq,), "lstm"), [seq])


def test_float64(tmp_path):
    torch.manual_seed(4)
    x = torch.randn(5, 4, dtype=torch.float64)
    _compare(_export(tmp_path, Small().double().eval(), (x,)), [x], tol=1e-10)


def test_signature(tmp_path):
    x = torch.randn(5, 4)
    program = ember.export.load(_export(tmp_path, Small().eval(), (x,)))
    theirs = torch.export.load(str(tmp_path / "m.pt2"))
    for field in ("parameters", "buffers", "user_inputs"):
        assert list(getattr(program.graph_signature, field)) == list(getattr(theirs.graph_signature, field)), field


def _edit(src, dst, change):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("models/model.json"):
                data = json.dumps(change(json.loads(data), "model")).encode()
            elif info.filename.endswith("model_weights_config.json"):
                data = json.dumps(change(json.loads(data), "weights")).encode()
            zout.writestr(info.filename, data)
    return dst


def _node_target(target):
    def change(doc, kind):
        if kind == "model":
            doc["graph_module"]["graph"]["nodes"][0]["target"] = target
        return doc
    return change


@pytest.mark.parametrize("target, expected", [
    ("builtins.eval", "is not an ATen operator"),
    ("os.system", "is not an ATen operator"),
    ("torch.ops.aten.save.default", "no ember counterpart"),
    ("torch.ops.higher_order.cond", "is not an ATen operator"),
    ("torch.ops.aten.__import__.default", "no ember counterpart"),
])
def test_hostile_targets_are_refused(tmp_path, target, expected):
    src = _export(tmp_path, Small().eval(), (torch.randn(2, 4),))
    with pytest.raises(Pt2Error, match=expected):
        ember.export.load(_edit(src, tmp_path / "bad.pt2", _node_target(target)))


def _weights(edit):
    def change(doc, kind):
        if kind == "weights":
            edit(next(iter(doc["config"].values())))
        return doc
    return change


@pytest.mark.parametrize("edit, expected", [
    (lambda e: e.update(path_name="../../etc/passwd"), "not a plain member name"),
    (lambda e: e.update(use_pickle=True), "stored with pickle"),
    (lambda e: e["tensor_meta"].update(sizes=[{"as_int": 1000}, {"as_int": 1000}]), "needs"),
    (lambda e: e["tensor_meta"].update(dtype=99), "dtype code"),
    (lambda e: e["tensor_meta"].update(sizes=[{"as_int": -3}, {"as_int": 4}]), "non-negative"),
])
def test_hostile_weights_are_refused(tmp_path, edit, expected):
    src = _export(tmp_path, Small().eval(), (torch.randn(2, 4),))
    with pytest.raises(Pt2Error, match=expected):
        ember.export.load(_edit(src, tmp_path / "bad.pt2", _weights(edit)))


def test_dangling_reference_is_refused(tmp_path):
    def change(doc, kind):
        if kind == "model":
            doc["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_tensor": {"name": "nowhere"}}
        return doc
    src = _export(tmp_path, Small().eval(), (torch.randn(2, 4),))
    program = ember.export.load(_edit(src, tmp_path / "bad.pt2", change))
    with pytest.raises(Pt2Error, match="which no earlier node or input made"):
        program.module()(ember.randn(2, 4))
