"""Seeded case generators for torch.nn.functional, optimizers and lr schedulers (the trust fuzzer's nn areas).

Each generator takes a ``numpy.random.Generator`` and returns one :class:`trust_diff.Case`. Areas:

- ``functional``: losses (every reduction, class weights, ignore_index, label_smoothing, probability targets),
  activations at special points (0, kinks, +-large, +-inf, NaN), normalizations (affine, running statistics
  compared after the call, train vs eval), pooling (ceil_mode, padding, dilation, return_indices,
  count_include_pad, divisor_override), padding modes, interpolate (modes, align_corners, scale_factor,
  antialias), embedding (padding_idx, max_norm: the weight is renormalized in place), one_hot, dropout in
  eval mode, scaled_dot_product_attention (bool/float masks, is_causal, scale); gradients in float64.
- ``optim``: a few steps of every optimizer with its options on a fixed quadratic loss, the parameters and
  the lr after each step compared; lr_scheduler sequences (get_last_lr after each step).

Example:
    >>> case = functional_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import dataclasses

import numpy as np

from trust_cases import GENERATORS, pick
from trust_diff import Case

F = "L.nn.functional"
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 6.0, -3.0, 3.0, 20.0, -20.0, 1e30, -1e30, np.inf, -np.inf, np.nan])


def _floats(rng: np.random.Generator, shape: tuple, special: float = 0.0, scale: float = 2.0) -> np.ndarray:
    """Rounded normal values (ties for max-pool/sort kernels), a fraction ``special`` replaced by special points."""
    n = int(np.prod(shape)) if shape else 1
    out = np.round(rng.standard_normal(n) * scale, 1 if rng.random() < 0.5 else 6)
    if special:
        mask = rng.random(n) < special
        out[mask] = rng.choice(SPECIAL, int(mask.sum()))
    return out.reshape(shape)


def _red(rng: np.random.Generator) -> str:
    return pick(rng, ["'none'", "'mean'", "'sum'"])


# ---- losses -----------------------------------------------------------------------------------------------
def _loss_case(rng: np.random.Generator) -> Case:
    inputs: dict = {}
    red = _red(rng)
    dtype = "float64" if rng.random() < 0.8 else "float32"
    g = "_g" if dtype == "float64" else ""
    special = 0.15 if rng.random() < 0.3 else 0.0
    kind = pick(rng, ["pointwise", "ce", "nll", "bce", "bcel", "kl", "poisson", "gauss", "margin", "multi",
                      "embed", "triplet", "ce_prob", "ctc"])
    n, c = int(rng.integers(1, 5)), int(rng.integers(2, 5))
    if kind == "pointwise":
        shape = pick(rng, [(3,), (2, 3), ()])
        inputs["x" + g] = (_floats(rng, shape, special), dtype)
        inputs["y"] = (_floats(rng, shape, special), dtype)
        fn = pick(rng, ["mse_loss(x, y", "l1_loss(x, y", f"smooth_l1_loss(x, y, beta={pick(rng, [1.0, 0.5, 0.0])}",
                        f"huber_loss(x, y, delta={pick(rng, [1.0, 0.3, 2.0])}", "soft_margin_loss(x, y.sign()",
                        f"hinge_embedding_loss(x, y.sign(), margin={pick(rng, [1.0, 0.0, -0.5])}"])
        return Case(f"x = x{g}\nout = {F}.{fn}, reduction={red})", inputs, grad=bool(g))
    if kind in ("ce", "nll"):
        extra = pick(rng, [(), (3,), (2, 2)])
        inputs["x" + g] = (_floats(rng, (n, c) + extra, special), dtype)
        t = rng.integers(0, c, (n,) + extra)
        ignore = pick(rng, [None, -100, int(rng.integers(0, c))])
        if ignore == -100 and rng.random() < 0.7:
            t.flat[0] = -100
        inputs["t"] = (t, "int64")
        args = [f"reduction={red}"]
        if ignore is not None:
            args.append(f"ignore_index={ignore}")
        if rng.random() < 0.4:
            inputs["w"] = (np.abs(_floats(rng, (c,))) + 0.1, dtype)
            args.append("weight=w")
        if kind == "ce" and rng.random() < 0.5:
            args.append(f"label_smoothing={pick(rng, [0.1, 0.5, 0.0])}")
        xexpr = "x" if kind == "ce" else "x.log_softmax(1)"
        fn = "cross_entropy" if kind == "ce" else "nll_loss"
        if rng.random() < 0.15 and not extra:  # unbatched input (C,) with a 0-d target
            return Case(f"x = x{g}\nout = {F}.{fn}({xexpr}[0], t[0], {', '.join(args)})", inputs, grad=bool(g))
        return Case(f"x = x{g}\nout = {F}.{fn}({xexpr}, t, {', '.join(args)})", inputs, grad=bool(g))
    if kind == "ce_prob":
        inputs["x" + g] = (_floats(rng, (n, c), special), dtype)
        p = rng.random((n, c))
        inputs["p"] = (p / p.sum(1, keepdims=True), dtype)
        args = [f"reduction={red}"]
        if rng.random() < 0.4:
            inputs["w"] = (np.abs(_floats(rng, (c,))) + 0.1, dtype)
            args.append("weight=w")
        if rng.random() < 0.5:
            args.append(f"label_smoothing={pick(rng, [0.1, 0.3])}")
        return Case(f"x = x{g}\nout = {F}.cross_entropy(x, p, {', '.join(args)})", inputs, grad=bool(g))
    if kind in ("bce", "bcel"):
        shape = pick(rng, [(3,), (2, 3)])
        inputs["x" + g] = (_floats(rng, shape, special), dtype)
        tv = rng.choice([0.0, 1.0, 0.3], shape)
        inputs["t"] = (tv, dtype)
        args = [f"reduction={red}"]
        if rng.random() < 0.4:
            inputs["w"] = (np.abs(_floats(rng, shape[-1:])) + 0.1, dtype)
            args.append("weight=w")
        if kind == "bcel":
            if rng.random() < 0.4:
                inputs["pw"] = (np.abs(_floats(rng, shape[-1:])) + 0.1, dtype)
                args.append("pos_weight=pw")
            return Case(f"x = x{g}\nout = {F}.binary_cross_entropy_with_logits(x, t, {', '.join(args)})", inputs,
                        grad=bool(g))
        inputs["x" + g] = (np.clip(np.nan_to_num(inputs["x" + g][0]), -30, 30), dtype)
        # the gradient through a saturated sigmoid divides by p (1 - p), whose 1 - p keeps only a few digits:
        # compared to 1e-7 in float64
        return Case(f"x = x{g}\nout = {F}.binary_cross_entropy(x.sigmoid(), t, {', '.join(args)})", inputs,
                    grad=bool(g), rtol=1e-7 if g else None)
    if kind == "kl":
        inputs["x" + g] = (_floats(rng, (n, c), special), dtype)
        log_target = rng.random() < 0.5
        tv = rng.random((n, c))
        tv[rng.random((n, c)) < 0.2] = 0.0
        inputs["t"] = (np.log(tv + 1e-300) if log_target else tv, dtype)
        red = pick(rng, ["'none'", "'mean'", "'sum'", "'batchmean'"])
        return Case(f"x = x{g}\nout = {F}.kl_div(x.log_softmax(-1), t, reduction={red}, log_target={log_target})",
                    inputs, grad=bool(g))
    if kind == "poisson":
        log_input = rng.random() < 0.5
        inputs["x" + g] = (_floats(rng, (n, c), special) if log_input else np.abs(_floats(rng, (n, c))), dtype)
        inputs["t"] = (rng.integers(0, 5, (n, c)).astype(float), dtype)
        full = rng.random() < 0.5
        return Case(f"x = x{g}\nout = {F}.poisson_nll_loss(x, t, log_input={log_input}, full={full}, "
                    f"eps={pick(rng, [1e-8, 0.1])}, reduction={red})", inputs, grad=bool(g))
    if kind == "gauss":
        inputs["x" + g] = (_floats(rng, (n, c), special), dtype)
        inputs["t"] = (_floats(rng, (n, c)), dtype)
        vshape = pick(rng, [(n, c), (n, 1), (n,)])
        var = np.abs(_floats(rng, vshape))
        var.flat[0] = pick(rng, [0.0, var.flat[0]])
        inputs["v"] = (var, dtype)
        return Case(f"x = x{g}\nout = {F}.gaussian_nll_loss(x, t, v, full={bool(rng.random() < 0.5)}, "
                    f"eps={pick(rng, [1e-6, 0.5])}, reduction={red})", inputs, grad=bool(g))
    if kind == "margin":
        inputs["x" + g] = (_floats(rng, (n,), special), dtype)
        inputs["y"] = (_floats(rng, (n,)), dtype)
        inputs["s"] = (rng.choice([-1.0, 1.0], n), dtype)
        return Case(f"x = x{g}\nout = {F}.margin_ranking_loss(x, y, s, margin={pick(rng, [0.0, 0.5])}, "
                    f"reduction={red})", inputs, grad=bool(g))
    if kind == "multi":
        inputs["x" + g] = (_floats(rng, (n, c), special), dtype)
        fn = pick(rng, ["multi_margin", "multilabel_margin", "multilabel_soft_margin"])
        if fn == "multi_margin":
            inputs["t"] = (rng.integers(0, c, n), "int64")
            args = [f"p={pick(rng, [1, 2])}", f"margin={pick(rng, [1.0, 0.5])}"]
            if rng.random() < 0.4:
                inputs["w"] = (np.abs(_floats(rng, (c,))) + 0.1, dtype)
                args.append("weight=w")
        elif fn == "multilabel_margin":
            t = rng.integers(-1, c, (n, c))
            inputs["t"] = (t, "int64")
            args = []
        else:
            inputs["t"] = (rng.integers(0, 2, (n, c)).astype(float), dtype)
            args = []
            if rng.random() < 0.4:
                inputs["w"] = (np.abs(_floats(rng, (c,))) + 0.1, dtype)
                args.append("weight=w")
        args.append(f"reduction={red}")
        return Case(f"x = x{g}\nout = {F}.{fn}_loss(x, t, {', '.join(args)})", inputs, grad=bool(g))
    if kind == "embed":
        inputs["x" + g] = (_floats(rng, (n, c), special), dtype)
        inputs["y"] = (_floats(rng, (n, c)), dtype)
        if rng.random() < 0.3:
            inputs["y"][0][0] = 0.0
        inputs["s"] = (rng.choice([-1.0, 1.0], n), dtype)
        # cos - margin cancels (cos near 0.3): compared to 1e-8 in float64
        return Case(f"x = x{g}\nout = {F}.cosine_embedding_loss(x, y, s, margin={pick(rng, [0.0, 0.3])}, "
                    f"reduction={red})", inputs, grad=bool(g), rtol=1e-8 if g else None)
    if kind == "triplet":
        for name in ("x" + g, "y", "z"):
            inputs[name] = (_floats(rng, (n, c), special if name != "z" else 0.0), dtype)
        if rng.random() < 0.5:
            return Case(f"x = x{g}\nout = {F}.triplet_margin_loss(x, y, z, margin={pick(rng, [1.0, 0.2])}, "
                        f"p={pick(rng, [1, 2, 3])}, swap={bool(rng.random() < 0.5)}, reduction={red})", inputs,
                        grad=bool(g))
        return Case(f"x = x{g}\nout = {F}.triplet_margin_with_distance_loss(x, y, z, swap={bool(rng.random() < 0.5)}, "
                    f"margin={pick(rng, [1.0, 0.2])}, reduction={red})", inputs, grad=bool(g))
    # ctc: log-probabilities (T, N, C), targets concatenated or padded
    t_len, cc = int(rng.integers(3, 7)), int(rng.integers(2, 5))
    inputs["x" + g] = (_floats(rng, (t_len, n, cc)), dtype)
    tl = rng.integers(0, min(3, t_len) + 1, n)
    inputs["tg"] = (rng.integers(1, cc, (n, 3)), "int64")
    inputs["tl"] = (tl, "int64")
    inputs["il"] = (rng.integers(max(1, int(tl.max())), t_len + 1, n), "int64")
    red = pick(rng, ["'none'", "'mean'", "'sum'"])
    return Case(f"x = x{g}\nout = {F}.ctc_loss(x.log_softmax(2), tg, il, tl, reduction={red}, "
                f"zero_infinity={bool(rng.random() < 0.5)})", inputs, grad=bool(g), floor=1.0)


# ---- activations ------------------------------------------------------------------------------------------
ACTIVATIONS = [
    "relu(x)", "relu6(x)", "elu(x, alpha={a})", "selu(x)", "celu(x, alpha={a})", "leaky_relu(x, {s})", "gelu(x)",
    "gelu(x, approximate='tanh')", "logsigmoid(x)", "hardshrink(x, {l})", "tanhshrink(x)", "softsign(x)",
    "softplus(x, beta={b}, threshold={th})", "softmin(x, dim=-1)", "softmax(x, dim=0)", "log_softmax(x, dim=-1)",
    "tanh(x)", "sigmoid(x)", "hardsigmoid(x)", "silu(x)", "mish(x)", "hardswish(x)", "hardtanh(x, {lo}, {hi})",
    "threshold(x, {th}, {v})", "softshrink(x, {l})", "rrelu(x, training=False)", "glu(x, dim=-1)",
    "prelu(x, w)", "normalize(x, p={p}, dim=-1)", "softmax(x, dim=-1, dtype=L.float64)", "relu(x, inplace=True)",
    "elu(x, inplace=True)", "hardtanh(x, inplace=True)", "leaky_relu(x, {s}, inplace=True)", "threshold(x, 1.0, 2.0, inplace=True)",
    "silu(x, inplace=True)", "hardswish(x, inplace=True)", "relu6(x, inplace=True)", "celu(x, inplace=True)",
    "selu(x, inplace=True)", "mish(x, inplace=True)", "hardsigmoid(x, inplace=True)", "rrelu(x, inplace=True)",
    "dropout(x, 0.5, training=False)", "dropout(x, 0.0)", "dropout(x, 1.0)", "alpha_dropout(x, 0.3, training=False)",
    "dropout1d(x.reshape(1, 2, -1), 0.4, training=False)", "feature_alpha_dropout(x, 0.2, training=False)",
    "dropout2d(x.reshape(1, 1, 2, -1), 0.4, training=False)", "softmin(x, dim=0, dtype=L.float64)",
]


def _activation_case(rng: np.random.Generator) -> Case:
    dtype = pick(rng, ["float64", "float64", "float32", "float16", "bfloat16"])
    shape = pick(rng, [(4,), (2, 4), (2, 2)])
    expr = pick(rng, ACTIVATIONS).format(a=pick(rng, [1.0, 0.5, 2.0]), s=pick(rng, [0.01, 0.2, -0.5]),
                                         l=pick(rng, [0.5, 0.0, 1.0]), b=pick(rng, [1.0, 2.0, 0.5]),
                                         th=pick(rng, [20.0, 1.0, 0.0]), lo=pick(rng, [-1.0, -2.0, 0.0]),
                                         hi=pick(rng, [1.0, 6.0]), v=pick(rng, [0.0, -1.0]),
                                         p=pick(rng, [2, 1, 3.0]))
    inputs: dict = {}
    vals = _floats(rng, shape, special=pick(rng, [0.3, 0.6, 1.0]))
    grad = dtype == "float64" and "inplace" not in expr and "dropout" not in expr
    name = "x_g" if grad else "x"
    inputs[name] = (vals, dtype)
    if "prelu" in expr:
        inputs["w"] = (pick(rng, [np.array([0.25]), np.array([-0.5]), np.full(shape[1] if len(shape) > 1 else 1, 0.1)]),
                       dtype)
    code = f"x = {name}\nout = {F}.{expr}" + ("\nout = (out, out is x)" if "inplace" in expr else "")
    return Case(code, inputs, grad=grad)


# ---- normalizations ---------------------------------------------------------------------------------------
def _norm_case(rng: np.random.Generator) -> Case:
    case = _norm_case_raw(rng)
    return dataclasses.replace(case, floor=1.0)


def _norm_case_raw(rng: np.random.Generator) -> Case:
    dtype = pick(rng, ["float64", "float64", "float32"])
    g = "_g" if dtype == "float64" and rng.random() < 0.7 else ""
    n, c = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    spatial = pick(rng, [(), (3,), (2, 2)])
    shape = (n, c) + spatial
    inputs: dict = {"x" + g: (_floats(rng, shape, special=0.1 if rng.random() < 0.2 else 0.0), dtype)}
    affine = rng.random() < 0.6
    if affine:
        inputs["w" + g] = (_floats(rng, (c,)), dtype)
        inputs["b" + g] = (_floats(rng, (c,)), dtype)
    wb = f", weight=w{g}, bias=b{g}" if affine else ""
    kind = pick(rng, ["batch", "batch", "instance", "layer", "group", "rms", "lrn"])
    eps = pick(rng, [1e-5, 0.1])
    if kind in ("batch", "instance"):
        stats = kind == "batch" or rng.random() < 0.5
        training = bool(rng.random() < 0.6) if kind == "batch" else bool(rng.random() < 0.7)
        if stats:
            inputs["rm"] = (_floats(rng, (c,)), dtype)
            inputs["rv"] = (np.abs(_floats(rng, (c,))) + 0.5, dtype)
        mom = pick(rng, [0.1, 0.5, None]) if kind == "batch" else pick(rng, [0.1, 0.5])
        if kind == "batch":
            rs = "rm, rv"
            if mom is None:  # F.batch_norm takes a float momentum (the module's None is a cumulative average)
                mom = 0.1
            call = f"{F}.batch_norm(x{g}, {rs}{wb}, training={training}, momentum={mom}, eps={eps})"
        else:
            rs = ", running_mean=rm, running_var=rv" if stats else ""
            call = f"{F}.instance_norm(x{g}{rs}{wb}, use_input_stats={training or not stats}, momentum={mom}, eps={eps})"
        return Case(f"out = {call}", inputs, grad=bool(g))
    if kind == "layer":
        k = int(rng.integers(1, len(shape) + 1))
        nshape = shape[-k:]
        if rng.random() < 0.6:
            inputs["lw" + g] = (_floats(rng, nshape), dtype)
            inputs["lb"] = (_floats(rng, nshape), dtype)
            return Case(f"out = {F}.layer_norm(x{g}, {list(nshape)}, lw{g}, lb, eps={eps})", inputs, grad=bool(g))
        return Case(f"out = {F}.layer_norm(x{g}, {list(nshape)}, eps={eps})", inputs, grad=bool(g))
    if kind == "rms":
        k = int(rng.integers(1, len(shape) + 1))
        nshape = shape[-k:]
        e = pick(rng, ["None", "1e-3"])
        if rng.random() < 0.5:
            inputs["lw" + g] = (_floats(rng, nshape), dtype)
            return Case(f"out = {F}.rms_norm(x{g}, {list(nshape)}, lw{g}, eps={e})", inputs, grad=bool(g))
        return Case(f"out = {F}.rms_norm(x{g}, {list(nshape)}, eps={e})", inputs, grad=bool(g))
    if kind == "group":
        groups = pick(rng, [d for d in range(1, c + 1) if c % d == 0])
        if dtype == "float32" and (c // groups) * int(np.prod(spatial)) == 1:
            groups = 1  # torch's float32 kernel leaves rounding noise (1e-5) in one-element groups; ember's is 0
        return Case(f"out = {F}.group_norm(x{g}, {groups}{wb}, eps={eps})", inputs, grad=bool(g))
    size = int(rng.integers(1, 4))
    if not spatial:
        inputs = {"x" + g: (_floats(rng, (n, c, 3)), dtype)}
    return Case(f"out = {F}.local_response_norm(x{g}, {size}, alpha={pick(rng, [1e-4, 0.5])}, "
                f"beta={pick(rng, [0.75, 1.0])}, k={pick(rng, [1.0, 2.0])})", inputs, grad=bool(g))


# ---- pooling ----------------------------------------------------------------------------------------------
def _window_in_padding(size: tuple, k: list, stride: str, pad: int, dil: int, ceil: bool) -> bool:
    """Whether a max-pool window reads only padding along some dim (possible with dilation > 1)."""
    strides = k if stride == "None" else ([int(stride)] * len(k) if stride.isdigit() else list(eval(stride)))
    for n, kk, s in zip(size, k, strides):
        span = n + 2 * pad - dil * (kk - 1) - 1
        out = (-(-span // s) if ceil else span // s) + 1
        if ceil and (out - 1) * s >= n + pad:
            out -= 1
        if any(all(not 0 <= o * s - pad + j * dil < n for j in range(kk)) for o in range(max(out, 0))):
            return True
    return False


def _pool_case(rng: np.random.Generator) -> Case:
    nd = int(rng.integers(1, 4))
    dtype = pick(rng, ["float64", "float64", "float32", "int64"]) if rng.random() < 0.1 else "float64"
    batch = pick(rng, [(1, 2), (2,), (1, 1)])
    size = tuple(int(rng.integers(1, 7)) for _ in range(nd)) if nd < 3 else tuple(int(rng.integers(1, 5)) for _ in range(3))
    shape = batch + size
    g = "_g" if dtype == "float64" else ""
    special = 0.2 if rng.random() < 0.2 else 0.0
    inputs: dict = {"x" + g: (_floats(rng, shape, special) if dtype != "int64" else rng.integers(-5, 5, shape), dtype)}
    kind = pick(rng, ["max", "max", "avg", "avg", "adaptive_avg", "adaptive_max", "lp", "unpool"])
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    ktext = str(k[0]) if rng.random() < 0.4 else repr(tuple(k))
    stride = pick(rng, ["None", "1", "2", repr(tuple(int(rng.integers(1, 4)) for _ in range(nd)))])
    pad = pick(rng, [0, 0, 1])
    ceil = bool(rng.random() < 0.4)
    if kind in ("max", "unpool"):
        dil = pick(rng, [1, 1, 2])
        ret = kind == "unpool" or rng.random() < 0.4
        call = (f"{F}.max_pool{nd}d(x{g}, {ktext}, stride={stride}, padding={pad}, dilation={dil}, "
                f"ceil_mode={ceil}, return_indices={ret})")
        # torch's max_pool backward writes the gradient of a window wholly in the padding past its plane (into
        # the next channel, or out of the tensor: heap corruption); such cases compare values and indices only
        safe = not _window_in_padding(size, k, stride, pad, dil, ceil)
        if kind == "unpool":
            return Case(f"v, i = {call}\nout = (v, i, {F}.max_unpool{nd}d(v, i, {ktext}, stride={stride}, "
                        f"padding={pad}, output_size=x{g}.shape[-{nd}:]))", inputs, grad=bool(g) and safe)
        return Case(f"out = {call}", inputs, grad=bool(g) and safe)
    if kind == "avg":
        cip = bool(rng.random() < 0.5)
        div = pick(rng, ["None", "None", "3"]) if nd > 1 else None
        extra = f", divisor_override={div}" if div is not None else ""
        return Case(f"out = {F}.avg_pool{nd}d(x{g}, {ktext}, stride={stride}, padding={pad}, ceil_mode={ceil}, "
                    f"count_include_pad={cip}{extra})", inputs, grad=bool(g))
    if kind.startswith("adaptive"):
        osz = [pick(rng, [1, 2, 3, 4, 5]) for _ in range(nd)]
        otext = str(osz[0]) if rng.random() < 0.4 else repr(tuple(osz))
        if nd > 1 and rng.random() < 0.2:
            otext = repr((None,) + tuple(osz[1:]))
        ret = kind == "adaptive_max" and rng.random() < 0.5
        extra = f", return_indices={ret}" if kind == "adaptive_max" else ""
        return Case(f"out = {F}.{kind}_pool{nd}d(x{g}, {otext}{extra})", inputs, grad=bool(g))
    if nd == 3:
        nd = 2
        inputs = {"x" + g: (_floats(rng, batch + size[:2]), dtype)}
        ktext = str(k[0])
        stride = "None"
    inputs["x" + g] = (np.abs(inputs["x" + g][0]) if dtype != "int64" else inputs["x" + g][0], dtype)
    return Case(f"out = {F}.lp_pool{nd}d(x{g}, {pick(rng, [1, 2, 3.0])}, {ktext}, stride={stride}, "
                f"ceil_mode={ceil})", inputs, grad=bool(g))


# ---- padding, interpolation, embedding, one_hot, attention ------------------------------------------------
def _pad_case(rng: np.random.Generator) -> Case:
    mode = pick(rng, ["constant", "constant", "reflect", "replicate", "circular"])
    nd = int(rng.integers(1, 4))
    shape = pick(rng, [(1, 2), (2,), (1,)]) + tuple(int(rng.integers(1, 5)) for _ in range(nd))
    dtype = pick(rng, ["float64", "float64", "float32", "int64", "bool"]) if mode == "constant" else "float64"
    g = "_g" if dtype == "float64" else ""
    vals = _floats(rng, shape) if "float" in dtype else rng.integers(0, 3, shape)
    inputs = {"x" + g: (vals, dtype)}
    k = int(rng.integers(1, nd + 1)) if mode == "constant" else nd
    # negative circular pads: torch 2.13 returns uninitialized memory (6.9e-310 in the output), so none here
    pads = []
    for i in range(k):
        size = shape[-1 - i]
        hi = size - 1 if mode == "reflect" else size if mode == "circular" else 3
        lo = -size if mode == "constant" else (-size + 1 if mode in ("reflect", "replicate") else 0)
        pads += [int(rng.integers(lo if rng.random() < 0.2 else 0, hi + 2)) for _ in range(2)]
    value = f", value={pick(rng, [0, 1.5, -2])}" if mode == "constant" and rng.random() < 0.5 else ""
    return Case(f"out = {F}.pad(x{g}, {pads}, mode='{mode}'{value})", inputs, grad=bool(g))


def _interp_case(rng: np.random.Generator) -> Case:
    mode = pick(rng, ["nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area"])
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode, int(rng.integers(1, 4)))
    shape = (1, int(rng.integers(1, 3))) + tuple(int(rng.integers(1, 6 if nd < 3 else 4)) for _ in range(nd))
    inputs = {"x_g": (_floats(rng, shape, 0.1 if rng.random() < 0.1 else 0.0), "float64")}
    args = []
    if rng.random() < 0.5:
        sizes = [int(rng.integers(1, 9 if nd < 3 else 5)) for _ in range(nd)]
        args.append(f"size={sizes[0] if rng.random() < 0.3 else tuple(sizes)}")
    else:
        sf = [pick(rng, [0.5, 1.5, 2.0, 2.7, 0.3, 1.0, 3.0]) for _ in range(nd)]
        args.append(f"scale_factor={sf[0] if rng.random() < 0.4 else tuple(sf)}")
        if rng.random() < 0.4:
            args.append(f"recompute_scale_factor={bool(rng.random() < 0.5)}")
    if mode in ("linear", "bilinear", "bicubic", "trilinear") and rng.random() < 0.6:
        args.append(f"align_corners={bool(rng.random() < 0.5)}")
    if mode in ("bilinear", "bicubic") and rng.random() < 0.4:
        args.append("antialias=True")
    return Case(f"out = {F}.interpolate(x_g, mode='{mode}', {', '.join(args)})", inputs, grad=True, floor=1.0)


def _embedding_case(rng: np.random.Generator) -> Case:
    v, d = int(rng.integers(2, 6)), int(rng.integers(1, 4))
    inputs: dict = {}
    kind = pick(rng, ["embedding", "embedding", "bag", "one_hot"])
    idx = rng.integers(0, v, pick(rng, [(3,), (2, 3), ()]))
    if kind == "one_hot":
        inputs["i"] = (idx, "int64")
        nc = pick(rng, [-1, v, v + 2, v - 1])
        return Case(f"out = {F}.one_hot(i, {nc})", inputs)
    inputs["i"] = (idx, "int64")
    if kind == "embedding":
        args = []
        if rng.random() < 0.5:
            args.append(f"padding_idx={int(rng.integers(-v, v))}")
        if rng.random() < 0.4:
            args.append(f"max_norm={pick(rng, [0.5, 1.0, 2.0])}")
            args.append(f"norm_type={pick(rng, [2.0, 1.0, 3.0])}")
        if rng.random() < 0.3:
            args.append("scale_grad_by_freq=True")
        # max_norm renormalizes the weight in place (compared after); no autograd through the renorm then
        grad = "max_norm" not in " ".join(args)
        inputs["w_g" if grad else "w"] = (_floats(rng, (v, d)) * 2, "float64")
        return Case(f"out = {F}.embedding(i, {'w_g' if grad else 'w'}{''.join(', ' + a for a in args)})", inputs,
                    grad=grad)
    inputs["w_g"] = (_floats(rng, (v, d)), "float64")
    mode = pick(rng, ["'sum'", "'mean'", "'max'"])
    flat = rng.integers(0, v, 5)
    inputs["i"] = (flat, "int64")
    offs = np.sort(rng.choice(np.arange(0, 6), int(rng.integers(1, 4)), replace=False))
    offs[0] = 0
    inputs["o"] = (offs, "int64")
    args = [f"mode={mode}"]
    if mode != "'max'" and rng.random() < 0.4:
        inputs["ps"] = (_floats(rng, (5,)), "float64")
        args = ["mode='sum'", "per_sample_weights=ps"]
    if rng.random() < 0.3:
        args.append(f"padding_idx={int(rng.integers(0, v))}")
    if rng.random() < 0.3:  # offsets end with len(input) then (torch crashes on a malformed last offset)
        inputs["o"] = (np.append(offs, 5), "int64")
        args.append("include_last_offset=True")
    return Case(f"out = {F}.embedding_bag(i, w_g, o, {', '.join(args)})", inputs, grad=True)


def _sdpa_case(rng: np.random.Generator) -> Case:
    b, h, lq, lk, e = 1, int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    dtype = pick(rng, ["float64", "float64", "float32"])
    g = "_g" if dtype == "float64" else ""
    inputs = {"q" + g: (_floats(rng, (b, h, lq, e)), dtype), "k" + g: (_floats(rng, (b, h, lk, e)), dtype),
              "v" + g: (_floats(rng, (b, h, lk, e + int(rng.integers(0, 2)))), dtype)}
    args = []
    mask = pick(rng, ["none", "bool", "float", "causal"])
    if mask == "bool":
        m = rng.random(pick(rng, [(lq, lk), (1, h, lq, lk), (lk,)])) < 0.7
        inputs["m"] = (m, "bool")
        args.append("attn_mask=m")
    elif mask == "float":
        mv = _floats(rng, (lq, lk))
        mv[rng.random((lq, lk)) < 0.2] = -np.inf
        inputs["m"] = (mv, dtype)
        args.append("attn_mask=m")
    elif mask == "causal":
        args.append("is_causal=True")
    if rng.random() < 0.3:
        args.append(f"scale={pick(rng, [0.5, 1.0, 2.0])}")
    return Case(f"out = {F}.scaled_dot_product_attention(q{g}, k{g}, v{g}{''.join(', ' + a for a in args)})", inputs,
                grad=bool(g), floor=1.0)


def functional_case(rng: np.random.Generator) -> Case:
    """One torch.nn.functional call: a loss, activation, normalization, pooling, pad, interpolate, embedding or
    attention, drawn with its options."""
    kind = pick(rng, ["loss", "loss", "loss", "act", "act", "act", "norm", "norm", "pool", "pool", "pad", "interp",
                      "embed", "sdpa"])
    return {"loss": _loss_case, "act": _activation_case, "norm": _norm_case, "pool": _pool_case, "pad": _pad_case,
            "interp": _interp_case, "embed": _embedding_case, "sdpa": _sdpa_case}[kind](rng)


GENERATORS["functional"] = functional_case


# ---- optimizers and lr schedulers -------------------------------------------------------------------------
OPTIMIZERS = {
    "SGD": lambda r: dict(lr=pick(r, [0.1, 0.01]), momentum=pick(r, [0.0, 0.9]), dampening=pick(r, [0.0, 0.3]),
                          nesterov=None, weight_decay=pick(r, [0.0, 0.1]), maximize=pick(r, [False, True])),
    "Adam": lambda r: dict(lr=pick(r, [0.1, 0.01]), betas=pick(r, [(0.9, 0.999), (0.5, 0.9)]), eps=pick(r, [1e-8, 1e-3]),
                           weight_decay=pick(r, [0.0, 0.1]), amsgrad=pick(r, [False, True]), maximize=pick(r, [False, True])),
    "AdamW": lambda r: dict(lr=pick(r, [0.1, 0.01]), weight_decay=pick(r, [0.0, 0.01, 0.5]), amsgrad=pick(r, [False, True]),
                            maximize=pick(r, [False, True])),
    "Adagrad": lambda r: dict(lr=pick(r, [0.1, 0.5]), lr_decay=pick(r, [0.0, 0.1]), weight_decay=pick(r, [0.0, 0.1]),
                              initial_accumulator_value=pick(r, [0.0, 0.5]), eps=pick(r, [1e-10, 1e-2]),
                              maximize=pick(r, [False, True])),
    "RMSprop": lambda r: dict(lr=pick(r, [0.01, 0.1]), alpha=pick(r, [0.99, 0.5]), eps=pick(r, [1e-8, 1e-2]),
                              weight_decay=pick(r, [0.0, 0.1]), momentum=pick(r, [0.0, 0.9]), centered=pick(r, [False, True]),
                              maximize=pick(r, [False, True])),
    "Adadelta": lambda r: dict(lr=pick(r, [1.0, 0.5]), rho=pick(r, [0.9, 0.5]), eps=pick(r, [1e-6, 1e-2]),
                               weight_decay=pick(r, [0.0, 0.1]), maximize=pick(r, [False, True])),
    "Adamax": lambda r: dict(lr=pick(r, [0.002, 0.1]), betas=pick(r, [(0.9, 0.999), (0.5, 0.9)]),
                             weight_decay=pick(r, [0.0, 0.1]), maximize=pick(r, [False, True])),
    "NAdam": lambda r: dict(lr=pick(r, [0.002, 0.1]), momentum_decay=pick(r, [0.004, 0.1]), weight_decay=pick(r, [0.0, 0.1]),
                            decoupled_weight_decay=pick(r, [False, True]), maximize=pick(r, [False, True])),
    "RAdam": lambda r: dict(lr=pick(r, [0.001, 0.1]), betas=pick(r, [(0.9, 0.999), (0.5, 0.6)]),
                            weight_decay=pick(r, [0.0, 0.1]), decoupled_weight_decay=pick(r, [False, True]),
                            maximize=pick(r, [False, True])),
    "ASGD": lambda r: dict(lr=pick(r, [0.01, 0.1]), lambd=pick(r, [1e-4, 0.1]), alpha=pick(r, [0.75, 0.5]),
                           t0=pick(r, [1e6, 2.0]), weight_decay=pick(r, [0.0, 0.1]), maximize=pick(r, [False, True])),
    "Rprop": lambda r: dict(lr=pick(r, [0.01, 0.1]), etas=pick(r, [(0.5, 1.2), (0.3, 2.0)]),
                            step_sizes=pick(r, [(1e-6, 50), (0.05, 0.2)]), maximize=pick(r, [False, True])),
    "Adafactor": lambda r: dict(lr=pick(r, [0.01, 0.1]), beta2_decay=pick(r, [-0.8, -0.5]), d=pick(r, [1.0, 0.5]),
                                weight_decay=pick(r, [0.0, 0.1]), maximize=pick(r, [False, True])),
}


def _optimizer_case(rng: np.random.Generator) -> Case:
    name = pick(rng, sorted(OPTIMIZERS))
    kw = OPTIMIZERS[name](rng)
    if name == "SGD":
        kw["nesterov"] = bool(kw["momentum"] and not kw["dampening"] and rng.random() < 0.5)
        if rng.random() < 0.05:
            kw["nesterov"] = True  # torch refuses nesterov without momentum / with dampening
    if name != "Adafactor" and rng.random() < 0.5:
        kw["foreach"] = pick(rng, [True, False])
    inputs = {"a": (_floats(rng, (2, 3)), "float64"), "b": (_floats(rng, (3,)), "float64"),
              "ta": (_floats(rng, (2, 3)), "float64")}
    groups = "[pa, pb]"
    if rng.random() < 0.3:
        groups = f"[{{'params': [pa]}}, {{'params': [pb], 'lr': {pick(rng, [0.05, 0.3])}}}]"
    steps = int(rng.integers(1, 6))
    skip_b = rng.random() < 0.2  # pb gets no gradient on the first step: skipped (grad None)
    kwtext = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    code = (f"pa = a.clone().requires_grad_(True)\npb = b.clone().requires_grad_(True)\n"
            f"opt = L.optim.{name}({groups}, {kwtext})\nlrs = []\n"
            f"for k in range({steps}):\n"
            f"    opt.zero_grad()\n"
            f"    loss = ((pa - ta) ** 2 * (1 + k)).sum() + (pa.sin() * pb).sum()"
            f"{' * (k > 0)' if skip_b else ''} + (pb ** 3).sum() * 0.1\n"
            f"    if {skip_b} and k == 0:\n        loss = ((pa - ta) ** 2).sum()\n"
            f"    loss.backward()\n"
            f"    opt.step()\n"
            f"    lrs.append([grp['lr'] for grp in opt.param_groups])\n"
            f"out = (pa.detach(), pb.detach(), lrs)")
    return Case(code, inputs, rtol=1e-10)


SCHEDULERS = [
    "StepLR(opt, step_size={i}, gamma={gm})", "MultiStepLR(opt, milestones=[2, 3, 7], gamma={gm})",
    "ConstantLR(opt, factor={f}, total_iters={i})", "LinearLR(opt, start_factor={f}, end_factor=1.0, total_iters={i})",
    "ExponentialLR(opt, gamma={gm})", "PolynomialLR(opt, total_iters={i}, power={pw})",
    "CosineAnnealingLR(opt, T_max={i}, eta_min={em})", "CosineAnnealingWarmRestarts(opt, T_0={i}, T_mult={tm}, eta_min={em})",
    "CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up={i}, mode='{cm}', cycle_momentum=False)",
    "OneCycleLR(opt, max_lr=0.5, total_steps=20, pct_start={pct}, anneal_strategy='{an}', three_phase={tp}, cycle_momentum=False)",
    "LambdaLR(opt, lambda e: 1.0 / (e + 1))", "MultiplicativeLR(opt, lambda e: 0.9)",
    "SequentialLR(opt, [L.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2), "
    "L.optim.lr_scheduler.ExponentialLR(opt, gamma={gm})], milestones=[{i}])",
    "ChainedScheduler([L.optim.lr_scheduler.StepLR(opt, step_size={i}, gamma={gm}), "
    "L.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)])",
    "ReduceLROnPlateau(opt, mode='{pm}', factor={gm}, patience={pt}, threshold={thr}, threshold_mode='{tmode}', "
    "cooldown={cd}, min_lr={mlr})",
]


def _scheduler_case(rng: np.random.Generator) -> Case:
    expr = pick(rng, SCHEDULERS).format(
        i=int(rng.integers(1, 6)), gm=pick(rng, [0.1, 0.5, 0.9]), f=pick(rng, [0.1, 0.5]), pw=pick(rng, [1.0, 2.0, 0.5]),
        em=pick(rng, [0.0, 0.01]), tm=pick(rng, [1, 2]), cm=pick(rng, ["triangular", "triangular2", "exp_range"]),
        pct=pick(rng, [0.3, 0.25]), an=pick(rng, ["cos", "linear"]), tp=pick(rng, [False, True]),
        pm=pick(rng, ["min", "max"]), pt=pick(rng, [0, 1, 2]), thr=pick(rng, [1e-4, 0.1]),
        tmode=pick(rng, ["rel", "abs"]), cd=pick(rng, [0, 1]), mlr=pick(rng, [0.0, 0.02]))
    metrics = [round(float(v), 2) for v in rng.choice([1.0, 0.9, 0.95, 1.2, 0.5], 15)]
    step = "sched.step(metrics[k])" if "Plateau" in expr else "sched.step()"
    last = "[g['lr'] for g in opt.param_groups]" if "Plateau" in expr else "sched.get_last_lr()"
    steps = 15 if "OneCycle" not in expr else 19
    code = (f"p = L.zeros(2, requires_grad=True)\nopt = L.optim.SGD([p], lr=0.1, momentum=0.9)\n"
            f"sched = L.optim.lr_scheduler.{expr}\nmetrics = {metrics}\nlrs = [{last}]\n"
            f"for k in range({steps}):\n    opt.step()\n    {step}\n    lrs.append({last})\nout = lrs")
    return Case(code, {}, rtol=1e-12)


def optim_case(rng: np.random.Generator) -> Case:
    """A few optimizer steps with drawn options, or an lr scheduler's sequence."""
    return _optimizer_case(rng) if rng.random() < 0.65 else _scheduler_case(rng)


GENERATORS["optim"] = optim_case
