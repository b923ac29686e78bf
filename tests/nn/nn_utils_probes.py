"""torch.nn.utils probes run in torch and in ember (``test_nn_utils_probes_vs_torch.py``): each ``probe_*(L)``
returns a plain record (rounded values, names, shapes, error class and message) that must be equal in both.

Example::

    >>> import ember
    >>> probe_vector_conversions(ember)[0]
    [12]
"""
from __future__ import annotations

import warnings

import numpy as np

from module_api_probes import _arr, _rec


def _model(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Tanh(), L.nn.Linear(4, 2))


def _grads(L, m):
    x = L.tensor(np.linspace(-1, 1, 15).reshape(5, 3).astype(np.float32))
    m(x).pow(2).sum().backward()
    return m


def probe_clip_grad_norm(L):
    out = []
    for kwargs in ({"max_norm": 0.5}, {"max_norm": 0.5, "norm_type": float("inf")}, {"max_norm": 1e-3, "norm_type": 1},
                   {"max_norm": 0.5, "foreach": True}, {"max_norm": 100.0}, {"max_norm": 0.5, "norm_type": "inf"},
                   {"max_norm": 0.5, "norm_type": -float("inf")}, {"max_norm": 0.5, "norm_type": 0.5}):
        m = _grads(L, _model(L))
        total = L.nn.utils.clip_grad_norm_(m.parameters(), **kwargs)
        out.append([round(float(total), 5), str(total.dtype).split(".")[-1], _arr(m[0].weight.grad)])
    m = _grads(L, _model(L))
    m[0].weight.grad[0, 0] = float("nan")
    out.append(_rec(lambda: L.nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)))
    out.append(str(_arr(L.nn.utils.clip_grad_norm_(m.parameters(), 1.0))))
    out.append(str(_arr(m[2].bias.grad)))  # NaN spreads into every gradient, as torch's
    out.append(_arr(L.nn.utils.clip_grad_norm_([], 1.0)))
    out.append(_arr(L.nn.utils.clip_grad_norm_(L.nn.Linear(2, 2).parameters(), 1.0)))  # no grads
    m = _grads(L, _model(L))
    p = next(m.parameters())
    out.append(_arr(L.nn.utils.clip_grad_norm_(p, 0.1)))  # a single tensor
    return out


def probe_clip_grad_value_and_helpers(L):
    m = _grads(L, _model(L))
    out = [L.nn.utils.clip_grad_value_(m.parameters(), 0.05), _arr(m[2].weight.grad)]
    m = _grads(L, _model(L))
    norms = L.nn.utils.get_total_norm([p.grad for p in m.parameters()], 2.0)
    out.append(_arr(norms))
    L.nn.utils.clip_grads_with_norm_(m.parameters(), 0.3, norms)
    out.append(_arr(m[0].bias.grad))
    return out


def probe_vector_conversions(L):
    m = L.nn.Linear(3, 3)
    v = L.nn.utils.parameters_to_vector(m.parameters())
    L.nn.utils.vector_to_parameters(L.arange(12.0), m.parameters())
    return [list(v.shape), _arr(m.weight), _arr(m.bias),
            _rec(lambda: L.nn.utils.vector_to_parameters([1.0], m.parameters())),
            _rec(lambda: _arr(L.nn.utils.parameters_to_vector(L.ones(2))))]


def probe_weight_norm_old_and_new(L):
    out = []
    L.manual_seed(0)
    m = L.nn.utils.weight_norm(L.nn.Linear(3, 4))
    # (weight_g: torch's float32 norm may be 1 ulp from ember's; 5 places)
    out += [[n for n, _ in m.named_parameters()], list(m.state_dict()), np.round(_arr(m.weight_g), 5).tolist(),
            repr(m)]
    m = L.nn.utils.remove_weight_norm(m)
    out.append([n for n, _ in m.named_parameters()])
    L.manual_seed(0)
    m = L.nn.utils.weight_norm(L.nn.Conv1d(2, 3, 2), dim=None)
    out.append(list(m.weight_g.shape))
    L.manual_seed(0)
    m = L.nn.utils.parametrizations.weight_norm(L.nn.Linear(3, 4))
    out += [[n for n, _ in m.named_parameters()], list(m.state_dict()), repr(m),
            np.round(_arr(m.parametrizations.weight.original0), 5).tolist(), _arr(m.weight)]
    x = L.ones(2, 3)
    m(x).sum().backward()
    out.append(np.round(_arr(m.parametrizations.weight.original1.grad), 5).tolist())
    L.nn.utils.parametrize.remove_parametrizations(m, "weight")
    out.append([n for n, _ in m.named_parameters()])
    return out


def probe_spectral_norm_old_and_new(L):
    out = []
    L.manual_seed(0)
    m = L.nn.utils.spectral_norm(L.nn.Linear(4, 3))
    out += [[n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()], list(m.state_dict()),
            _arr(m.weight_u)]
    y = m(L.ones(1, 4))
    out.append(_arr(y))
    m.eval()
    out.append(_arr(m(L.ones(1, 4))))
    L.manual_seed(0)
    m = L.nn.utils.parametrizations.spectral_norm(L.nn.Linear(4, 3))
    out += [[n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()], list(m.state_dict()),
            np.round(_arr(m.parametrizations.weight[0]._u), 5).tolist(), repr(m)]  # (15 float32 mv: BLAS order)
    out.append(_arr(m(L.ones(1, 4))))
    return out


def probe_parametrize(L):
    class Sym(L.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()

    L.manual_seed(0)
    m = L.nn.Linear(3, 3)
    L.nn.utils.parametrize.register_parametrization(m, "weight", Sym())
    out = [[n for n, _ in m.named_parameters()], list(m.state_dict()), repr(m),
           L.nn.utils.parametrize.is_parametrized(m), L.nn.utils.parametrize.is_parametrized(m, "bias"),
           type(m).__name__, _arr(m.weight - m.weight.T)]
    with L.nn.utils.parametrize.cached():
        out.append(m.weight is m.weight)
    m.weight = L.eye(3) * 2
    out.append(_arr(m.parametrizations.weight.original))
    L.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    out += [type(m).__name__, [n for n, _ in m.named_parameters()]]
    out.append(_rec(lambda: L.nn.utils.parametrize.remove_parametrizations(m, "weight")))
    return out


def probe_prune(L):
    __import__(L.__name__ + ".nn.utils.prune")  # (torch does not import it with torch.nn.utils)
    out = []
    P = L.nn.utils.prune
    for method, kwargs in (("random_unstructured", {"amount": 0.3}), ("l1_unstructured", {"amount": 4}),
                           ("random_structured", {"amount": 0.5, "dim": 0}),
                           ("ln_structured", {"amount": 1, "n": 2, "dim": 1}), ("identity", {})):
        L.manual_seed(0)
        m = L.nn.Linear(4, 3)
        L.manual_seed(1)
        getattr(P, method)(m, "weight", **kwargs)
        out.append([method, [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()],
                    _arr(m.weight_mask), P.is_pruned(m), list(m._forward_pre_hooks.values())[0].__class__.__name__])
        P.remove(m, "weight")
        out.append([[n for n, _ in m.named_parameters()], P.is_pruned(m)])
    L.manual_seed(0)
    a, b = L.nn.Linear(4, 3), L.nn.Linear(3, 2)
    P.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=P.L1Unstructured, amount=0.5)
    out.append([_arr(a.weight_mask).count(0) if False else float(a.weight_mask.sum()), float(b.weight_mask.sum())])
    L.manual_seed(0)
    m = L.nn.Linear(4, 3)
    P.custom_from_mask(m, "bias", L.tensor([1.0, 0.0, 1.0]))
    P.l1_unstructured(m, "bias", amount=1)
    out.append([_arr(m.bias_mask), type(list(m._forward_pre_hooks.values())[0]).__name__])
    out.append(_rec(lambda: P.l1_unstructured(m, "weight", amount=20)))
    out.append(_rec(lambda: P.l1_unstructured(m, "weight", amount=-0.5)))
    out.append(_rec(lambda: P.remove(L.nn.Linear(2, 2), "weight")))
    return out


def probe_rnn_packing(L):
    R = L.nn.utils.rnn
    seqs = [L.tensor([1.0, 2.0, 3.0]), L.tensor([4.0]), L.tensor([5.0, 6.0])]
    out = []
    padded = R.pad_sequence(seqs)
    out += [_arr(padded), _arr(R.pad_sequence(seqs, batch_first=True, padding_value=-1.0)),
            _arr(R.pad_sequence(seqs, batch_first=True, padding_side="left"))]
    packed = R.pack_sequence(seqs, enforce_sorted=False)
    out += [_arr(packed.data), _arr(packed.batch_sizes), _arr(packed.sorted_indices), _arr(packed.unsorted_indices),
            str(packed.batch_sizes.dtype).split(".")[-1]]
    unpacked, lengths = R.pad_packed_sequence(packed, batch_first=True, total_length=4)
    out += [_arr(unpacked), _arr(lengths), str(lengths.dtype).split(".")[-1]]
    out.append(_rec(lambda: R.pack_sequence(seqs)))  # not sorted
    out.append(_rec(lambda: R.pad_sequence([])))
    out.append(_rec(lambda: R.pack_padded_sequence(padded, [3, 0, 2], enforce_sorted=False)))
    out.append(_rec(lambda: R.pad_packed_sequence(packed, total_length=2)))
    out.append([_arr(t) for t in R.unpad_sequence(R.pad_sequence(seqs, batch_first=True), L.tensor([3, 1, 2]),
                                                  batch_first=True)])
    out.append([_arr(t) for t in R.unpack_sequence(packed)])
    p2 = R.pack_padded_sequence(padded, L.tensor([3, 1, 2]), enforce_sorted=False)
    out.append([_arr(p2.data), type(p2).__name__, p2.is_cuda, _arr(p2.to(L.float64).data)])
    lstm = L.nn.LSTM(1, 2)
    o, (h, c) = lstm(R.pack_sequence([s.unsqueeze(-1) for s in seqs], enforce_sorted=False))
    out.append([type(o).__name__, list(o.data.shape), list(h.shape)])
    return out


def probe_fusion(L):
    L.manual_seed(0)
    conv, bn = L.nn.Conv2d(2, 3, 3), L.nn.BatchNorm2d(3)
    bn.running_mean.fill_(0.2)
    bn.running_var.fill_(1.5)
    conv.eval(), bn.eval()
    fused = L.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    x = L.ones(1, 2, 4, 4)
    lin, bn1 = L.nn.Linear(3, 3), L.nn.BatchNorm1d(3)
    lin.eval(), bn1.eval()
    fl = L.nn.utils.fusion.fuse_linear_bn_eval(lin, bn1)
    return [_arr(fused(x) - bn(conv(x))) and max(abs(v) for v in np.ravel(_arr(fused(x) - bn(conv(x))))) < 1e-5,
            [n for n, _ in fused.named_parameters()], fused.weight.requires_grad,
            max(abs(v) for v in np.ravel(_arr(fl(L.ones(2, 3)) - bn1(lin(L.ones(2, 3)))))) < 1e-5,
            _rec(lambda: L.nn.utils.fusion.fuse_conv_bn_eval(conv.train(), bn))]


def probe_functional_call(L):
    L.manual_seed(0)
    m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 2))
    m[1].weight = m[0].weight  # tied
    params = {"0.weight": L.eye(2), "0.bias": L.zeros(2), "1.bias": L.ones(2)}
    x = L.tensor([[1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = [_arr(L.func.functional_call(m, params, (x,))),
               _arr(L.func.functional_call(m, params, (x,), tie_weights=False)),
               _arr(L.nn.utils.stateless.functional_call(m, params, x)),
               _rec(lambda: L.func.functional_call(m, {**params, "1.weight": L.ones(2, 2)}, (x,))),
               _rec(lambda: L.func.functional_call(m, {"nothing": L.ones(1)}, (x,), strict=True)),
               _arr(m[0].weight.sum())]
    return out


def probe_skip_init_and_misc(L):
    m = L.nn.utils.skip_init(L.nn.Linear, 3, 4, bias=False)
    out = [type(m).__name__, list(m.weight.shape), m.bias is None]
    out.append(_rec(lambda: L.nn.utils.skip_init(int, 3)))
    m2 = L.nn.Conv2d(2, 2, 1)
    out.append(L.nn.utils.convert_conv2d_weight_memory_format(m2, L.channels_last).weight.is_contiguous(
        memory_format=L.channels_last))
    return out


def probe_init_draws(L):
    out = []
    I = L.nn.init
    for name, kwargs in (("uniform_", {"a": -2, "b": 3}), ("normal_", {"mean": 1, "std": 0.5}),
                         ("xavier_uniform_", {}), ("xavier_normal_", {"gain": 2.0}), ("kaiming_uniform_", {}),
                         ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
                         ("trunc_normal_", {"std": 0.5, "a": -0.3, "b": 0.7}), ("orthogonal_", {}),
                         ("sparse_", {"sparsity": 0.5}), ("eye_", {}), ("dirac_", {}), ("zeros_", {}),
                         ("constant_", {"val": 0.25}), ("kaiming_uniform_", {"a": 5 ** 0.5})):
        L.manual_seed(3)
        t = L.empty(3, 4, 1, 1) if name == "dirac_" else L.empty(4, 5)
        r = _rec(lambda: getattr(I, name)(t, **kwargs))
        out.append([name, r if isinstance(r, str) else np.round(_arr(t), 4 if name == "orthogonal_" else 6).tolist()])
    for name in ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"):
        L.manual_seed(3)  # (sparse_'s permutations come from the default generator, as torch's)
        t = L.empty(4, 6)
        args = (0.3,) if name == "sparse_" else ()
        getattr(I, name)(t, *args, generator=L.Generator().manual_seed(7))
        out.append([name, "generator", np.round(_arr(t), 4 if name == "orthogonal_" else 6).tolist()])
    out.append(_rec(lambda: list(I.kaiming_uniform_(L.empty(0, 3)).shape)))
    out.append(_rec(lambda: list(I.xavier_uniform_(L.empty(3)).shape)))
    out.append(_rec(lambda: I.calculate_gain("leaky_relu", 0.2)))
    out.append(_rec(lambda: I.calculate_gain("nope")))
    return out


PROBES = {name[len("probe_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("probe_")}
