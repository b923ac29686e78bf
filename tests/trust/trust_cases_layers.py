"""Seeded case generators for nn layers (modules with their constructor options) and spatial ops (the trust fuzzer's
third wave).

- ``layers``: Conv1d-3d and ConvTranspose1d-3d (groups, stride, padding ints/'same'/'valid', dilation,
  output_padding, padding_mode, bias, unbatched input), RNN/LSTM/GRU (layers, bidirectional, batch_first,
  bias, proj_size, relu, initial states, unbatched input), BatchNorm/InstanceNorm (train steps then eval, running
  statistics and num_batches_tracked compared, momentum None), LayerNorm/GroupNorm/LocalResponseNorm, Embedding/
  EmbeddingBag modules, Linear/Bilinear, MultiheadAttention (batch_first, kdim/vdim, key_padding_mask, attn_mask,
  need_weights, average_attn_weights, add_zero_attn, bias_k/v). Each module's parameters are set from a formula
  (sin of their position) on both sides, a backward runs with a fixed upstream inside the snippet, and the output,
  the parameter names (PyTorch's order), every parameter's gradient and the input's gradient are compared.
- ``spatial``: grid_sample (modes, padding modes, align_corners, 4-d and 5-d), affine_grid, unfold/fold (modules and
  functions), pixel_shuffle/unshuffle, channel_shuffle, functional conv/conv_transpose with weights as inputs,
  Upsample modules; gradients in float64.

Example:
    >>> case = layers_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import GENERATORS, pick
from trust_diff import Case

F = "L.nn.functional"
# Parameters from a formula, a fixed upstream gradient, then everything a training step can observe.
SET_PARAMS = ("with L.no_grad():\n"
              "    for i, p in enumerate(m.parameters()):\n"
              "        p.copy_((L.sin(L.arange(p.numel(), dtype=L.float64) * 0.37 + i) * 0.5).reshape(p.shape))\n")
BACKWARD = ("def upstream(t):\n"
            "    return L.cos(L.arange(t.numel(), dtype=L.float64) * 0.7).reshape(t.shape).to(t.dtype)\n"
            "ys = [t for t in (y if isinstance(y, (tuple, list)) else (y,)) if isinstance(t, L.Tensor) and t.requires_grad]\n"
            "sum((t * upstream(t)).sum() for t in ys).backward() if ys else None\n")
REPORT = "out = (y, [n for n, _ in m.named_parameters()], [p.grad for p in m.parameters()], x_g.grad)"


def _x(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return np.round(rng.standard_normal(shape), 2)


def _module_case(ctor: str, forward: str, inputs: dict, train: bool = True) -> Case:
    mode = "" if train else "m.eval()\n"
    return Case(f"m = {ctor}.double()\n{mode}{SET_PARAMS}y = {forward}\n{BACKWARD}{REPORT}", inputs, floor=1e-2, zero_sign=False,
                rtol=1e-9)  # float64 modules: summation orders differ (layer_norm of two values cancels)


def _conv(rng: np.random.Generator) -> Case:
    nd = int(rng.integers(1, 4))
    transposed = rng.random() < 0.35
    groups = pick(rng, [1, 1, 2])
    cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    stride = [int(rng.integers(1, 3)) for _ in range(nd)]
    dil = [int(rng.integers(1, 3)) for _ in range(nd)]
    size = [int(rng.integers(1, 6 if nd < 3 else 4)) for _ in range(nd)]
    opts = [f"stride={tuple(stride) if rng.random() < 0.5 else stride[0]}", f"dilation={tuple(dil)}",
            f"groups={groups}", f"bias={bool(rng.random() < 0.7)}"]
    if transposed:
        opad = [int(rng.integers(0, max(s, d))) for s, d in zip(stride, dil)]
        opts += [f"padding={int(rng.integers(0, 2))}", f"output_padding={tuple(opad)}"]
        name = f"ConvTranspose{nd}d"
    else:
        padding = pick(rng, ["0", "1", "'same'", "'valid'", repr(tuple(int(rng.integers(0, 3)) for _ in range(nd)))])
        opts += [f"padding={padding}", f"padding_mode={pick(rng, ['zeros', 'zeros', 'reflect', 'replicate', 'circular'])!r}"]
        name = f"Conv{nd}d"
    batch = () if rng.random() < 0.2 else (int(rng.integers(1, 3)),)
    ktext = repr(tuple(k)) if rng.random() < 0.6 else str(k[0])
    inputs = {"x_g": (_x(rng, batch + (cin,) + tuple(size)), "float64")}
    return _module_case(f"L.nn.{name}({cin}, {cout}, {ktext}, {', '.join(opts)})", "m(x_g)", inputs)


def _rnn(rng: np.random.Generator) -> Case:
    kind = pick(rng, ["RNN", "LSTM", "GRU"])
    isz, hid, layers = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
    bidir, first, bias = bool(rng.random() < 0.4), bool(rng.random() < 0.5), bool(rng.random() < 0.8)
    opts = [f"num_layers={layers}", f"bidirectional={bidir}", f"batch_first={first}", f"bias={bias}"]
    proj = 0
    if kind == "LSTM" and hid > 1 and rng.random() < 0.3:
        proj = int(rng.integers(1, hid))
        opts.append(f"proj_size={proj}")
    if kind == "RNN" and rng.random() < 0.4:
        opts.append("nonlinearity='relu'")
    seq, batch = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    unbatched = rng.random() < 0.2
    shape = (seq, isz) if unbatched else ((batch, seq, isz) if first else (seq, batch, isz))
    inputs: dict = {"x_g": (_x(rng, shape), "float64")}
    forward = "m(x_g)"
    if rng.random() < 0.5:
        dirs = 2 if bidir else 1
        hshape = (layers * dirs,) + (() if unbatched else (batch,))
        inputs["h0"] = (_x(rng, hshape + (proj or hid,)), "float64")
        if kind == "LSTM":
            inputs["c0"] = (_x(rng, hshape + (hid,)), "float64")
            forward = "m(x_g, (h0, c0))"
        else:
            forward = "m(x_g, h0)"
    return _module_case(f"L.nn.{kind}({isz}, {hid}, {', '.join(opts)})", forward, inputs)


def _norm(rng: np.random.Generator) -> Case:
    kind = pick(rng, ["BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d", "LayerNorm", "GroupNorm",
                      "LocalResponseNorm"])
    c = int(rng.integers(1, 4))
    if kind.startswith(("BatchNorm", "InstanceNorm")):
        two = kind.endswith("2d")
        n = int(rng.integers(1, 4)) if kind.startswith("Batch") else int(rng.integers(1, 3))
        spatial = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) if two else \
            ((int(rng.integers(2, 5)),) if kind.startswith("Instance") or rng.random() < 0.5 else ())
        if kind.startswith("Batch") and not spatial and n == 1:
            n = 2
        affine = bool(rng.random() < (0.7 if kind.startswith("Batch") else 0.4))
        track = bool(rng.random() < (0.8 if kind.startswith("Batch") else 0.4))
        momentum = pick(rng, [0.1, 0.5, None])
        ctor = f"L.nn.{kind}({c}, eps={pick(rng, [1e-5, 0.1])}, momentum={momentum}, affine={affine}, " \
               f"track_running_stats={track})"
        steps = int(rng.integers(1, 3))
        inputs = {"x_g": (_x(rng, (n, c) + spatial) * 3 + 1, "float64")}
        evals = "m.eval()\ny = (y, m(x_g * 0.5))\n" if rng.random() < 0.6 else ""
        code = (f"m = {ctor}.double()\n{SET_PARAMS}" + "y = m(x_g)\n" * steps + evals + BACKWARD +
                "out = (y, [n for n, _ in m.named_parameters()], [p.grad for p in m.parameters()], x_g.grad, "
                "[(n, b) for n, b in m.named_buffers()])")
        return Case(code, inputs, floor=1e-2, zero_sign=False)
    if kind == "LayerNorm":
        shape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 4))))
        norm = shape[-int(rng.integers(1, len(shape) + 1)):]
        ctor = (f"L.nn.LayerNorm({list(norm) if rng.random() < 0.5 else norm}, eps={pick(rng, [1e-5, 0.1])}, "
                f"elementwise_affine={bool(rng.random() < 0.7)}, bias={bool(rng.random() < 0.7)})")
        return _module_case(ctor, "m(x_g)", {"x_g": (_x(rng, shape), "float64")})
    if kind == "GroupNorm":
        groups = pick(rng, [1, 2])
        shape = (int(rng.integers(1, 3)), groups * c, int(rng.integers(1, 4)))
        ctor = f"L.nn.GroupNorm({groups}, {groups * c}, affine={bool(rng.random() < 0.7)})"
        return _module_case(ctor, "m(x_g)", {"x_g": (_x(rng, shape), "float64")})
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 4)))
    ctor = f"L.nn.LocalResponseNorm({int(rng.integers(1, 4))}, alpha={pick(rng, [1e-4, 0.5])}, " \
           f"beta={pick(rng, [0.75, 1.5])}, k={pick(rng, [1.0, 2.0])})"
    return _module_case(ctor, "m(x_g)", {"x_g": (_x(rng, shape), "float64")})


def _embedding(rng: np.random.Generator) -> Case:
    num, dim = int(rng.integers(2, 6)), int(rng.integers(1, 4))
    idx = rng.integers(0, num, size=(int(rng.integers(1, 3)), int(rng.integers(1, 4))))
    pad = pick(rng, [None, 0, -1])
    if rng.random() < 0.5:
        ctor = f"L.nn.Embedding({num}, {dim}, padding_idx={pad}, max_norm={pick(rng, [None, None, 0.5])})"
        code = f"m = {ctor}.double()\n{SET_PARAMS}y = m(i)\n{BACKWARD}" \
               "out = (y, [p.grad for p in m.parameters()], m.weight.detach())"
        return Case(code, {"i": (idx, "int64")}, floor=1e-2, zero_sign=False)
    mode = pick(rng, ["sum", "mean", "max"])
    flat = idx.reshape(-1)
    offsets = np.unique(np.concatenate([[0], rng.integers(0, flat.size + 1, size=2)]))
    offsets = offsets[offsets <= flat.size]
    psw = mode == "sum" and rng.random() < 0.5
    last = bool(rng.random() < 0.3)
    ctor = f"L.nn.EmbeddingBag({num}, {dim}, mode={mode!r}, padding_idx={pad}, include_last_offset={last})"
    inputs = {"i": (flat, "int64"), "o": (offsets, "int64")}
    call = "m(i, o" + (", per_sample_weights=w_g)" if psw else ")")
    if psw:
        inputs["w_g"] = (_x(rng, flat.shape), "float64")
    code = f"m = {ctor}.double()\n{SET_PARAMS}y = {call}\n{BACKWARD}out = (y, [p.grad for p in m.parameters()])"
    return Case(code, inputs, floor=1e-2, zero_sign=False)


def _linear(rng: np.random.Generator) -> Case:
    if rng.random() < 0.5:
        a, b = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 3)) for _ in range(int(rng.integers(0, 3)))) + (a,)
        return _module_case(f"L.nn.Linear({a}, {b}, bias={bool(rng.random() < 0.7)})", "m(x_g)",
                            {"x_g": (_x(rng, shape), "float64")})
    a, b, o = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    n = int(rng.integers(1, 3))
    return _module_case(f"L.nn.Bilinear({a}, {b}, {o}, bias={bool(rng.random() < 0.7)})", "m(x_g, z)",
                        {"x_g": (_x(rng, (n, a)), "float64"), "z": (_x(rng, (n, b)), "float64")})


def _attention(rng: np.random.Generator) -> Case:
    heads = pick(rng, [1, 2])
    e = heads * int(rng.integers(1, 3))
    first = bool(rng.random() < 0.5)
    kdim = pick(rng, [None, None, 3])
    vdim = pick(rng, [None, 2]) if kdim is not None else None
    opts = [f"batch_first={first}", f"bias={bool(rng.random() < 0.8)}", f"add_bias_kv={bool(rng.random() < 0.2)}",
            f"add_zero_attn={bool(rng.random() < 0.2)}", f"kdim={kdim}", f"vdim={vdim}"]
    n, lq, lk = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    unbatched = rng.random() < 0.15

    def shape(length: int, width: int) -> tuple:
        return (length, width) if unbatched else ((n, length, width) if first else (length, n, width))

    inputs: dict = {"x_g": (_x(rng, shape(lq, e)), "float64"), "k": (_x(rng, shape(lk, kdim or e)), "float64"),
                    "v": (_x(rng, shape(lk, vdim or e)), "float64")}
    extra = [f"need_weights={bool(rng.random() < 0.6)}", f"average_attn_weights={bool(rng.random() < 0.7)}"]
    if rng.random() < 0.3:
        mask = rng.random((n, lk) if not unbatched else (lk,)) < 0.3
        if not unbatched:
            mask[:, 0] = False  # a fully masked key row is NaN in torch's math path: kept out of the comparison
        inputs["kpm"] = (mask, "bool")
        extra.append("key_padding_mask=kpm")
    if rng.random() < 0.3:
        inputs["am"] = (np.round(rng.standard_normal((lq, lk)), 1), "float64")
        extra.append("attn_mask=am")
    return _module_case(f"L.nn.MultiheadAttention({e}, {heads}, {', '.join(opts)})", f"m(x_g, k, v, {', '.join(extra)})",
                        inputs, train=False)


def layers_case(rng: np.random.Generator) -> Case:
    kind = pick(rng, ["conv", "conv", "rnn", "rnn", "norm", "norm", "embedding", "linear", "attention"])
    return {"conv": _conv, "rnn": _rnn, "norm": _norm, "embedding": _embedding, "linear": _linear,
            "attention": _attention}[kind](rng)


# ---- spatial ops -------------------------------------------------------------------------------------------
def spatial_case(rng: np.random.Generator) -> Case:
    kind = pick(rng, ["grid_sample", "grid_sample", "affine_grid", "unfold", "fold", "shuffle", "conv_fn", "upsample"])
    if kind == "grid_sample":
        five = rng.random() < 0.25
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        size = tuple(int(rng.integers(1, 5)) for _ in range(3 if five else 2))
        out = tuple(int(rng.integers(1, 4)) for _ in range(3 if five else 2))
        grid = np.round(rng.uniform(-1.3, 1.3, (n,) + out + (3 if five else 2,)), 2)
        mode = pick(rng, ["bilinear", "nearest"] + ([] if five else ["bicubic"]))
        pm = pick(rng, ["zeros", "border", "reflection"])
        return Case(f"out = {F}.grid_sample(x_g, g_g, mode={mode!r}, padding_mode={pm!r}, "
                    f"align_corners={bool(rng.random() < 0.5)})",
                    {"x_g": (_x(rng, (n, c) + size), "float64"), "g_g": (grid, "float64")}, grad=True, floor=1e-2)
    if kind == "affine_grid":
        three = rng.random() < 0.3
        n = int(rng.integers(1, 3))
        size = (n, int(rng.integers(1, 3))) + tuple(int(rng.integers(1, 4)) for _ in range(3 if three else 2))
        theta = _x(rng, (n, 3, 4) if three else (n, 2, 3))
        return Case(f"out = {F}.affine_grid(t_g, {list(size)}, align_corners={bool(rng.random() < 0.5)})",
                    {"t_g": (theta, "float64")}, grad=True)
    if kind in ("unfold", "fold"):
        k = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        dil, pad, stride = pick(rng, [1, 2]), pick(rng, [0, 1]), pick(rng, [1, 2, (1, 2)])
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        if kind == "unfold":
            size = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
            batch = (n,) if rng.random() < 0.8 else ()
            call = (f"{F}.unfold(x_g, {k}, dilation={dil}, padding={pad}, stride={stride!r})" if rng.random() < 0.5
                    else f"L.nn.Unfold({k}, dilation={dil}, padding={pad}, stride={stride!r})(x_g)")
            return Case(f"out = {call}", {"x_g": (_x(rng, batch + (c,) + size), "float64")}, grad=True)
        osize = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        blocks = int(rng.integers(1, 7))
        call = (f"{F}.fold(x_g, {osize}, {k}, dilation={dil}, padding={pad}, stride={stride!r})" if rng.random() < 0.5
                else f"L.nn.Fold({osize}, {k}, dilation={dil}, padding={pad}, stride={stride!r})(x_g)")
        return Case(f"out = {call}", {"x_g": (_x(rng, (n, c * k[0] * k[1], blocks)), "float64")}, grad=True)
    if kind == "shuffle":
        r = pick(rng, [1, 2])
        which = pick(rng, ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"])
        n = int(rng.integers(1, 3))
        if which == "pixel_shuffle":
            shape, call = (n, int(rng.integers(1, 3)) * r * r, 2, 3), f"{F}.pixel_shuffle(x_g, {r})"
        elif which == "pixel_unshuffle":
            shape, call = (n, int(rng.integers(1, 3)), 2 * r, r * int(rng.integers(1, 3))), f"{F}.pixel_unshuffle(x_g, {r})"
        else:
            g = pick(rng, [1, 2, 3])
            shape, call = (n, g * int(rng.integers(1, 3)), 2), f"L.nn.ChannelShuffle({g})(x_g)"
        if rng.random() < 0.15:  # a shape torch refuses
            shape = shape[:1] + (shape[1] + 1,) + shape[2:]
        return Case(f"out = {call}", {"x_g": (_x(rng, shape), "float64")}, grad=True)
    if kind == "conv_fn":
        nd = int(rng.integers(1, 3))
        groups = pick(rng, [1, 2])
        cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        k = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        size = tuple(int(rng.integers(1, 6)) for _ in range(nd))
        stride, dil = pick(rng, [1, 2]), pick(rng, [1, 2])
        x = {"x_g": (_x(rng, (int(rng.integers(1, 3)), cin) + size), "float64")}
        if rng.random() < 0.5:
            x["w_g"] = (_x(rng, (cout, cin // groups) + k), "float64")
            call = f"{F}.conv{nd}d(x_g, w_g, b_g, stride={stride}, padding={pick(rng, [0, 1, 'same' if stride == 1 else 0])!r}, " \
                   f"dilation={dil}, groups={groups})"
        else:
            x["w_g"] = (_x(rng, (cin, cout // groups) + k), "float64")
            opad = int(rng.integers(0, max(stride, dil)))
            call = f"{F}.conv_transpose{nd}d(x_g, w_g, b_g, stride={stride}, padding={pick(rng, [0, 1])}, " \
                   f"output_padding={opad}, groups={groups}, dilation={dil})"
        x["b_g"] = (_x(rng, (cout,)), "float64")
        return Case(f"out = {call}", x, grad=True, floor=1e-2)
    mode = pick(rng, ["nearest", "linear", "bilinear", "bicubic", "trilinear"])
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode, int(rng.integers(1, 4)))
    shape = (1, int(rng.integers(1, 3))) + tuple(int(rng.integers(1, 4)) for _ in range(nd))
    if mode == "nearest" and nd == 2 and rng.random() < 0.3:
        call = pick(rng, ["L.nn.UpsamplingNearest2d(scale_factor=2)(x_g)", "L.nn.UpsamplingBilinear2d(size=(3, 4))(x_g)"])
    else:
        ac = "" if mode == "nearest" else f", align_corners={bool(rng.random() < 0.5)}"
        size = pick(rng, ["scale_factor=2", "scale_factor=1.5", f"size={tuple(int(rng.integers(1, 5)) for _ in range(nd))}"])
        call = f"L.nn.Upsample({size}, mode={mode!r}{ac})(x_g)"
    return Case(f"out = {call}", {"x_g": (_x(rng, shape), "float64")}, grad=True)


GENERATORS["layers"] = layers_case
GENERATORS["spatial"] = spatial_case
