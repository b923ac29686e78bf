"""``__torch_dispatch__``: TorchDispatchMode and dispatch subclasses, side by side with torch 2.13 (CPU).

What a mode sees is compared with what torch's sees: the same ATen overload names and argument shapes for the
common ops (forward and backward of a small MLP, elementwise ops, reductions, views, products), with the known
differences of ember's decompositions filtered out and listed here (docs/pytorch-compat.md has the mapping).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

import ember
import ember.nn as enn
import ember.nn.functional as EF
from ember import interpreters
from ember.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode
from ember.utils._pytree import tree_map as ember_tree_map
from torch.utils._pytree import tree_map as torch_tree_map


def _meta(lib: object, a: object) -> object:
    if isinstance(a, lib.Tensor):
        return ("T", tuple(a.shape))
    if isinstance(a, (list, tuple)):
        return [_meta(lib, x) for x in a]
    if isinstance(a, (int, float, bool)) or a is None:
        return a
    return "other"


def _logging_mode(lib: object, base: type) -> type:
    class Log(base):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append((str(func), [_meta(lib, a) for a in args]))
            return func(*args, **(kwargs or {}))

    return Log


TorchLog = _logging_mode(torch, TorchMode)
EmberLog = _logging_mode(ember, TorchDispatchMode)

# torch shows these where ember has no counterpart: autograd's leaf detaches and the views around its
# decompositions (AccumulateGrad, sum_to_size's view, expand of the seed): filtered from both sides.
_TORCH_ONLY = {"aten.detach.default", "aten.view.default", "aten.expand.default", "aten.t.default",
               "aten.ones_like.default"}


def _names(calls: list) -> list:
    return [name for name, _ in calls if name not in _TORCH_ONLY]


def _mlp(lib: object, nn: object) -> tuple:
    lib.manual_seed(0)
    w1 = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    w2 = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with lib.no_grad():
        m[0].weight.copy_(lib.tensor(w1))
        m[2].weight.copy_(lib.tensor(w2))
        m[0].bias.fill_(0.1)
        m[2].bias.fill_(-0.2)
    x = lib.tensor(np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32))
    y = lib.tensor([0, 1, 2, 0, 1])
    return m, x, y


def test_mlp_forward_backward_sequence_matches_torch() -> None:
    results = {}
    for lib, nn, F, Log in ((torch, torch.nn, TF, TorchLog), (ember, enn, EF, EmberLog)):
        m, x, y = _mlp(lib, nn)
        with Log() as log:
            loss = F.cross_entropy(m(x), y)
            loss.backward()
        results[lib.__name__] = (log.calls, float(loss), [p.grad.numpy().copy() for p in m.parameters()])
    t_calls, t_loss, t_grads = results["torch"]
    e_calls, e_loss, e_grads = results["ember"]
    # the forward is call for call torch's (names and argument shapes), detach aside
    t_forward = [c for c in t_calls[:t_calls.index(next(c for c in t_calls if c[0] == "aten.ones_like.default"))]
                 if c[0] != "aten.detach.default"]
    assert e_calls[:len(t_forward)] == t_forward
    assert _names(e_calls) == _names(t_calls)
    assert e_calls[len(t_forward)][0] == "aten.ones_like.default"  # the backward's seed, as torch
    assert abs(e_loss - t_loss) < 1e-6
    for e, t in zip(e_grads, t_grads):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


_OPS = [
    ("exp", lambda L, x, y: x.exp(), ["aten.exp.default"]),
    ("add", lambda L, x, y: x + y, ["aten.add.Tensor"]),
    ("mul scalar", lambda L, x, y: x * 2.0, ["aten.mul.Tensor"]),
    ("sum", lambda L, x, y: x.sum(), ["aten.sum.default"]),
    ("sum dim", lambda L, x, y: x.sum(1), ["aten.sum.dim_IntList"]),
    ("mean", lambda L, x, y: x.mean(), ["aten.mean.default"]),
    ("tanh sigmoid", lambda L, x, y: x.tanh().sigmoid(), ["aten.tanh.default", "aten.sigmoid.default"]),
    ("relu", lambda L, x, y: L.relu(x), ["aten.relu.default"]),
    ("reshape", lambda L, x, y: x.reshape(12), ["aten.view.default"]),
    ("permute", lambda L, x, y: x.reshape(2, 2, 3).permute(2, 0, 1), ["aten.view.default", "aten.permute.default"]),
    ("transpose", lambda L, x, y: x.t(), ["aten.t.default"]),
    ("select", lambda L, x, y: x[1], ["aten.select.int"]),
    ("slice", lambda L, x, y: x[:, 1:3], ["aten.slice.Tensor"]),
    ("mm", lambda L, x, y: x @ y.t(), ["aten.t.default", "aten.mm.default"]),
    ("bmm", lambda L, x, y: L.bmm(x.reshape(1, 3, 4), y.reshape(1, 4, 3)),
     ["aten.view.default", "aten.view.default", "aten.bmm.default"]),
    ("softmax", lambda L, x, y: x.softmax(1), ["aten._softmax.default"]),  # (ember normalises -1 to 1)
    ("log_softmax", lambda L, x, y: x.log_softmax(1), ["aten._log_softmax.default"]),
    ("where", lambda L, x, y: L.where(x > 0, x, y), ["aten.gt.Scalar", "aten.where.self"]),
    ("pow", lambda L, x, y: x.pow(2), ["aten.pow.Tensor_Scalar"]),
    ("maximum", lambda L, x, y: L.maximum(x, y), ["aten.maximum.default"]),
    ("gelu", lambda L, x, y: (L.nn.functional.gelu(x)), ["aten.gelu.default"]),
]


@pytest.mark.parametrize("name,fn,expected", _OPS, ids=[o[0] for o in _OPS])
def test_common_forward_ops_as_torch(name: str, fn, expected: list) -> None:
    data = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    seen = {}
    for lib, Log in ((torch, TorchLog), (ember, EmberLog)):
        x, y = lib.tensor(data[0]).reshape(3, 4), lib.tensor(data[1]).reshape(3, 4)
        with Log() as log:
            out = fn(lib, x, y)
        seen[lib.__name__] = ([c for c in log.calls], out.detach().numpy().copy())
    assert [c[0] for c in seen["torch"][0]] == expected  # the test's own expectation is torch's
    assert seen["ember"][0] == seen["torch"][0]
    np.testing.assert_allclose(seen["ember"][1], seen["torch"][1], rtol=1e-5, atol=1e-6)


def test_backward_of_elementwise_chain_sees_each_op() -> None:
    x = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with EmberLog() as log:
        (x.exp() * x).sum().backward()
    names = [n for n, _ in log.calls]
    assert names[:3] == ["aten.exp.default", "aten.mul.Tensor", "aten.sum.default"]
    assert names[3] == "aten.ones_like.default" and names[-1] == "aten.detach.default"
    assert names.count("aten.mul.Tensor") >= 3  # the product rule's terms run under the mode too
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, -1.0, 2.0]) * (1 + np.array([0.5, -1.0, 2.0])), 1e-6)


def test_func_objects_are_torch_overloads() -> None:
    seen = {}

    class Grab(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen["func"], seen["types"] = func, types
            return func(*args, **(kwargs or {}))

    with Grab():
        ember.ones(2) + ember.ones(2)
    func = seen["func"]
    aten = ember.ops.aten
    assert func is aten.add.Tensor and func.overloadpacket is aten.add and seen["types"] == ()
    assert {func: 1}[aten.add.Tensor] == 1
    assert (func._schema.name, func._schema.overload_name, func.name(), str(func), func.__name__) == \
        ("aten::add", "Tensor", "aten::add.Tensor", "aten.add.Tensor", "add.Tensor")
    t = torch.ops.aten.add.Tensor
    assert str(func._schema) == str(t._schema)
    assert [a.name for a in func._schema.arguments] == [a.name for a in t._schema.arguments]
    assert func.overloadpacket.__name__ == t.overloadpacket.__name__ == "add"


def test_nested_modes_and_current_mode() -> None:
    order = []

    class Tag(TorchDispatchMode):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            order.append((self.tag, str(func), _get_current_dispatch_mode()))
            return func(*args, **(kwargs or {}))

    torch_order = []

    class TorchTag(TorchMode):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            from torch.utils._python_dispatch import _get_current_dispatch_mode as current

            torch_order.append((self.tag, str(func), current()))
            return func(*args, **(kwargs or {}))

    with Tag("outer") as outer, Tag("inner") as inner:
        assert _get_current_dispatch_mode() is inner
        ember.ones(2).exp()
    with TorchTag("outer") as t_outer, TorchTag("inner"):
        torch.ones(2).exp()
    torch_order = [o for o in torch_order if o[1] != "aten.ones.default"]  # ember's factories are not ops
    assert [(t, f) for t, f, _ in order] == [(t, f) for t, f, _ in torch_order] == \
        [("inner", "aten.exp.default"), ("outer", "aten.exp.default")]
    assert order[0][2] is outer and order[1][2] is None
    assert torch_order[0][2] is t_outer and torch_order[1][2] is None
    assert _get_current_dispatch_mode() is None
    assert interpreters.current() is interpreters.EAGER


def test_mode_replacing_an_op_keeps_autograd_above() -> None:
    """A mode that computes sub for add: the value changes, the gradient is still add's (autograd is above)."""
    results = {}
    for lib, base in ((torch, TorchMode), (ember, TorchDispatchMode)):
        class Swap(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func is lib.ops.aten.add.Tensor:
                    return lib.ops.aten.sub.Tensor(*args)
                return func(*args, **(kwargs or {}))

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([5.0, 7.0], requires_grad=True)
        with Swap():
            out = a + b
        out.sum().backward()
        results[lib.__name__] = (out.detach().numpy().copy(), a.grad.numpy().copy(), b.grad.numpy().copy())
    for e, t in zip(results["ember"], results["torch"]):
        np.testing.assert_array_equal(e, t)


def test_user_flop_counter_mode_matches_torch_flop_counter() -> None:
    """A FlopCounterMode-style counter written against ATen names (mm/addmm/bmm) counts what torch's counts."""
    from torch.utils.flop_counter import FlopCounterMode

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            packet = func.overloadpacket
            if packet is ember.ops.aten.mm:
                self.flops += 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
            elif packet is ember.ops.aten.addmm:
                self.flops += 2 * args[1].shape[0] * args[1].shape[1] * args[2].shape[1]
            return out

    m, x, y = _mlp(torch, torch.nn)
    with FlopCounterMode(display=False) as counter:
        TF.cross_entropy(m(x), y).backward()
    m, x, y = _mlp(ember, enn)
    with Count() as count:
        EF.cross_entropy(m(x), y).backward()
    assert count.flops == counter.get_total_flops() > 0


def test_mode_is_per_thread() -> None:
    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    def other() -> None:
        ember.ones(2).exp()

    with Log():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        ember.ones(2).neg()
    assert seen == ["aten.neg.default"]


# ---- subclasses -------------------------------------------------------------------------------------------------
def _logging_tensor(lib: object, tree_map: object, log: list) -> type:
    class LoggingTensor(lib.Tensor):
        @staticmethod
        def __new__(cls, elem):
            r = lib.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(), dtype=elem.dtype,
                                                  device=elem.device, requires_grad=elem.requires_grad)
            r.elem = elem
            return r

        __torch_function__ = lib._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(e):
                return e.elem if isinstance(e, LoggingTensor) else e

            def wrap(e):
                return LoggingTensor(e) if isinstance(e, lib.Tensor) else e

            log.append((str(func), types == (LoggingTensor,)))
            return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))

    return LoggingTensor


def test_logging_tensor_forward_backward_as_torch() -> None:
    runs = {}
    for lib, tree_map in ((torch, torch_tree_map), (ember, ember_tree_map)):
        log: list = []
        LoggingTensor = _logging_tensor(lib, tree_map, log)
        x = LoggingTensor(lib.tensor([1.0, 2.0, 3.0], requires_grad=True))
        w = LoggingTensor(lib.tensor([0.5, -1.0, 2.0]))
        y = (x * w).sin().sum()
        assert type(y) is LoggingTensor and y.requires_grad and y.grad_fn is not None
        assert tuple(x.shape) == (3,) and x.stride() == (1,) and x.dtype == lib.float32
        y.backward()
        assert type(x.grad) is LoggingTensor
        runs[lib.__name__] = ([n for n, _ in log], all(ok for _, ok in log), float(y.elem),
                              x.grad.elem.numpy().copy())
    t_names, t_types, t_value, t_grad = runs["torch"]
    e_names, e_types, e_value, e_grad = runs["ember"]
    assert t_types and e_types
    # ember's sum backward reshapes before expanding (one view more than torch)
    assert [n for n in e_names if n != "aten.view.default"] == t_names
    assert abs(e_value - t_value) < 1e-6
    np.testing.assert_allclose(e_grad, t_grad, rtol=1e-6)


def _diag_tensor(lib: object) -> type:
    class DiagTensor(lib.Tensor):
        """The tutorial's lazy diagonal matrix: holds the diagonal, materialises it for any op."""

        @staticmethod
        def __new__(cls, diag):
            n = diag.shape[0]
            r = lib.Tensor._make_wrapper_subclass(cls, (n, n), dtype=diag.dtype, device=diag.device)
            r.diag = diag
            return r

        __torch_function__ = lib._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def dense(e):
                return lib.diag(e.diag) if isinstance(e, DiagTensor) else e

            return func(*[dense(a) for a in args], **(kwargs or {}))

    return DiagTensor


def test_diag_tensor_materialises_through_dispatch() -> None:
    outs = {}
    for lib in (torch, ember):
        D = _diag_tensor(lib)(lib.tensor([1.0, 2.0, 3.0]))
        m = lib.arange(9.0).reshape(3, 3)
        assert tuple(D.shape) == (3, 3) and D.stride() == (3, 1)
        outs[lib.__name__] = [(D @ m).numpy(), (m + D).numpy(), (D * 2).sum().numpy()]
    for e, t in zip(outs["ember"], outs["torch"]):
        np.testing.assert_allclose(e, t)


def test_no_cost_left_behind_after_modes_and_subclasses() -> None:
    """The eager fast path asks nothing while no mode is entered and no dispatch subclass lives."""
    import gc

    gc.collect()
    before, classes = interpreters.GRAPHS.count, interpreters.SUBCLASSES.count
    with EmberLog():
        assert interpreters.GRAPHS.count == before + 1
    assert interpreters.GRAPHS.count == before
    kind = _diag_tensor(ember)
    assert (interpreters.GRAPHS.count, interpreters.SUBCLASSES.count) == (before + 1, classes + 1)
    del kind
    gc.collect()
    assert (interpreters.GRAPHS.count, interpreters.SUBCLASSES.count) == (before, classes)


def test_wrapper_item_goes_through_dispatch_and_data_reads_refuse() -> None:
    values = {}
    for lib, tree_map in ((torch, torch_tree_map), (ember, ember_tree_map)):
        log: list = []
        LoggingTensor = _logging_tensor(lib, tree_map, log)
        w = LoggingTensor(lib.tensor([3.0, 4.0]))
        values[lib.__name__] = ((w * 2).sum().item(), float(w.sum()), bool(w.sum() > 1), log[-1][0])
    assert values["ember"] == values["torch"] == (14.0, 7.0, True, "aten._local_scalar_dense.default")
    w = _logging_tensor(ember, ember_tree_map, [])(ember.ones(2))
    with pytest.raises(RuntimeError, match="wrapper subclass"):
        w.tolist()
    assert "0." not in repr(w) and "size=(2,)" in repr(w)  # never the broadcast zeros as values


class _TorchFormulas(TorchDispatchMode):
    """torch's own FlopCounterMode formulas (torch.utils.flop_counter.flop_registry), fed with the calls an ember mode
    sees (ember tensors turned into torch meta tensors of the same shapes)."""

    def __init__(self) -> None:
        super().__init__()
        from torch.utils.flop_counter import flop_registry

        self.registry = flop_registry
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = getattr(torch.ops.aten, func.overloadpacket.__name__, None) if func.namespace == "aten" else None
        rule = self.registry.get(packet)
        if rule is not None:
            meta = lambda v: torch.empty(tuple(v.shape), device="meta") if isinstance(v, ember.Tensor) else v  # noqa: E731
            self.total += rule(*torch_tree_map(meta, list(args)), **torch_tree_map(meta, dict(kwargs or {})),
                               out_val=torch_tree_map(meta, out if not isinstance(out, list) else tuple(out)))
        return out


def _cnn(lib: object) -> tuple:
    rng = np.random.default_rng(4)
    x = lib.tensor(rng.standard_normal((2, 3, 10, 10)).astype(np.float32), requires_grad=True)
    w1 = lib.tensor(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((4, 6, 3, 3)).astype(np.float32), requires_grad=True)
    lin = lib.tensor(rng.standard_normal((5, 64)).astype(np.float32), requires_grad=True)
    F = TF if lib is torch else EF

    def run() -> object:
        h = F.relu(F.conv2d(x, w1, stride=1, padding=1))
        h = F.conv2d(h, w2, stride=2, padding=1)
        return F.linear(h.flatten(1)[:, :64], lin).pow(2).sum()

    return run, (x, w1, w2, lin)


def _attention(lib: object, causal: bool) -> tuple:
    rng = np.random.default_rng(5)
    q = lib.tensor(rng.standard_normal((2, 2, 5, 4)).astype(np.float32), requires_grad=True)
    k = lib.tensor(rng.standard_normal((2, 2, 6, 4)).astype(np.float32), requires_grad=True)
    F = TF if lib is torch else EF
    return (lambda: F.scaled_dot_product_attention(q, k, k * 0.5, is_causal=causal).pow(2).sum()), (q, k)


@pytest.mark.parametrize("model", ["mlp", "cnn"])  # (torch 2.13 counts no FLOPs for its CPU flash attention)
def test_torch_flop_formulas_over_ember_calls_match_torch_flop_counter(model: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    if model == "mlp":
        m, x, y = _mlp(torch, torch.nn)
        torch_run = lambda: TF.cross_entropy(m(x), y).backward()  # noqa: E731
        em, ex, ey = _mlp(ember, enn)
        ember_run = lambda: EF.cross_entropy(em(ex), ey).backward()  # noqa: E731
    else:
        run, _ = _cnn(torch)
        torch_run = lambda: run().backward()  # noqa: E731
        erun, _ = _cnn(ember)
        ember_run = lambda: erun().backward()  # noqa: E731
    with FlopCounterMode(display=False) as counter:
        torch_run()
    with _TorchFormulas() as formulas:
        ember_run()
    assert formulas.total == counter.get_total_flops() > 0


def test_conv_forward_backward_calls_as_torch() -> None:
    """convolution's arguments are torch's; torch's one convolution_backward per layer (mask [True, True, False]) is
    two calls in ember, one per gradient (masks [True, False, False] and [False, True, False])."""
    calls = {}
    for lib, Log in ((torch, TorchLog), (ember, EmberLog)):
        run, (x, w1, w2, lin) = _cnn(lib)
        with Log() as log:
            run().backward()
        calls[lib.__name__] = [c for c in log.calls if "convolution" in c[0]]
        calls[lib.__name__ + "grads"] = [t.grad.numpy().copy() for t in (x, w1, w2, lin)]
    t_calls, e_calls = calls["torch"], calls["ember"]
    assert [c for c in e_calls if c[0] == "aten.convolution.default"] == \
        [c for c in t_calls if c[0] == "aten.convolution.default"]
    t_back = [c[1] for c in t_calls if c[0] == "aten.convolution_backward.default"]
    e_back = [c[1] for c in e_calls if c[0] == "aten.convolution_backward.default"]
    assert [b[-1] for b in t_back] == [[True, True, False]] * 2
    assert [b[-1] for b in e_back] == [[True, False, False], [False, True, False]] * 2
    assert [b[:3] for b in e_back] == [b[:3] for b in t_back for _ in (0, 1)]  # grad, input, weight shapes
    assert [b[4:10] for b in e_back] == [b[4:10] for b in t_back for _ in (0, 1)]  # stride ... groups
    for e, t in zip(calls["embergrads"], calls["torchgrads"]):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-4)


def test_in_place_op_under_a_mode_is_op_then_copy() -> None:
    """``y.sub_(z)``: torch's mode sees ``sub_.Tensor``; ember's sees ``sub.Tensor`` and the write as ``copy_``
    (torch's functionalized form); the tensor holds the same values after both."""
    with EmberLog() as log:
        y = ember.tensor([1.0, 2.0])
        y.sub_(ember.tensor([0.5, 0.5]))
        y.mul_(3.0)
    assert [n for n, _ in log.calls] == ["aten.sub.Tensor", "aten.copy_.default", "aten.mul.Tensor",
                                         "aten.copy_.default"]
    with TorchLog() as t_log:
        t = torch.tensor([1.0, 2.0])
        t.sub_(torch.tensor([0.5, 0.5]))
        t.mul_(3.0)
    assert [n for n, _ in t_log.calls if "_." in n] == ["aten.sub_.Tensor", "aten.mul_.Tensor"]
    np.testing.assert_array_equal(y.numpy(), t.numpy())



@pytest.mark.parametrize("causal", [False, True])
def test_attention_calls_as_torch(causal: bool) -> None:
    """scaled_dot_product_attention is torch's CPU flash kernel and its backward, with torch's arguments and shapes
    (the logsumexp included); the gradients agree."""
    seen = {}
    for lib, Log in ((torch, TorchLog), (ember, EmberLog)):
        run, (q, k) = _attention(lib, causal)
        with Log() as log:
            run().backward()
        seen[lib.__name__] = ([c for c in log.calls if "scaled_dot_product" in c[0]], q.grad.numpy().copy(),
                              k.grad.numpy().copy())
    assert seen["ember"][0] == seen["torch"][0]
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in [c[0] for c in seen["ember"][0]]
    for e, t in zip(seen["ember"][1:], seen["torch"][1:]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-5)


def test_layer_norm_calls_as_torch() -> None:
    """layer_norm is torch's native_layer_norm and native_layer_norm_backward (mean/rstd shaped (..., 1) in both);
    ember's backward record does not hold the bias, so it passes None where torch passes the bias (for its mask)."""
    seen = {}
    rng = np.random.default_rng(6)
    data = [rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 4), (4,), (4,))]
    for lib, F, Log in ((torch, TF, TorchLog), (ember, EF, EmberLog)):
        x, w, b = (lib.tensor(d, requires_grad=True) for d in data)
        with Log() as log:
            y = F.layer_norm(x, (4,), w, b)
            (y * y).sum().backward()
        seen[lib.__name__] = ([c for c in log.calls if "layer_norm" in c[0]], [t.grad.numpy().copy() for t in (x, w, b)])
    (e_fwd, e_bwd), (t_fwd, t_bwd) = seen["ember"][0], seen["torch"][0]
    assert e_fwd == t_fwd and e_bwd[0] == t_bwd[0] == "aten.native_layer_norm_backward.default"
    assert e_bwd[1][:6] == t_bwd[1][:6] and e_bwd[1][6] is None and e_bwd[1][7] == t_bwd[1][7] == [True] * 3
    for e, t in zip(seen["ember"][1], seen["torch"][1]):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5)


def test_logging_tensor_through_linear_relu_cross_entropy() -> None:
    """Wrapper parameters through linear, relu and cross entropy: the same loss, gradients (relu's backward reads its
    saved output, which must come back as the wrapper, not its broadcast-zero array) and compute calls as torch."""
    runs = {}
    rng = np.random.default_rng(7)
    w, b, x = (rng.standard_normal(s).astype(np.float32) for s in ((8, 4), (8,), (5, 4)))
    for lib, F, tree_map in ((torch, TF, torch_tree_map), (ember, EF, ember_tree_map)):
        log: list = []
        LoggingTensor = _logging_tensor(lib, tree_map, log)
        w1 = LoggingTensor(lib.tensor(w, requires_grad=True))
        b1 = LoggingTensor(lib.tensor(b, requires_grad=True))
        loss = F.cross_entropy(F.relu(F.linear(LoggingTensor(lib.tensor(x)), w1, b1)), lib.tensor([0, 1, 2, 3, 4]))
        loss.backward()
        runs[lib.__name__] = ([n for n, _ in log if n not in _TORCH_ONLY], float(loss.elem), w1.grad.elem.numpy().copy(),
                              b1.grad.elem.numpy().copy())
    assert runs["ember"][0] == runs["torch"][0]
    assert abs(runs["ember"][1] - runs["torch"][1]) < 1e-5
    for e, t in zip(runs["ember"][2:], runs["torch"][2:]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


def test_direct_aten_calls_under_a_mode_keep_their_name_and_autograd() -> None:
    runs = {}
    for lib, Log in ((torch, TorchLog), (ember, EmberLog)):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = lib.tensor([[0.5, -1.0], [2.0, 1.0]], requires_grad=True)
        with Log() as log:
            out = lib.ops.aten.mm.default(lib.ops.aten.mul.Tensor(a, b), b).exp()
        out.sum().backward()
        runs[lib.__name__] = ([n for n, _ in log.calls if n != "aten.detach.default"], a.grad.numpy().copy(),
                              b.grad.numpy().copy())
    assert runs["ember"][0] == runs["torch"][0] == ["aten.mul.Tensor", "aten.mm.default", "aten.exp.default"]
    for e, t in zip(runs["ember"][1:], runs["torch"][1:]):
        np.testing.assert_allclose(e, t, rtol=1e-5)
