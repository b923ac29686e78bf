"""The ``meta`` device (``ember/backends/meta.py``) against PyTorch's: shapes and dtypes of factories and ops,
modules moved with ``.to("meta")``, ``with torch.device("meta")``, ``to_empty``, ``load_state_dict(assign=True)``,
printing, and the refusals to read data. PyTorch's ensembling tutorial keeps a meta copy of a model for
``functional_call``."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.nn as enn

torch = pytest.importorskip("torch")

OPS = {
    "matmul": lambda t, a, b: a @ b.T,
    "add_broadcast": lambda t, a, b: a + b[:1],
    "softmax": lambda t, a, b: t.softmax(a, -1),
    "sum_dim": lambda t, a, b: a.sum(1, keepdim=True),
    "cat": lambda t, a, b: t.cat([a, b], 0),
    "view_permute": lambda t, a, b: a.reshape(2, 3, 2).permute(2, 0, 1),
    "index": lambda t, a, b: a[:, 1:3],
    "compare": lambda t, a, b: a > b,
    "argmax": lambda t, a, b: a.argmax(-1),
    "linear": lambda t, a, b: t.nn.functional.linear(a, b, None),
    "conv": lambda t, a, b: t.nn.functional.conv2d(a.reshape(1, 1, 6, 2), b.reshape(6, 1, 1, 2)),
    "cast": lambda t, a, b: a.to(t.float64).long(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_keep_shape_dtype_and_device_like_torch(name):
    ours = OPS[name](ember, ember.empty(6, 2, device="meta"), ember.empty(6, 2, device="meta"))
    theirs = OPS[name](torch, torch.empty(6, 2, device="meta"), torch.empty(6, 2, device="meta"))
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.device.type == theirs.device.type == "meta" and ours.is_meta


@pytest.mark.parametrize("factory", ["empty", "zeros", "ones", "rand", "randn"])
@pytest.mark.parametrize("dtype", [None, "float64", "int64"])
def test_factories_like_torch(factory, dtype):
    if dtype == "int64" and factory in ("rand", "randn"):
        return
    kwargs = {} if dtype is None else {"dtype": getattr(ember, dtype)}
    ours = getattr(ember, factory)(3, 4, device="meta", **kwargs)
    theirs = getattr(torch, factory)(3, 4, device="meta", **({} if dtype is None else {"dtype": getattr(torch, dtype)}))
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    assert ours.is_meta and not ember.ones(1).is_meta


def test_huge_meta_tensors_hold_no_memory():
    x = ember.empty(100_000, 100_000, device="meta")  # 40 GB if it were real
    y = (x.t().contiguous() * 2 + 1).exp()  # copies and elementwise ops stay one element
    assert tuple(y.shape) == (100_000, 100_000) and y._data.nbytes == 4 * 100_000 * 100_000
    assert y._data.base is not None and all(s == 0 for s in y._data.strides)


def test_module_to_meta_and_back_like_torch():
    def run(lib, nn):
        lib.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        state = copy.deepcopy(model.state_dict())
        meta = copy.deepcopy(model).to("meta")
        shapes = [(n, tuple(p.shape), p.device.type) for n, p in meta.named_parameters()]
        out_meta = meta(lib.empty(5, 4, device="meta"))
        meta.to_empty(device="cpu")
        meta.load_state_dict(state)
        x = lib.tensor(np.linspace(-1, 1, 20).reshape(5, 4), dtype=lib.float32)
        return shapes, tuple(out_meta.shape), out_meta.device.type, meta(x).detach().numpy(), model(x).detach().numpy()

    ours, theirs = run(ember, enn), run(torch, torch.nn)
    assert ours[:3] == theirs[:3]
    np.testing.assert_allclose(ours[3], ours[4], rtol=1e-6)  # restored state gives the original outputs
    np.testing.assert_allclose(theirs[3], theirs[4], rtol=1e-6)


def test_device_context_and_assign_like_torch():
    def run(lib, nn):
        with lib.device("meta"):
            layer = nn.Linear(3, 2)
            inside = lib.ones(2).device.type
        outside = lib.ones(2).device.type
        real = nn.Linear(3, 2)
        layer.load_state_dict(real.state_dict(), assign=True)
        return layer.weight.device.type, inside, outside, bool((layer.weight == real.weight).all())

    assert run(ember, enn) == run(torch, torch.nn) == ("cpu", "meta", "cpu", True)


def test_set_default_device_like_torch():
    try:
        ember.set_default_device("meta")
        torch.set_default_device("meta")
        assert ember.zeros(2).device.type == torch.zeros(2).device.type == "meta"
        assert ember.get_default_device().type == torch.get_default_device().type == "meta"
    finally:
        ember.set_default_device(None)
        torch.set_default_device(None)
    assert ember.zeros(2).device.type == torch.zeros(2).device.type == "cpu"


def test_reading_data_is_refused_like_torch():
    for lib in (ember, torch):
        x = lib.ones(3, device="meta")
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data"):
            x.cpu()
        with pytest.raises(Exception):
            x.sum().item()
        with pytest.raises(Exception):
            x.tolist()
    with pytest.raises(Exception, match="meta"):
        ember.ones(3, device="meta").numpy()


def test_inplace_init_runs_on_meta_like_torch():
    for lib in (ember, torch):
        w = lib.empty(4, 3, device="meta")
        lib.nn.init.kaiming_uniform_(w)
        w.add_(1).mul_(2)
        assert w.is_meta and tuple(w.shape) == (4, 3)
    x = ember.zeros(2, 2, device="meta", requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.is_meta and tuple(x.grad.shape) == (2, 2)


def test_mixing_meta_and_cpu_is_refused():
    with pytest.raises(RuntimeError, match="meta"):
        ember.ones(2, device="meta") + ember.ones(2)


def test_random_draws_and_initializers_on_meta_draw_nothing_like_torch():
    # a model built under torch.device("meta") (reasoning_about_shapes recipe, big-model loading) draws no numbers:
    # ember drew every initial value on the host first (4000 x 4000 Linear: 2.4 s, 64 MB)
    import time

    import torch

    seq = []
    for L in (torch, ember):
        L.manual_seed(0)
        start = time.process_time()
        with L.device("meta"):
            m = L.nn.Linear(8000, 8000)
            x = L.randn(5, 300)
            L.nn.init.trunc_normal_(m.bias)
            L.nn.init.orthogonal_(m.weight)
            L.nn.init.sparse_(L.empty(9000, 9000), 0.5)
        x.normal_(), x.uniform_(), x.bernoulli_(0.3), x.random_(0, 4), x.exponential_(), x.cauchy_()
        huge = L.rand(2 ** 10, 3, 2 ** 16, 2 ** 16, device="meta")
        ints = L.randint(0, 3, (2 ** 40,), device="meta")
        perm = L.randperm(9, device="meta")
        normal = L.normal(0.0, 1.0, (2 ** 20, 2 ** 20), device="meta")
        assert time.process_time() - start < 5.0
        assert (m.weight.device.type, tuple(huge.shape), str(ints.dtype), str(perm.dtype), tuple(normal.shape)) == (
            "meta", (2 ** 10, 3, 2 ** 16, 2 ** 16), f"{L.__name__}.int64", f"{L.__name__}.int64", (2 ** 20, 2 ** 20))
        seq.append(L.rand(3).tolist())  # the CPU stream did not move
    assert seq[0] == seq[1]
