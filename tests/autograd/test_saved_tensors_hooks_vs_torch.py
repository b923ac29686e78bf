"""torch.autograd.graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks, against torch 2.13.

What the hooks see (shapes, how many packs and unpacks per op), gradients with identity, cloning and
offloading hooks (first and second order), nesting, retain_graph, in-place changes, errors.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

LIBS = {"ember": ember, "torch": torch}


def _tensors(lib, seed=0):
    rng = np.random.default_rng(seed)
    a = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    c = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    return a, b, c


PROGRAMS = {
    "mul": lambda L, a, b, c: a * b, "mul_const": lambda L, a, b, c: a * c, "mul_scalar": lambda L, a, b, c: a * 2.0,
    "add": lambda L, a, b, c: a + b, "sub": lambda L, a, b, c: a - b, "div": lambda L, a, b, c: a / b,
    "pow2": lambda L, a, b, c: a ** 2, "exp": lambda L, a, b, c: a.exp(), "log": lambda L, a, b, c: (a * a + 1).log(),
    "sin": lambda L, a, b, c: a.sin(), "tanh": lambda L, a, b, c: a.tanh(), "sigmoid": lambda L, a, b, c: a.sigmoid(),
    "relu": lambda L, a, b, c: a.relu(), "F.relu": lambda L, a, b, c: L.nn.functional.relu(a),
    "sum": lambda L, a, b, c: a.sum(), "mean": lambda L, a, b, c: a.mean(), "sum_dim": lambda L, a, b, c: a.sum(1),
    "matmul": lambda L, a, b, c: a @ b.t(), "mm": lambda L, a, b, c: a.mm(b.t()),
    "softmax": lambda L, a, b, c: a.softmax(1), "log_softmax": lambda L, a, b, c: a.log_softmax(1),
    "view": lambda L, a, b, c: a.view(-1), "t": lambda L, a, b, c: a.t(), "clone": lambda L, a, b, c: a.clone(),
    "abs": lambda L, a, b, c: a.abs(), "sqrt": lambda L, a, b, c: (a * a).sqrt(),
    "gelu": lambda L, a, b, c: L.nn.functional.gelu(a), "silu": lambda L, a, b, c: L.nn.functional.silu(a),
    "mse_loss": lambda L, a, b, c: L.nn.functional.mse_loss(a, c), "neg": lambda L, a, b, c: -a,
    "cat": lambda L, a, b, c: L.cat([a, b]), "maximum": lambda L, a, b, c: L.maximum(a, b),
    "where": lambda L, a, b, c: L.where(c > 0, a, b), "index": lambda L, a, b, c: a[0],
    "clamp": lambda L, a, b, c: a.clamp(-0.5, 0.5), "max_dim": lambda L, a, b, c: a.max(1)[0],
}
# Programs where ember saves more than PyTorch (none now: max(dim) keeps only its indices, as PyTorch's, since
# OpDef.saved_outputs names the outputs a backward reads).
SAVES_MORE: set = set()
# Composites: ember writes mse_loss in primitives ((a - c) ** 2 keeps the difference), PyTorch's one kernel keeps
# both inputs. The values differ by construction; the gradients must not.
COMPOSITE = {"mse_loss"}


def _seen(lib, program):
    a, b, c = _tensors(lib)
    packs, unpacks = [], []

    def pack(t):
        packs.append((tuple(t.shape), t.requires_grad, t.grad_fn is not None))
        return t

    def unpack(t):
        unpacks.append(tuple(t.shape))
        return t

    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = program(lib, a, b, c)
    y.sum().backward()
    return sorted(packs), sorted(unpacks), a.grad.numpy(), None if b.grad is None else b.grad.numpy()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pack_and_unpack_see_what_torch_hooks_see(name):
    packs, unpacks, ga, gb = _seen(ember, PROGRAMS[name])
    t_packs, t_unpacks, t_ga, t_gb = _seen(torch, PROGRAMS[name])
    if name in SAVES_MORE:
        assert set(t_packs) <= set(packs) and len(packs) > len(t_packs)
    elif name in COMPOSITE:
        assert packs and len(unpacks) == len(packs)
    else:
        assert packs == t_packs  # shape, requires_grad and whether it has a grad_fn, per saved tensor
        assert unpacks == t_unpacks
    np.testing.assert_allclose(ga, t_ga, rtol=1e-5, atol=1e-6)
    assert (gb is None) == (t_gb is None)
    if gb is not None:
        np.testing.assert_allclose(gb, t_gb, rtol=1e-5, atol=1e-6)


def _mlp_grads(lib, hooks):
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    w1 = lib.tensor(rng.standard_normal((6, 7)).astype(np.float32), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((7, 3)).astype(np.float32), requires_grad=True)
    target = lib.tensor(rng.integers(0, 3, 5))
    with hooks(lib):
        h = (x @ w1).tanh()
        logits = h.relu() @ w2
        loss = lib.nn.functional.cross_entropy(logits, target) + (w1 * w1).sum() * 0.01
    loss.backward()
    return loss.item(), w1.grad.numpy(), w2.grad.numpy()


HOOKS = {
    "none": lambda lib: _Null(),
    "identity": lambda lib: lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t),
    "detach_clone": lambda lib: lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t),
    "numpy_roundtrip": lambda lib: lib.autograd.graph.saved_tensors_hooks(
        lambda t: t.detach().numpy().copy(), lambda arr: lib.from_numpy(arr)),
    "save_on_cpu": lambda lib: lib.autograd.graph.save_on_cpu(),
}


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("hooks", sorted(HOOKS))
def test_gradients_with_hooks_equal_torch(hooks):
    loss, g1, g2 = _mlp_grads(ember, HOOKS[hooks])
    t_loss, t_g1, t_g2 = _mlp_grads(torch, HOOKS[hooks])
    assert loss == pytest.approx(t_loss, rel=1e-5)
    np.testing.assert_allclose(g1, t_g1, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g2, t_g2, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_second_order_through_hooked_saved_tensors(lib_name):
    lib = LIBS[lib_name]
    x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        y = (x * x * x).sum() + x.sin().sum()
    (g,) = lib.autograd.grad(y, x, create_graph=True)
    (gg,) = lib.autograd.grad(g.sum(), x)
    xs = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(g.detach().numpy(), 3 * xs ** 2 + np.cos(xs), rtol=1e-5)
    np.testing.assert_allclose(gg.numpy(), 6 * xs - np.sin(xs), rtol=1e-5)


def _counts_with_retain_graph(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    counts = [0, 0]

    def pack(t):
        counts[0] += 1
        return t

    def unpack(t):
        counts[1] += 1
        return t

    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x * x).sin().sum()
    y.backward(retain_graph=True)
    y.backward()
    return counts, x.grad.numpy()


def test_retain_graph_unpacks_again_like_torch():
    counts, grad = _counts_with_retain_graph(ember)
    t_counts, t_grad = _counts_with_retain_graph(torch)
    assert counts == t_counts == [3, 6]
    np.testing.assert_allclose(grad, t_grad, rtol=1e-6)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_innermost_pair_wins_and_nothing_is_packed_without_grad(lib_name):
    lib = LIBS[lib_name]
    x = lib.ones(3, requires_grad=True)
    seen = []
    outer = lib.autograd.graph.saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t)
    inner = lib.autograd.graph.saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t)
    with outer:
        with inner:
            x.sin()
        x.cos()
        with lib.no_grad():
            x.exp()
        lib.ones(3).sin()
    assert seen == ["inner", "outer"]


def _inplace_after_hooked_save(lib):
    a = lib.tensor([0.3, 1.1, -0.7], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = a.sin()
    with lib.no_grad():
        a.add_(1.0)
    y.sum().backward()  # PyTorch checks no version for a tensor saved through hooks: the hooks own it
    return a.grad.numpy()


def test_version_is_not_checked_for_hooked_saves_as_in_torch():
    np.testing.assert_allclose(_inplace_after_hooked_save(ember), _inplace_after_hooked_save(torch), rtol=1e-6)


def test_version_is_still_checked_without_hooks():
    a = ember.tensor([0.3, 1.1], requires_grad=True)
    y = a.sin()
    with ember.no_grad():
        a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _error(lib, action):
    try:
        action(lib)
    except Exception as error:  # noqa: BLE001 - the type and message are what is compared
        return type(error).__name__, str(error)
    return None


def _unpack_returns_int(lib):
    b = lib.ones(3, requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda t: t):
        y = b.sin()
    y.sum().backward()


def _pack_modifies_input(lib):
    c = lib.ones(3, requires_grad=True).clone()
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.add_(1), lambda t: t):
        c.sin()


def _hooks_inside_disable(lib):
    with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass


def _disable_inside_hooks(lib):
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            pass


def _backward_twice(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = (x * x).sum()
    y.backward()
    y.backward()


@pytest.mark.parametrize("action", [_unpack_returns_int, _pack_modifies_input, _hooks_inside_disable,
                                    _disable_inside_hooks, _backward_twice])
def test_errors_as_torch(action):
    got, expected = _error(ember, action), _error(torch, action)
    assert expected is not None and got is not None
    assert got[0] == expected[0]
    if action in (_hooks_inside_disable, _disable_inside_hooks):
        assert got[1] == expected[1] == "no hooks here"
    elif action is _unpack_returns_int:
        assert got[1] == expected[1]
    elif action is _pack_modifies_input:
        assert got[1].startswith("A saved tensor pack hook is modifying its input in place")
    else:
        assert "backward through the graph a second time" in got[1]


def test_disable_restores_and_nests():
    graph = ember.autograd.graph
    with graph.disable_saved_tensors_hooks("outer"):
        with graph.disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="^inner$"):
                graph.saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
        with pytest.raises(RuntimeError, match="^outer$"):
            graph.saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass


def _function_saves(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = lib.tensor([1.0, -2.0], requires_grad=True)
    seen = []
    with lib.autograd.graph.saved_tensors_hooks(lambda t: seen.append(("pack", tuple(t.shape))) or t.detach(),
                                                lambda t: seen.append(("unpack", tuple(t.shape))) or t):
        y = Cube.apply(x)
    y.sum().backward()
    return seen, x.grad.numpy()


def test_custom_function_save_for_backward_goes_through_hooks():
    seen, grad = _function_saves(ember)
    t_seen, t_grad = _function_saves(torch)
    assert seen == t_seen
    np.testing.assert_allclose(grad, t_grad)


def _raw_saved_register_hooks(lib):
    x = lib.tensor([0.5, 1.5], requires_grad=True)
    y = x.exp()
    raw = y.grad_fn._raw_saved_result
    seen = []
    raw.register_hooks(lambda t: seen.append("pack") or t.detach().clone(), lambda t: seen.append("unpack") or t)
    again = _error(lib, lambda _: raw.register_hooks(lambda t: t, lambda t: t))
    y.sum().backward()
    return seen, x.grad.numpy(), again


def test_raw_saved_tensor_register_hooks():
    seen, grad, again = _raw_saved_register_hooks(ember)
    t_seen, t_grad, t_again = _raw_saved_register_hooks(torch)
    assert seen == t_seen == ["pack", "unpack"]
    np.testing.assert_allclose(grad, t_grad, rtol=1e-6)
    assert again == t_again


def test_save_on_cpu_offloads_device_tensors_and_brings_them_back():
    with ember.testing.standin_cuda():
        x = ember.tensor([0.5, -1.0, 2.0], device="cuda", requires_grad=True)
        w = ember.tensor([1.5, 0.25, -2.0], device="cuda", requires_grad=True)
        devices = []
        hooks = ember.autograd.graph.save_on_cpu(pin_memory=False)
        pack, unpack = hooks.pack_hook, hooks.unpack_hook

        def spy_pack(t):
            packed = pack(t)
            devices.append((t.device.type, packed[1].device.type))
            return packed

        def spy_unpack(packed):
            t = unpack(packed)
            devices.append(("unpacked", t.device.type))
            return t

        with ember.autograd.graph.saved_tensors_hooks(spy_pack, spy_unpack):
            loss = ((x * w).sin() * x).sum()
        loss.backward()
        expected_x = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
        expected_w = ember.tensor([1.5, 0.25, -2.0], requires_grad=True)
        ((expected_x * expected_w).sin() * expected_x).sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), expected_x.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(w.grad.cpu().numpy(), expected_w.grad.numpy(), rtol=1e-6)
    assert [d for d in devices if d[0] != "unpacked"] == [("cuda", "cpu")] * 5  # x, w; x*w; sin, x
    assert [d for d in devices if d[0] == "unpacked"] == [("unpacked", "cuda")] * 5


def _mutation_allowed(lib):
    graph = lib.autograd.graph
    results = []
    with graph.allow_mutation_on_saved_tensors():
        a = lib.tensor([[0.5, 1.0, -2.0], [1.5, 0.3, 0.9]], requires_grad=True)
        b = a.clone()
        out = (b ** 2).sum() + b.sin().sum()
        b.sin_()  # b was saved by pow and sin: they get the values from before
        b[0].mul_(3)  # through a view too
        c = b.exp()
        b.add_(1)
        (out + c.sum()).backward()
        results.append(np.round(a.grad.numpy(), 5).tolist())
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 1
        z = (y * y).sum()
        y[0:1].mul_(5)
        z.backward()
        results.append(x.grad.tolist())
        late = (a.clone() * 2).exp()
    results.append(_error(lib, lambda _: late.sum().backward()))
    return results


def test_allow_mutation_on_saved_tensors_as_torch():
    got, expected = _mutation_allowed(ember), _mutation_allowed(torch)
    assert got[:2] == expected[:2]
    assert got[2][0] == expected[2][0] == "AssertionError"
    assert got[2][1].startswith("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context")


def test_allow_mutation_contexts_do_not_nest():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with lib.autograd.graph.allow_mutation_on_saved_tensors():
                with lib.autograd.graph.allow_mutation_on_saved_tensors():
                    pass
