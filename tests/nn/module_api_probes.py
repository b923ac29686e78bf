"""Module API probes run in torch and in ember: each ``probe_*(L)`` builds the same thing with library ``L``
and returns a plain record (strings, numbers, lists) that must be equal in both
(``test_module_api_probes_vs_torch.py``). Errors are recorded as their class and message, so a probe that
raises compares the message text too (``ember.`` is read as ``torch.``).

Example::

    >>> import ember
    >>> probe_named_modules_duplicates(ember)[0]
    ['', '0', '1']
"""
from __future__ import annotations

import copy
import pickle

import numpy as np


def _rec(fn):
    """``fn()``'s value, or its error's class and message."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 - the record compares it
        return f"{type(error).__name__}: {error}".replace("ember.", "torch.")


def _arr(t):
    return None if t is None else np.asarray(t.detach().numpy()).round(6).tolist()


def probe_named_modules_duplicates(L):
    lin = L.nn.Linear(2, 2)
    m = L.nn.Sequential(lin, lin, L.nn.Sequential(lin))
    m2 = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 2, bias=False))
    m2[1].weight = m2[0].weight  # tied
    return [[n for n, _ in m.named_modules()], [n for n, _ in m.named_modules(remove_duplicate=False)],
            [n for n, _ in m.named_parameters(remove_duplicate=False)], [n for n, _ in m2.named_parameters()],
            list(m2.state_dict()), [n for n, _ in m.named_children()], [n for n, _ in m.named_modules(prefix="top")]]


def probe_get_set_submodule(L):
    m = L.nn.Sequential(L.nn.Sequential(L.nn.Linear(2, 3), L.nn.BatchNorm1d(3)))
    m.register_buffer("flag", L.zeros(1), persistent=False)
    out = [type(m.get_submodule("0.1")).__name__, list(m.get_parameter("0.0.bias").shape),
           list(m.get_buffer("0.1.running_mean").shape), list(m.get_buffer("flag").shape),
           _rec(lambda: m.get_submodule("0.5")), _rec(lambda: m.get_submodule("0.0.weight")),
           _rec(lambda: m.get_parameter("0.1.running_mean")), _rec(lambda: m.get_buffer("0.0.weight")),
           _rec(lambda: m.get_parameter("0.nothing")), _rec(lambda: m.get_buffer("0.1.nothing"))]
    m.set_submodule("0.0", L.nn.Identity())
    out.append(repr(m).replace("ember", "torch"))
    out.append(_rec(lambda: m.set_submodule("0.9.x", L.nn.ReLU())))
    out.append(_rec(lambda: m.set_submodule("0.1", L.nn.ReLU(), strict=True)))
    out.append(_rec(lambda: m.set_submodule("0.7", L.nn.ReLU(), strict=True)))
    m.register_module("extra", L.nn.Tanh())
    out.append([n for n, _ in m.named_children()])
    out.append(_rec(lambda: m.register_module("a.b", L.nn.Tanh())))
    out.append(_rec(lambda: m.register_module("", L.nn.Tanh())))
    out.append(_rec(lambda: m.register_buffer("flag2", 3)))
    out.append(_rec(lambda: m.register_parameter("p", L.ones(2))))
    return out


def probe_forward_hooks_kwargs_always_call(L):
    calls = []

    class M(L.nn.Module):
        def forward(self, x, scale=1.0, fail=False):
            if fail:
                raise ValueError("forward failed")
            return x * scale

    m = M()

    def pre(mod, args, kwargs):
        calls.append(("pre", sorted(kwargs)))
        return args, {**kwargs, "scale": 3.0}

    def post(mod, args, kwargs, out):
        calls.append(("post", sorted(kwargs), _arr(out)))
        return out + 1

    def always(mod, args, out):
        calls.append(("always", out is None))

    h1 = m.register_forward_pre_hook(pre, with_kwargs=True)
    m.register_forward_hook(post, with_kwargs=True)
    m.register_forward_hook(always, always_call=True)
    y = m(L.ones(2), scale=2.0)
    r = _rec(lambda: m(L.ones(2), fail=True))
    h1.remove()
    z = m(L.ones(2), scale=2.0)
    return [calls, _arr(y), r, _arr(z), len(m._forward_hooks), len(m._forward_pre_hooks),
            len(m._forward_hooks_with_kwargs), len(m._forward_hooks_always_called)]


def probe_global_hooks_order(L):
    calls = []
    m = L.nn.Linear(2, 2)
    handles = [L.nn.modules.module.register_module_forward_pre_hook(lambda mod, a: calls.append("global pre")),
               L.nn.modules.module.register_module_forward_hook(lambda mod, a, o: calls.append("global post"))]
    m.register_forward_pre_hook(lambda mod, a: calls.append("pre"))
    m.register_forward_hook(lambda mod, a, o: calls.append("post"))
    m.register_forward_hook(lambda mod, a, o: calls.append("post first"), prepend=True)
    try:
        m(L.ones(1, 2))
    finally:
        for h in handles:
            h.remove()
    m(L.ones(1, 2))
    return calls


def probe_full_backward_hooks(L):
    calls = []
    m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.Tanh())
    L.manual_seed(0)
    for p in m.parameters():
        L.nn.init.constant_(p, 0.3)
    m[0].register_full_backward_pre_hook(lambda mod, go: calls.append(("pre", _arr(go[0]))))
    m[0].register_full_backward_hook(lambda mod, gi, go: calls.append(("full", _arr(gi[0]), _arr(go[0]))))
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(("outer", _arr(gi[0]))))
    x = L.tensor([[1.0, -2.0, 0.5]], requires_grad=True)
    m(x).sum().backward()
    return [calls, _arr(x.grad)]


def probe_state_dict_hooks(L):
    calls = []
    m = L.nn.Sequential(L.nn.Linear(2, 2))
    m[0].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))
    m[0].register_state_dict_post_hook(lambda mod, sd, prefix, local: calls.append(("post", prefix, list(sd))))
    m.register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, local, strict, missing, unexpected, errors: calls.append(("load pre", prefix,
                                                                                          strict)))

    def load_post(mod, keys):
        calls.append(("load post", list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()

    m.register_load_state_dict_post_hook(load_post)
    sd = m.state_dict()
    sd["0.extra"] = L.zeros(1)
    result = m.load_state_dict(sd)
    return [calls, str(result), list(result._fields), type(result).__name__]


def probe_load_state_dict_results(L):
    m = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.BatchNorm1d(3))
    sd = m.state_dict()
    del sd["0.bias"]
    sd["1.extra"] = L.zeros(1)
    out = [str(m.load_state_dict(sd, strict=False)), _rec(lambda: m.load_state_dict(sd))]
    sd2 = m.state_dict()
    sd2["0.weight"] = L.zeros(4, 2)
    out.append(_rec(lambda: m.load_state_dict(sd2)))
    out.append(_rec(lambda: m.load_state_dict({"0.weight": [1, 2]}, strict=False)))
    out.append(_rec(lambda: m.load_state_dict([1, 2])))
    sd3 = {k: v.clone() for k, v in m.state_dict().items()}
    sd3["0.weight"] = L.ones(3, 2, dtype=L.float64)
    w = m[0].weight
    m.load_state_dict(sd3)
    out.append([m[0].weight is w, str(m[0].weight.dtype).split(".")[-1]])
    m.load_state_dict(sd3, assign=True)
    out.append([m[0].weight is w, str(m[0].weight.dtype).split(".")[-1], type(m[0].weight).__name__,
                m[0].weight.requires_grad, str(m[1].num_batches_tracked.dtype).split(".")[-1]])
    return out


def probe_dtype_moves(L):
    m = L.nn.Sequential(L.nn.Conv2d(2, 2, 1), L.nn.BatchNorm2d(2), L.nn.Embedding(3, 2))
    m.register_buffer("idx", L.arange(3))
    m.register_buffer("mask", L.ones(2, dtype=L.bool))
    out = []
    for conv in (lambda x: x.half(), lambda x: x.double(), lambda x: x.to(L.bfloat16), lambda x: x.float(),
                 lambda x: x.to(dtype=L.float64), lambda x: x.type(L.float16), lambda x: x.bfloat16()):
        conv(m)
        out.append([(k, str(v.dtype).split(".")[-1]) for k, v in m.state_dict().items()])
    out.append(_rec(lambda: m.to(L.int32)))
    return out


def probe_zero_grad_requires_grad_apply(L):
    m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 1))
    m(L.ones(1, 2)).sum().backward()
    m.zero_grad(set_to_none=False)
    out = [[_arr(p.grad) for p in m.parameters()]]
    m.zero_grad()
    out.append([p.grad is None for p in m.parameters()])
    out.append(type(m[0].requires_grad_(False)).__name__)
    out.append([p.requires_grad for p in m.parameters()])
    names = []
    out.append(type(m.apply(lambda mod: names.append(type(mod).__name__))).__name__)
    out.append(names)
    out.append([m.train(False).training, m[0].training, m.train().training, m.eval().training])
    out.append(_rec(lambda: m.train("yes")))
    return out


def probe_to_empty_and_meta(L):
    with L.device("meta"):
        m = L.nn.Linear(3, 2)
    out = [str(m.weight.device), list(m.weight.shape)]
    m.to_empty(device="cpu")
    out += [str(m.weight.device), list(m.weight.shape), type(m.weight).__name__, m.weight.requires_grad]
    return out


def probe_dir_and_attributes(L):
    m = L.nn.Linear(2, 2)
    m.register_buffer("buf", L.zeros(1))
    m.sub = L.nn.ReLU()
    d = dir(m)
    return [all(k in d for k in ("weight", "bias", "buf", "sub", "forward", "in_features")),
            _rec(lambda: m.nothing), _rec(lambda: delattr(m, "nothing")),
            _rec(lambda: setattr(m, "weight", L.ones(2, 2))), _rec(lambda: setattr(m, "sub", 3)),
            _rec(lambda: setattr(m, "buf", 3))]


def probe_old_pickle_setstate(L):
    m = L.nn.Linear(2, 2)
    state = dict(m.__dict__)
    for key in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                "_load_state_dict_post_hooks", "_non_persistent_buffers_set", "_backward_pre_hooks",
                "_is_full_backward_hook"):
        state.pop(key, None)
    fresh = L.nn.Linear.__new__(L.nn.Linear)
    fresh.__setstate__(state)
    return [_arr(fresh(L.ones(1, 2)) - m(L.ones(1, 2))), list(fresh.state_dict()),
            len(pickle.loads(pickle.dumps(m)).state_dict()), repr(copy.deepcopy(m))]


def probe_extra_state(L):
    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(1, 1)
            self.seen = None

        def get_extra_state(self):
            return {"step": 7}

        def set_extra_state(self, state):
            self.seen = state

    m = M()
    sd = m.state_dict()
    m2 = M()
    m2.load_state_dict(sd)
    del sd["_extra_state"]
    return [list(sd), m2.seen, _rec(lambda: M().load_state_dict(sd))]


def probe_share_memory_and_compile(L):
    m = L.nn.Linear(2, 2)
    out = [type(m.share_memory()).__name__, m.weight.is_shared()]
    return out  # (Module.compile: torch's takes seconds to import dynamo; ember's is tested on its own)


def probe_buffers_persistent(L):
    m = L.nn.Module()
    m.register_buffer("a", L.zeros(1))
    m.register_buffer("b", L.ones(1), persistent=False)
    m.register_buffer("c", None)
    m.register_parameter("p", None)
    return [list(m.state_dict()), [n for n, _ in m.named_buffers()], [n for n, _ in m.named_parameters()],
            sorted(m._non_persistent_buffers_set), repr(m)]


PROBES = {name[len("probe_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("probe_")}


def probe_state_dict_forms_and_traversal(L):
    class Block(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(2, 2)
            self.register_buffer("shared", L.zeros(1))
            self.alias = self.lin  # the same module twice

        def extra_repr(self):
            return "first line\nsecond line"

    b = Block()
    b.register_buffer("shared2", b.shared)  # the same buffer twice
    sd = b.state_dict(keep_vars=True)
    out = [list(b.state_dict(prefix="top.")), [type(v).__name__ for v in sd.values()],
           all(v.requires_grad for k, v in sd.items() if "weight" in k), list(b.state_dict(keep_vars=False)),
           [n for n, _ in b.named_buffers(remove_duplicate=False)], [n for n, _ in b.named_buffers()],
           [n for n, _ in b.named_parameters(recurse=False)], [n for n, _ in b.named_parameters(prefix="p")],
           [n for n, _ in b.named_modules(remove_duplicate=False)], repr(b).replace("ember", "torch"),
           type(b.cpu()).__name__, type(b.type(L.float64)).__name__, str(b.lin.weight.dtype).split(".")[-1]]
    plist = L.nn.ParameterList([L.nn.Parameter(L.ones(2)), L.nn.Parameter(L.ones(3))]).half()
    out.append([str(p.dtype).split(".")[-1] for p in plist])
    return out
