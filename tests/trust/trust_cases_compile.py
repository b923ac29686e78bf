"""Seeded program generators for the fifth wave: ``ember.compile`` against eager (``trust_compile_diff``).

A program is a chain of statements over the inputs ``x0, x1, ...``: elementwise ops (unary, binary with
broadcasting, Python-number operands), casts, reductions, views and in-place writes through them, writes
into the inputs themselves, indexing. Each statement is tried eagerly while the program is generated and
kept only when it runs, so programs are valid; the same seed gives the same program.

Areas:

* ``compile_values``: any dtype (bool, int8/uint8/int32/int64, float16/bfloat16/float32/float64), special
  values (0, -0, +-inf, NaN, 1e30), non-contiguous inputs, in-place writes into inputs and views, no autograd.
* ``compile_grad``: float32/float64 inputs that require grad, the same chains without writes into the inputs;
  the compiled call is one autograd node, its gradients are compared.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import ember
from trust_cases import pick
from trust_compile_diff import LAYOUTS, Program, make_input

DTYPES = ("bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.inf, -np.inf, np.nan, 1e30, -3.0, 2.0)

UNARY = ["{a}.exp()", "{a}.log()", "{a}.sqrt()", "{a}.abs()", "-{a}", "{a}.sin()", "{a}.tanh()", "{a}.sigmoid()",
         "{a}.relu()", "{a}.floor()", "{a}.ceil()", "{a}.round()", "{a}.trunc()", "{a}.sign()", "{a}.reciprocal()",
         "{a}.square()", "{a}.log1p()", "{a}.expm1()", "{a}.erf()", "F.gelu({a})", "F.gelu({a}, approximate='tanh')",
         "F.silu({a})", "F.softplus({a})", "{a}.clamp(-1, 2)", "{a}.clamp(min=0)", "ember.nan_to_num({a})",
         "{a}.isnan()", "{a}.isinf()", "~{a}", "{a}.logical_not()", "{a} ** 2", "{a} ** 0.5", "{a} ** -1",
         "{a}.rsqrt()", "F.leaky_relu({a}, 0.1)", "F.elu({a})", "F.hardtanh({a})", "F.softsign({a})",
         "{a}.float()", "{a}.double()", "{a}.half()", "{a}.long()", "{a}.int()", "{a}.bool()",
         "{a}.to(ember.bfloat16)", "{a}.to(ember.uint8)", "{a}.cos()", "{a}.atan()", "{a}.frac()",
         "ember.signbit({a})", "{a}.exp2()", "{a}.log2()", "F.relu6({a})", "F.hardswish({a})", "F.mish({a})"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "{a} // {b}", "{a} % {b}", "{a} ** {b}",
          "ember.maximum({a}, {b})", "ember.minimum({a}, {b})", "ember.atan2({a}, {b})", "ember.fmod({a}, {b})",
          "ember.remainder({a}, {b})", "ember.div({a}, {b}, rounding_mode='trunc')",
          "ember.div({a}, {b}, rounding_mode='floor')", "ember.where({a} > {b}, {a}, {b})", "{a} == {b}",
          "{a} < {b}", "{a} & {b}", "{a} | {b}", "{a} ^ {b}", "ember.hypot({a}, {b})", "ember.copysign({a}, {b})",
          "ember.logaddexp({a}, {b})", "ember.fmax({a}, {b})", "ember.add({a}, {b}, alpha=2)",
          "ember.sub({a}, {b}, alpha=-1)", "ember.xlogy({a}, {b})", "ember.lerp({a}, {b}, 0.25)"]
SCALARS = ["2", "-3", "0.5", "-0.0", "0.0", "1e30", "float('inf')", "True", "3.5", "-1"]
REDUCE = ["{a}.sum()", "{a}.sum(-1)", "{a}.sum(0, keepdim=True)", "{a}.mean(-1)", "{a}.amax(-1)", "{a}.amin(0)",
          "{a}.prod(-1)", "{a}.max(-1).values", "{a}.max(-1).indices", "{a}.argmax()", "{a}.argmin(-1)",
          "{a}.cumsum(-1)", "{a}.logsumexp(-1)", "{a}.softmax(-1)", "{a}.log_softmax(0)", "{a}.var(-1)",
          "{a}.std()", "{a}.norm()", "{a}.all(-1)", "{a}.any()", "{a}.sum(-1, dtype=ember.float64)",
          "{a}.cumprod(0)", "{a}.nansum()", "{a}.median()", "{a}.sort(-1).values", "{a}.sort(-1, descending=True).indices",
          "{a}.topk(1, -1).values", "{a}.count_nonzero()", "{a}.mean()", "ember.cummax({a}, -1).values"]
VIEWS = ["{a}[1:]", "{a}[::2]", "{a}[..., ::-1] if False else {a}.flip(-1)", "{a}.t()", "{a}.transpose(0, -1)",
         "{a}.unsqueeze(0)", "{a}.squeeze()", "{a}.reshape(-1)", "{a}.flatten()", "{a}.narrow(-1, 0, 1)",
         "{a}.select(0, -1)", "{a}.diagonal()", "{a}.permute(*reversed(range({a}.dim())))", "{a}[None, ..., 0]",
         "{a}.view(-1)", "{a}.expand(2, *{a}.shape)", "{a}.movedim(0, -1)", "{a}.unfold(-1, 1, 1)",
         "{a}.contiguous()", "{a}.clone()", "{a}.detach()", "{a}[0]", "{a}[-1:, ...]", "{a}.mT",
         "{a}.split(1, -1)[0]", "{a}.chunk(2, 0)[-1]", "{a}.unbind(0)[0]", "{a}.T if {a}.dim() == 2 else {a}"]
INPLACE = ["{a}.add_({b})", "{a}.mul_({b})", "{a}.sub_({s})", "{a}.mul_({s})", "{a}.clamp_(-1, 1)", "{a}.relu_()",
           "{a}.exp_()", "{a}.fill_({s})", "{a}.zero_()", "{a}.neg_()", "{a}.abs_()", "{a}.copy_({b})",
           "{a}.masked_fill_({a} > 0, {s})", "{a}[0] = {s}", "{a}[..., :1] = {b}[..., :1]", "{a} += {b}",
           "{a} *= {s}", "{a}.div_({s})", "{a}.floor_divide_({s})", "{a}.sqrt_()", "{a}.sigmoid_()",
           "{a}.lerp_({b}, 0.5)", "{a}.addcmul_({b}, {b}, value=0.5)", "{a}.index_fill_(-1, ember.tensor([0]), {s})",
           "{a}.clamp_(min={b})", "{a}.tanh_()", "{a}.pow_(2)", "{a}.__ior__({b})", "{a}.bitwise_and_({b})"]
INDEX = ["{a}[ember.tensor([0, -1, 0])]", "{a}.index_select(-1, ember.tensor([0, 0]))",
         "{a}.gather(-1, ember.zeros_like({a}, dtype=ember.int64))", "{a}.masked_fill({a} > 0, {s})",
         "{a}.take(ember.tensor([0]))", "ember.where({a} > 0, {a}, {s})", "{a}[..., [0]]",
         "{a}.scatter_add(-1, ember.zeros_like({a}, dtype=ember.int64), {a})", "{a}.roll(1, -1)",
         "ember.cat([{a}, {b}], -1)", "ember.stack([{a}, {a}])", "{a}.repeat(2, *([1] * ({a}.dim() - 1)))",
         "{a}.tril()", "{a}.triu(1)", "{a} @ {b}", "ember.matmul({a}, {b}.mT)", "{a}.outer({b}) if {a}.dim() == 1 else {a}"]


def values(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype in ("uint8", "int8", "int32", "int64"):
        info = np.iinfo(dtype)
        pool = np.array([0, 1, -1, 2, -3, 5, 7, -8, 100, 127, -128, 255, info.max, info.min])
        pool = pool[(pool >= info.min) & (pool <= info.max)]
        out = np.where(rng.random(n) < 0.3, rng.choice(pool, n), rng.integers(-9, 10, n))
        return np.clip(out, info.min, info.max).astype(dtype).reshape(shape)
    real = np.round(rng.standard_normal(n) * 2.5, int(rng.integers(0, 3)))
    mask = rng.random(n) < 0.25
    real[mask] = rng.choice(np.array(SPECIALS), int(mask.sum()))
    return real.reshape(shape)


def _shape(rng: np.random.Generator) -> tuple:
    return tuple(int(s) for s in rng.choice([1, 2, 3, 4], int(rng.integers(1, 4))))


def _try(code: str, env: dict) -> bool:
    try:
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, env)  # noqa: S102 - the generator's own statements
        return True
    except Exception:  # noqa: BLE001 - statements that do not run are dropped
        return False


def _program(rng: np.random.Generator, grad: bool, dtypes: tuple = DTYPES, layouts: tuple = LAYOUTS,
             write_args: bool = True, empty: bool = False, smooth: bool = False) -> Program:
    n_in = int(rng.integers(1, 4))
    base = _shape(rng)
    if empty:  # a zero-size dim: reductions over empty dims, broadcasting against it
        base = tuple(0 if k == int(rng.integers(len(base))) else s for k, s in enumerate(base))
    inputs: dict = {}
    names = []
    for k in range(n_in):
        dtype = pick(rng, dtypes if smooth else ("float32", "float64") if grad else dtypes)
        shape = base if rng.random() < 0.6 else tuple(s if rng.random() < 0.6 else 1 for s in base)
        layout = pick(rng, layouts) if rng.random() < 0.5 else "contiguous"
        name = f"x{k}_g" if grad and rng.random() < 0.8 else f"x{k}"
        array = rng.uniform(0.3, 1.7, shape) * rng.choice([-1.0, 1.0], shape) if smooth else values(rng, dtype, shape)
        inputs[name] = (array, dtype, layout)
        names.append(name)
    env: dict = {"ember": ember, "F": ember.nn.functional, "np": np}
    for name, (a, d, lay) in inputs.items():
        env[name] = make_input(a, d, lay, requires_grad=grad and name.endswith("_g"))
    lines: list = []
    live = list(names)
    # inputs that may be written (never leaves that need grad; none for an exported graph)
    inplace_ok = [n for n in names if not n.endswith("_g")] if write_args else []
    n_stmt = int(rng.integers(2, 8))
    tries = 0
    while len(lines) < n_stmt and tries < 60:
        tries += 1
        a, b = pick(rng, live), pick(rng, live)
        s = pick(rng, SCALARS)
        kind = rng.random()
        new = f"t{len(lines)}"
        if kind < 0.28:
            stmt = f"{new} = " + pick(rng, UNARY).format(a=a)
        elif kind < 0.52:
            expr = pick(rng, BINARY)
            if rng.random() < 0.25:
                b = s if rng.random() < 0.5 else b
                a, b = (b, a) if rng.random() < 0.3 and b == s else (a, b)
            stmt = f"{new} = " + expr.format(a=a, b=b)
        elif kind < 0.64:
            stmt = f"{new} = " + pick(rng, REDUCE).format(a=a)
        elif kind < 0.78:
            stmt = f"{new} = " + pick(rng, VIEWS).format(a=a)
        elif kind < 0.92:
            target = a
            if target in names and target not in inplace_ok:
                continue
            stmt = pick(rng, INPLACE).format(a=target, b=b, s=s)
            if grad and rng.random() < 0.5:
                stmt = f"{new} = {a} * 1\n" + pick(rng, INPLACE).format(a=new, b=b, s=s)
        else:
            stmt = f"{new} = " + pick(rng, INDEX).format(a=a, b=b, s=s)
        if not _try(stmt, env):
            continue
        lines.append(stmt)
        if new in env and isinstance(env[new], ember.Tensor):
            live.append(new)
    outs = [v for v in live[len(names):] if rng.random() < 0.6] or live[-1:]
    if rng.random() < 0.3:
        outs.append(pick(rng, names))
    lines.append("out = " + ("(" + ", ".join(outs) + ",)" if len(outs) > 1 else outs[0]))
    return Program("\n".join(lines), inputs, grad=grad)


def compile_values(rng: np.random.Generator) -> Program:
    return _program(rng, grad=False)


def compile_grad(rng: np.random.Generator) -> Program:
    return _program(rng, grad=True)


GENERATORS: dict[str, Callable[[np.random.Generator], Any]] = {
    "compile_values": compile_values,
    "compile_grad": compile_grad,
}


# ---- whole training steps ---------------------------------------------------------------------------------
LAYERS = ["nn.Linear({i}, {o})", "nn.ReLU()", "nn.Tanh()", "nn.GELU()", "nn.LayerNorm({i})", "nn.BatchNorm1d({i})",
          "nn.Dropout(0.0)", "nn.Sigmoid()", "nn.LeakyReLU(0.2)", "nn.Linear({i}, {o}, bias=False)", "nn.SiLU()",
          "nn.Softplus()", "nn.ELU()"]
LOSSES = ["F.mse_loss(out, y)", "F.cross_entropy(out, y.argmax(-1))", "(out ** 2).sum()", "F.l1_loss(out, y)",
          "F.smooth_l1_loss(out, y, beta=0.5)", "F.huber_loss(out, y)", "(out - y).abs().mean() + out.logsumexp(-1).mean()",
          "F.binary_cross_entropy_with_logits(out, y.sigmoid())", "F.kl_div(out.log_softmax(-1), y.softmax(-1), reduction='batchmean')"]


def compile_train(rng: np.random.Generator) -> Any:
    """A small model (Linear/norm/activation layers), an optimizer with drawn options (trust_cases_nn's table),
    a loss; ``step`` zeroes the gradients, runs forward and backward and steps: compiled whole vs eager."""
    from trust_cases_nn import OPTIMIZERS
    from trust_compile_diff import TrainProgram

    width = int(rng.integers(2, 5))
    layers, size = [], width
    for j in range(int(rng.integers(1, 5))):
        text = pick(rng, LAYERS) if j else "nn.Linear({i}, {o})"  # a parameter to train, always
        out = int(rng.integers(2, 5)) if "Linear" in text else size
        layers.append(text.format(i=size, o=out))
        size = out
    name = pick(rng, [n for n in sorted(OPTIMIZERS) if n not in ("NAdam", "RAdam", "ASGD", "Rprop")] + ["SGD", "Adam"])
    kw = OPTIMIZERS[name](rng)
    if name == "SGD":
        kw["nesterov"] = bool(kw["momentum"] and not kw["dampening"] and rng.random() < 0.5)
    if name == "Adafactor":
        kw["d"] = 1.0  # ember's Adafactor refuses d < 1 (a clipping threshold)
    dtype = pick(rng, ["float32", "float64"])
    kwtext = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    setup = (f"model = nn.Sequential({', '.join(layers)}).to(ember.{dtype})\n"
             "with ember.no_grad():\n"
             "    for k, p in enumerate(model.parameters()):\n"
             "        p.copy_(ember.linspace(-1.0, 1.0, p.numel()).reshape(p.shape).to(p.dtype) * (0.7 + 0.1 * k))\n"
             f"opt = ember.optim.{name}(model.parameters(), {kwtext})")
    if rng.random() < 0.3:
        setup += "\nmodel.eval()" if "BatchNorm" not in "".join(layers) or rng.random() < 0.5 else ""
    loss = pick(rng, LOSSES)
    step = ("def step(x, y):\n"
            "    opt.zero_grad()\n"
            "    out = model(x)\n"
            f"    loss = {loss}\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "    return loss")
    batch = int(rng.integers(2, 5))
    same = rng.random() < 0.5
    x0 = rng.standard_normal((batch, width))
    batches = []
    for _ in range(int(rng.integers(3, 6))):
        x = x0 if same else rng.standard_normal((batch, width))
        batches.append((np.round(x, 2), np.round(rng.standard_normal((batch, size)), 2), dtype, dtype))
    return TrainProgram(setup, step, batches, dtype)


GENERATORS["compile_train"] = compile_train


# ---- ONNX export ------------------------------------------------------------------------------------------
ONNX_DTYPES = ("bool", "int32", "int64", "float32", "float64")


def onnx_values(rng: np.random.Generator) -> Program:
    """A program without writes into its arguments (an exported graph has none), float32/float64/int32/int64/bool
    inputs, contiguous; compared by ``trust_onnx_diff.compare_onnx``."""
    prog = _program(rng, grad=False, dtypes=ONNX_DTYPES, layouts=("contiguous",), write_args=False,
                    empty=rng.random() < 0.15)
    for k, (a, d, lay) in list(prog.inputs.items()):
        if d in ("int32", "int64"):  # integer overflow (a sum or pow past INT_MAX) is onnxruntime's own business
            prog.inputs[k] = (np.clip(a, -9, 9), d, lay)
    return prog


GENERATORS["onnx_values"] = onnx_values


def gradcheck_f64(rng: np.random.Generator) -> Program:
    """float64 programs (views, in-place writes into non-leaf copies, indexing, reductions) at smooth random
    points, for ``trust_compile_diff.compare_gradcheck``."""
    prog = _program(rng, grad=True, dtypes=("float64",), smooth=True)
    for k, (a, d, lay) in list(prog.inputs.items()):
        prog.inputs[k] = (a, "float64", lay)
    return prog


GENERATORS["gradcheck_f64"] = gradcheck_f64
