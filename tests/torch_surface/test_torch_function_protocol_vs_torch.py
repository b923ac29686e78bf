"""The ``__torch_function__`` protocol side by side with torch 2.13: Tensor subclasses (the default implementation
keeps results in the subclass), a logging subclass (which ``func`` and ``types`` each call reports), PyTorch's
"ScalarTensor" example of a non-Tensor type, ``TorchFunctionMode`` nesting, ``DisableTorchFunction(Subclass)``,
``_make_subclass``/``as_subclass`` and the ``torch.overrides`` helpers. Each scenario is one function run with
``L = torch`` and ``L = ember``; the outcomes must be equal."""
from __future__ import annotations

import functools
import gc

import pytest

import ember
from ember import _torch_function

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _switch_returns_to_off():
    """Subclasses made by a test die with it, so the rest of the suite runs the plain fast path again."""
    yield
    gc.collect()
    assert not _torch_function.SWITCH.on, "a Tensor subclass or a mode outlived its test"


def _logging_calls(L):
    """Which func and types each call reports to a logging subclass, and the result's type."""
    out = {}

    class Log(L.Tensor):
        calls = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls.append((func.__name__, tuple(t.__name__ for t in types)))
            return super().__torch_function__(func, types, args, kwargs)

    a, b = L.ones(2, 3).as_subclass(Log), L.ones(2, 3)
    cases = {
        "a+b": lambda: a + b, "b+a": lambda: b + a, "2*a": lambda: 2 * a, "a-b": lambda: a - b, "b-a": lambda: b - a,
        "a@b.T": lambda: a @ b.T, "a.T": lambda: a.T, "add": lambda: L.add(a, b), "add(b,a)": lambda: L.add(b, a),
        "cat": lambda: L.cat([b, a]), "stack": lambda: L.stack((a, b)), "relu": lambda: L.nn.functional.relu(a),
        "linear": lambda: L.nn.functional.linear(a, L.ones(4, 3)), "max": lambda: a.max(1),
        "max.values": lambda: a.max(1).values, "sum": lambda: a.sum(), "item": lambda: a.sum().item(),
        "shape": lambda: a.shape, "dtype": lambda: a.dtype, "getitem": lambda: a[0], "len": lambda: len(a),
        "repr": lambda: repr(a), "clone": lambda: a.clone(), "detach": lambda: a.detach(), "view": lambda: a.view(6),
        "split": lambda: a.split(1), "unbind": lambda: a.unbind(0), "ones_like": lambda: L.ones_like(a),
        "zeros": lambda: L.zeros(2), "tensor": lambda: L.tensor([1.0]), "is_tensor": lambda: L.is_tensor(a),
        "numel": lambda: L.numel(a), "mean": lambda: L.mean(a), "iadd": lambda: a.__iadd__(1),
        "add_": lambda: a.add_(1), "setitem": lambda: a.__setitem__(0, 2.0), "Linear": lambda: L.nn.Linear(3, 4)(a),
        "float": lambda: float(a[0, 0]), "bool": lambda: bool(a[0, 0]), "eq": lambda: a == b, "neg": lambda: -a,
        "abs": lambda: abs(a), "pow": lambda: a ** 2, "div": lambda: a / 2, "rdiv": lambda: 2 / a, "mod": lambda: a % 2,
        "softmax": lambda: a.softmax(-1), "F.softmax": lambda: L.nn.functional.softmax(a, -1),
        "mse_loss": lambda: L.nn.functional.mse_loss(a, b), "to": lambda: a.to(L.float64), "double": lambda: a.double(),
        "where": lambda: L.where(b > 0, a, b), "einsum": lambda: L.einsum("ij,ij->i", a, b),
    }
    for name, call in cases.items():
        Log.calls.clear()
        result = call()
        out[name] = (type(result).__name__, list(Log.calls))
    return out


_LOGGED: dict = {}  # library -> its outcomes (names and type names only: no subclass is kept alive)


def _logged(L):
    if L not in _LOGGED:
        _LOGGED[L] = _logging_calls(L)
    return _LOGGED[L]


@pytest.mark.parametrize("name", list(_logged(torch)))
def test_logging_subclass_sees_what_torch_reports(name):
    assert _logged(ember)[name] == _logged(torch)[name]


def _subclass_preservation(L):
    class Plain(L.Tensor):
        pass

    class Disabled(L.Tensor):
        __torch_function__ = L._C._disabled_torch_function_impl

    p, d, par = L.ones(2).as_subclass(Plain), L.ones(2).as_subclass(Disabled), L.nn.Parameter(L.ones(2))
    names = lambda *xs: [type(x).__name__ for x in xs]  # noqa: E731
    return {
        "plain": names(p + 1, p.sum(), L.cat([p, p]), p.max(0).values, L.nn.functional.relu(p), p.unbind(0)[0]),
        "disabled": names(d + 1, L.cat([d, d]), d.sum()),
        "parameter": names(par + 1, L.cat([par, par]), par.sum(), par.detach()),
        "as_subclass": (type(L.ones(2).as_subclass(Plain)).__name__, L.ones(2).as_subclass(Plain).tolist()),
    }


def test_default_torch_function_keeps_results_in_the_subclass():
    assert _subclass_preservation(ember) == _subclass_preservation(torch)


def _autograd_through_subclass(L):
    class Sub(L.Tensor):
        pass

    x = L.tensor([1.0, 2.0], requires_grad=True)
    s = x.as_subclass(Sub)
    y = (s * s).sum()
    y.backward()
    m = L.Tensor._make_subclass(Sub, L.ones(2), True)
    (m * 3).sum().backward()
    return [type(s).__name__, s.requires_grad, s.is_leaf, type(y).__name__, x.grad.tolist(),
            type(m).__name__, m.requires_grad, m.is_leaf, m.grad.tolist()]


def test_autograd_through_as_subclass_and_make_subclass():
    assert _autograd_through_subclass(ember) == _autograd_through_subclass(torch)


def _make_subclass_in_new(L):
    """PyTorch's documented pattern: a subclass whose ``__new__`` wraps existing data."""
    class MyParam(L.Tensor):
        def __new__(cls, data):
            return L.Tensor._make_subclass(cls, data, True)

    data = L.tensor([1.0, 2.0], dtype=L.float64)
    p = MyParam(data)
    p.data[0] = 5.0  # shares memory with data
    return [type(p).__name__, p.dtype == L.float64, p.tolist(), data.tolist(), p.requires_grad]


def test_make_subclass_from_new_shares_memory():
    assert _make_subclass_in_new(ember) == _make_subclass_in_new(torch)


def _scalar_tensor(L):
    """PyTorch's "Extending torch with a Tensor-like type" example, unchanged but for ``L``."""
    handled = {}

    def implements(torch_function):
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            handled[torch_function] = func
            return func
        return decorator

    class ScalarTensor:
        def __init__(self, N, value):
            self._N, self._value = N, value

        def __repr__(self):
            return f"ScalarTensor(N={self._N}, value={self._value})"

        def tensor(self):
            return self._value * L.eye(self._N)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if func not in handled or not all(issubclass(t, (L.Tensor, ScalarTensor)) for t in types):
                return NotImplemented
            return handled[func](*args, **kwargs)

    @implements(L.mean)
    def mean(input):
        return float(input._value) / input._N

    def ensure_tensor(data):
        return data.tensor() if isinstance(data, ScalarTensor) else L.as_tensor(data)

    @implements(L.add)
    def add(input, other):
        try:
            if input._N == other._N:
                return ScalarTensor(input._N, input._value + other._value)
            raise ValueError("Shape mismatch!")
        except AttributeError:
            return L.add(ensure_tensor(input), ensure_tensor(other))

    d = ScalarTensor(5, 2)
    out = [repr(d), d.tensor().tolist(), L.mean(d), repr(L.add(d, d)), L.add(d, L.ones(5, 5)).tolist(),
           L.add(L.ones(5, 5), d).tolist(), L.overrides.is_tensor_like(d), L.overrides.has_torch_function((d,))]
    for bad in (lambda: L.mul(d, 3), lambda: L.nn.functional.relu(d)):
        with pytest.raises(TypeError) as info:
            bad()
        out.append(str(info.value).replace("ember.", "torch.").replace("ember", "torch"))
    return out


def test_scalar_tensor_example_of_pytorch_docs():
    assert _scalar_tensor(ember) == _scalar_tensor(torch)


def _modes(L):
    log = []

    class FunctionLog(L.overrides.TorchFunctionMode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append((self.tag, func.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    x = L.ones(2, 3)
    with FunctionLog("outer"):
        y = x + 1
        L.nn.functional.relu(y)
        L.zeros(2)  # factories reach modes (not subclasses)
        with FunctionLog("inner"):
            z = y.sum()
            w = L.cat([x, y])
            shape = x.shape
            current = L.overrides._get_current_function_mode().tag
            depth = len(L.overrides._get_current_function_mode_stack())
        y.mean()
        with L._C.DisableTorchFunction():
            x * 2
        with L._C.DisableTorchFunctionSubclass():
            x * 3
    before = len(log)
    x + 1  # no mode any more
    return [log, current, depth, before == len(log), type(z).__name__, list(w.shape), list(shape),
            L.overrides._get_current_function_mode()]


def test_modes_nest_and_see_every_call_as_in_torch():
    assert _modes(ember) == _modes(torch)


def _mode_and_subclass(L):
    log = []

    class Sub(L.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(("sub", func.__name__))
            return super().__torch_function__(func, types, args, kwargs)

    class Mode(L.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(("mode", func.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    class Refuses(L.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return NotImplemented

    s = L.ones(2).as_subclass(Sub)
    with Mode():
        r = s * 2
    with Refuses():
        with pytest.raises(TypeError, match="Multiple dispatch failed|no implementation found"):
            L.add(L.ones(1), 1)
    with L._C.DisableTorchFunctionSubclass():
        plain = s + 1
    with L._C.DisableTorchFunction():
        plain2 = s + 1
    return [log, type(r).__name__, type(plain).__name__, type(plain2).__name__]


def test_a_mode_runs_before_the_subclass():
    assert _mode_and_subclass(ember) == _mode_and_subclass(torch)


def _overrides_api(L):
    class Sub(L.Tensor):
        pass

    class NoTF:
        pass

    class TF:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    t, s, p = L.ones(1), L.ones(1).as_subclass(Sub), L.nn.Parameter(L.ones(1))
    o = L.overrides
    out = [o.has_torch_function((t,)), o.has_torch_function((s,)), o.has_torch_function((p,)),
           o.has_torch_function((TF(),)), o.has_torch_function((1, None)), o.is_tensor_like(t), o.is_tensor_like(s),
           o.is_tensor_like(TF()), o.is_tensor_like(NoTF()), o.is_tensor_like(TF), o.has_torch_function_unary(s),
           o.has_torch_function_variadic(t, s)]
    with L._C.DisableTorchFunctionSubclass():
        out += [o.has_torch_function((s,)), L._C._is_torch_function_enabled()]
    out.append(L._C._is_torch_function_enabled())

    def func(a):
        if o.has_torch_function_unary(a):
            return o.handle_torch_function(func, (a,), a)
        return a + 0

    out += [type(func(s)).__name__, type(func(t)).__name__,
            o.is_tensor_method_or_property(L.Tensor.add), o.is_tensor_method_or_property(L.add),
            L.add in o.get_overridable_functions()[L], L.zeros in o.get_ignored_functions(),
            L.Tensor.add in o.get_overridable_functions()[L.Tensor],
            L.nn.functional.relu in o.get_overridable_functions()[L.nn.functional],
            L.Tensor.as_subclass in o.get_ignored_functions()]
    return out


def test_overrides_helpers_as_torch():
    assert _overrides_api(ember) == _overrides_api(torch)


def _names(functions):
    return {getattr(f, "__name__", None) for f in functions}


def test_overridable_and_ignored_functions_agree_with_torch():
    """Every function torch lets __torch_function__ override, ember does too (where ember has it), and none that
    torch ignores."""
    ours_overridable = ember.overrides.get_overridable_functions()
    ours_ignored = ember.overrides.get_ignored_functions()
    spaces = {torch: ember, torch.nn.functional: ember.nn.functional}
    theirs = torch.overrides.get_overridable_functions()
    for their_space, our_space in spaces.items():
        for fn in theirs[their_space]:
            name = fn.__name__
            if name.startswith("_") or not hasattr(our_space, name) or getattr(their_space, name, None) is not fn \
                    or isinstance(getattr(our_space, name), type):  # classes (autocast) are not functions here
                continue
            assert getattr(our_space, name) in ours_overridable[our_space], f"{their_space.__name__}.{name}"
    for fn in torch.overrides.get_ignored_functions():
        name = getattr(fn, "__name__", None)
        if name and getattr(torch, name, None) is fn and callable(getattr(ember, name, None)) \
                and not isinstance(getattr(ember, name), type):
            assert getattr(ember, name) in ours_ignored, name


def test_internal_tensor_classes_never_dispatch():
    """ember's own Tensor subclasses (parameters, graph tensors, sparse tensors) count as plain tensors."""
    from ember.graph.builder import SymbolicTensor
    from ember.sparse.coo import SparseTensor
    for cls in (ember.nn.Parameter, ember.nn.Buffer, SymbolicTensor, SparseTensor):
        assert not _torch_function._is_overloaded_type(cls), cls
    assert not _torch_function.SWITCH.on


def test_plain_programs_keep_plain_methods():
    """Without a subclass or a mode, Tensor's methods are the original functions (no wrapper on the fast path),
    and a mode's exit restores them."""
    original = ember.Tensor.__dict__["__add__"]

    class Mode(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        assert ember.Tensor.__dict__["__add__"] is not original
        assert (ember.ones(2) + 1).tolist() == [2.0, 2.0]
    assert ember.Tensor.__dict__["__add__"] is original
    assert "sum" not in ember.Tensor.__dict__ or ember.Tensor.__dict__["sum"] is _torch_function._ORIGINAL["sum"]
