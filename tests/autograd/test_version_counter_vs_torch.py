"""``Tensor._version`` counts in-place changes as PyTorch's does (shared by views, bumped by in-place ops, ``out=``,
``copy_``, setitem, fills, optimizer steps; not by ``.data`` writes), and autograd's "modified by an inplace
operation" error fires on the same programs as torch's, with torch's message. Every case runs in both libraries."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _seq(*steps):
    """Run the steps, return the last one's value."""
    return steps[-1]


VERSIONS = {
    "fresh": lambda L: L.zeros(3)._version,
    "add_": lambda L: (lambda a: _seq(a.add_(1), a._version))(L.zeros(3)),
    "two ops, one through a view": lambda L: (lambda a: _seq(a.add_(1), a[0].mul_(2), a._version))(L.zeros(3)),
    "view sees base writes": lambda L: (lambda a: _seq(a.t().add_(1), a[0].add_(1), (a._version, a.t()._version)))(
        L.zeros(3, 3)),
    "out=": lambda L: (lambda a: _seq(L.add(L.ones(3), 1, out=a), a._version))(L.zeros(3)),
    "sort out=": lambda L: (lambda a: _seq(L.sort(L.ones(3), out=(a, L.zeros(3, dtype=L.int64))), a._version))(
        L.zeros(3)),
    "setitem number": lambda L: (lambda a: _seq(a.__setitem__(0, 1.0), a._version))(L.zeros(3)),
    "setitem tensor": lambda L: (lambda a: _seq(a.__setitem__(slice(None), L.ones(3)), a._version))(L.zeros(3)),
    "copy_": lambda L: (lambda a: _seq(a.copy_(L.ones(3)), a._version))(L.zeros(3)),
    "zero_ then fill_": lambda L: (lambda a: _seq(a.zero_(), a.fill_(2), a._version))(L.zeros(3)),
    "+=": lambda L: (lambda a: _seq(a.__iadd__(1), a._version))(L.zeros(3)),
    "clone starts at 0": lambda L: (lambda a: _seq(a.add_(1), a.clone()._version))(L.zeros(3)),
    "detach shares": lambda L: (lambda a: _seq(a.add_(1), a.detach().add_(1), (a._version, a.detach()._version)))(
        L.zeros(3)),
    ".data has its own": lambda L: (lambda a: _seq(a.add_(1), (a.data._version, a.data.add_(1) is None, a._version)))(
        L.zeros(3)),
    ".data = keeps": lambda L: (lambda a: _seq(a.add_(1), setattr(a, "data", L.ones(3)), a._version))(L.zeros(3)),
    "resize_": lambda L: (lambda a: _seq(a.resize_(6), a._version))(L.zeros(3)),
    "requires_grad_ does not": lambda L: (lambda a: _seq(a.requires_grad_(), a._version))(L.zeros(3)),
    "uniform_ normal_": lambda L: (lambda a: _seq(a.uniform_(), a.normal_(), a._version))(L.zeros(3)),
    "index_add_": lambda L: (lambda a: _seq(a.index_add_(0, L.tensor([0]), L.ones(1)), a._version))(L.zeros(3)),
    "masked_fill_": lambda L: (lambda a: _seq(a.masked_fill_(a > -1, 2.0), a._version))(L.zeros(3)),
    "Parameter": lambda L: L.nn.Parameter(L.zeros(3))._version,
    "grad accumulation": lambda L: (lambda p: _seq((p * 2).sum().backward(), (p * 2).sum().backward(),
                                                   p.grad._version))(L.ones(3, requires_grad=True)),
    "grad zero_": lambda L: (lambda p: _seq((p * 2).sum().backward(), p.grad.zero_(), p.grad._version))(
        L.ones(3, requires_grad=True)),
    "no_grad param update": lambda L: _no_grad_update(L),
}


def _no_grad_update(L):
    p = L.nn.Parameter(L.ones(3))
    with L.no_grad():
        p.sub_(1)
        p -= 1
    return p._version


@pytest.mark.parametrize("case", sorted(VERSIONS))
def test_version_like_torch(case):
    assert VERSIONS[case](ember) == VERSIONS[case](torch)


OPTIMIZERS = [("SGD", {}), ("SGD", {"momentum": 0.9}), ("Adam", {}), ("AdamW", {}), ("Adam", {"weight_decay": 0.1}),
              ("RMSprop", {}), ("Adagrad", {})]


@pytest.mark.parametrize("name,options", OPTIMIZERS, ids=[f"{n}{o}" for n, o in OPTIMIZERS])
def test_optimizer_steps_count_like_torch(name, options):
    """Each step's in-place updates bump the parameter and its state as torch's single-tensor loops do, also once
    ember's update runs compiled (its first step runs op by op, the second traces, later ones replay)."""
    def run(L):
        p = L.nn.Parameter(L.ones(3))
        opt = getattr(L.optim, name)([p], lr=0.1, **options)
        seen = []
        for _ in range(4):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
            seen.append((p._version, sorted((k, v._version) for k, v in opt.state[p].items()
                                            if isinstance(v, L.Tensor))))
        return seen

    assert run(ember) == run(torch)


def _raises(L, program):
    try:
        program(L)
    except RuntimeError as error:
        return str(error)
    return None


def _gan(L):
    """The classic GAN mistake: the optimizer updates a weight a retained graph still needs."""
    w = L.nn.Parameter(L.ones(3, 2))
    opt = L.optim.SGD([w], lr=0.1)
    x = L.ones(3, 2, requires_grad=True)
    y = (x * w).sum()
    opt.zero_grad()
    y.backward(retain_graph=True)
    opt.step()
    y.backward()


def _sigmoid_input_changed(L):  # sigmoid saves its output, not its input: no error in torch
    x = L.ones(3, requires_grad=True)
    z = x * 2
    w = z.sigmoid()
    z.add_(1)
    w.sum().backward()


def _mul_input_changed(L):
    x = L.ones(3, requires_grad=True)
    z = x * 2
    w = z * z
    z.add_(1)
    w.sum().backward()


def _output_changed(L):
    x = L.ones(3, requires_grad=True)
    y = x.exp()
    y[0] = 2
    y.sum().backward()


def _tanh_output_changed(L):
    x = L.ones(1, 3, requires_grad=True)
    y = L.nn.functional.linear(x, L.ones(2, 3)).tanh()
    y.mul_(2)
    y.sum().backward()


def _leaf_saved_changed(L):
    w = L.ones(2, 2, requires_grad=True)
    x = L.ones(2, 2, dtype=L.float64)
    y = (w.double() @ x).sum()
    x.add_(1)
    y.backward()


def _data_write_is_not_seen(L):  # torch: .data writes are invisible to the check (a silently different gradient)
    x = L.ones(3, requires_grad=True)
    y = x * 1
    z = y.exp()
    y.data.add_(1)
    z.sum().backward()


def _changed_under_no_grad(L):
    w = L.nn.Parameter(L.ones(3))
    y = (w * w).sum()
    with L.no_grad():
        w.mul_(2)
    y.backward()


def _detach_shares_counter(L):
    x = L.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y.detach().zero_()
    z.sum().backward()


def _mm_input_then_view_write(L):
    x = L.ones(2, 3, requires_grad=True)
    h = x * 1
    out = h @ L.ones(3, 2)
    h[:, 0].mul_(0)
    out.sum().backward()


def _relu_inplace_after_linear(L):  # ReLU(inplace=True) on a linear's output: fine, linear saves no output
    x = L.ones(2, 3, requires_grad=True)
    lin = L.nn.Linear(3, 4)
    y = L.nn.functional.relu(lin(x), inplace=True)
    y.sum().backward()


def _anomaly_hint(L):
    with L.autograd.set_detect_anomaly(True):
        _mul_input_changed(L)


PROGRAMS = {f.__name__.strip("_"): f for f in (
    _gan, _sigmoid_input_changed, _mul_input_changed, _output_changed, _tanh_output_changed, _leaf_saved_changed,
    _data_write_is_not_seen, _changed_under_no_grad, _detach_shares_counter, _mm_input_then_view_write,
    _relu_inplace_after_linear, _anomaly_hint)}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_inplace_error_like_torch(name):
    """Raised on the same programs as torch, with torch's message (legacy type, size, the node that made the
    tensor without its Backward suffix, both versions, the hint), then the op that saved the tensor."""
    theirs = _raises(torch, PROGRAMS[name])
    ours = _raises(ember, PROGRAMS[name])
    assert (ours is None) == (theirs is None), (ours, theirs)
    if theirs is not None:
        assert ours.startswith(theirs + " (It was saved as the "), (ours, theirs)
