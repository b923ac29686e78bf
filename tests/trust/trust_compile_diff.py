"""Differential runner for the fifth wave: a program run eagerly and through ``ember.compile``, compared.

A :class:`Program` is the body of a function ``f(x0, x1, ...)`` that leaves its result in ``out``, plus
its inputs (NumPy arrays with a dtype name and a layout: contiguous, transposed, strided or offset). The
runner builds fresh inputs for every call and runs

* eager: ``f`` itself, ``calls`` times;
* compiled: ``ember.compile(f, measure=False)`` (no speed trial, so the graph really runs), ``calls``
  times: the first call warms up eagerly, the second traces and runs the graph, later ones reuse it.

Each call is normalized (``trust_diff.normalize``) with everything a program can observe: the results
(dtype, shape, values, signs of zeros), whether a result *is* one of the inputs, every input after the
call (in-place side effects, also through non-contiguous inputs) and, with ``grad=True``, the inputs'
gradients of a fixed weighting of the floating results. Errors: where eager raises, compiled must raise.

Tolerance: ember promises a compiled graph equals eager bit for bit on the NumPy path
(docs/architecture.md, "Fusion has no second copy of the math"); a fused Numba loop may differ by libm's
last bits (``tanh``/``exp``), so floats compare within a few ulps (``RTOL``) and everything else exactly.

Example:
    >>> compare(Program("out = x0.exp() + 1", {"x0": (np.ones(3), "float32", "contiguous")}))  # None
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import numpy as np

import ember
from trust_diff import Case, diff, normalize

RTOL = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 4e-7, "float64": 1e-15, "complex64": 4e-7,
        "complex128": 1e-15}
LAYOUTS = ("contiguous", "transposed", "strided", "offset")


@dataclasses.dataclass
class Program:
    """``body`` of ``f(*inputs)`` leaving ``out``; ``inputs``: name -> (array, dtype name, layout)."""

    body: str
    inputs: dict = dataclasses.field(default_factory=dict)
    grad: bool = False      # inputs named ``*_g`` require grad; compare their gradients
    no_grad: bool = False   # run every call under ``ember.no_grad()``
    calls: int = 3

    def source(self) -> str:
        args = ", ".join(self.inputs)
        body = "\n".join("    " + line for line in self.body.splitlines())
        return f"def f({args}):\n{body}\n    return out\n"

    def __str__(self) -> str:
        shapes = ", ".join(f"{k}: {v[1]}{list(np.shape(v[0]))} {v[2]}" for k, v in self.inputs.items())
        return f"\n{self.source()}with {shapes or 'no inputs'}"


def make_input(array: np.ndarray, dtype: str, layout: str, requires_grad: bool = False) -> ember.Tensor:
    """A tensor holding ``array``'s values in ``dtype`` with the given memory layout (values are the same)."""
    array = np.asarray(array)
    with np.errstate(over="ignore", invalid="ignore"):
        plain = array.astype(np.float32) if dtype == "bfloat16" else array.astype(dtype)
    edtype = getattr(ember, dtype)
    if layout == "transposed" and plain.ndim >= 2:
        t = ember.tensor(np.ascontiguousarray(np.swapaxes(plain, 0, -1))).to(edtype).transpose(0, -1)
    elif layout == "strided" and plain.ndim >= 1:
        wide = np.repeat(plain, 2, axis=-1)  # every second element is the value, the rest its copy
        t = ember.tensor(wide).to(edtype)[..., ::2]
    elif layout == "offset":
        flat = np.concatenate([np.zeros(3, dtype=plain.dtype), plain.reshape(-1)])
        t = ember.tensor(flat).to(edtype)[3:].view(plain.shape)
    else:
        t = ember.tensor(plain).to(edtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _inputs(prog: Program) -> dict:
    return {k: make_input(a, d, lay, requires_grad=prog.grad and k.endswith("_g"))
            for k, (a, d, lay) in prog.inputs.items()}


def _floats(value: Any) -> list:
    if isinstance(value, ember.Tensor):
        return [value] if value.requires_grad and value.dtype.is_floating_point else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _floats(v)]
    return []


def _backward(out: Any, inputs: dict) -> dict:
    total = None
    for t in _floats(out):
        w = 1.0 + 0.25 * (np.arange(t.numel(), dtype=np.float64).reshape(tuple(t.shape)) % 7)
        term = (t * ember.tensor(w, dtype=t.dtype)).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()
    return {k: (None if v.grad is None else normalize(ember, v.grad)) for k, v in inputs.items() if k.endswith("_g")}


def _identity(out: Any, inputs: dict) -> Any:
    """Which results are the input objects themselves (``return x`` after ``x.add_(1)``)."""
    names = {id(v): k for k, v in inputs.items()}
    if isinstance(out, ember.Tensor):
        return names.get(id(out))
    if isinstance(out, (tuple, list)):
        return tuple(_identity(o, inputs) for o in out)
    return None


def run_calls(prog: Program, fn: Callable) -> list:
    """One outcome per call: ("ok", out, inputs after, grads, identity) or ("raise", class, message)."""
    results = []
    for _ in range(prog.calls):
        inputs = _inputs(prog)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if prog.no_grad:
                    with ember.no_grad():
                        out = fn(**inputs)
                else:
                    out = fn(**inputs)
                grads = _backward(out, inputs) if prog.grad else None
        except Exception as error:  # noqa: BLE001 - any error: the other run must raise too
            results.append(("raise", type(error).__name__, str(error).split("\n")[0][:200]))
            continue
        results.append(("ok", normalize(ember, out), {k: normalize(ember, v) for k, v in inputs.items()}, grads,
                        _identity(out, inputs)))
    return results


def _function(prog: Program) -> Callable:
    env: dict = {"ember": ember, "L": ember, "np": np, "F": ember.nn.functional}
    exec(compile(prog.source(), "<program>", "exec"), env)  # noqa: S102 - the fuzzer's own generated code
    return env["f"]


def compare_outcomes(got: tuple, want: tuple, grad: bool, where: str) -> str | None:
    """The first difference of a compiled call's outcome from the eager one, or None."""
    if want[0] == "raise" or got[0] == "raise":
        if got[0] == want[0]:
            return None
        if want[0] == "raise":
            return f"{where}: eager raises {want[1]}: {want[2]}; compiled returns"
        return f"{where}: compiled raises {got[1]}: {got[2]}; eager returns"
    case = Case("", rtol=None)
    found = _diff(got[1], want[1], f"{where} out")
    if found:
        return found
    if got[4] != want[4]:
        return f"{where}: result identity: compiled {got[4]!r}, eager {want[4]!r} (a result that is an input)"
    for name in want[2]:
        found = _diff(got[2][name], want[2][name], f"{where} input {name} after the call")
        if found:
            return found
    if grad:
        for name, w in want[3].items():
            g = got[3].get(name)
            if (g is None) != (w is None):
                return f"{where} grad of {name}: compiled {'None' if g is None else 'set'}, eager {'None' if w is None else 'set'}"
            if w is not None:
                found = _diff(g, w, f"{where} grad of {name}", zero_sign=False)
                if found:
                    return found
    del case
    return None


def _diff(got: Any, want: Any, where: str, zero_sign: bool = True) -> str | None:
    """trust_diff's comparison with this wave's tolerances (a few ulps, not torch-vs-ember ones)."""
    if want[0] == "T" and got[0] == "T" and want[1] in RTOL:
        case = Case("", rtol=RTOL[want[1]], zero_sign=zero_sign, floor=1.0)
    else:
        case = Case("", zero_sign=zero_sign)
    return diff(got, want, case, where).replace("torch", "eager").replace("ember", "compiled") \
        if diff(got, want, case, where) else None


def compare(prog: Program, passes: Any = None, saved: bool = True) -> str | None:
    """None when every compiled call agrees with eager on ``prog``, else the first difference. With ``saved``,
    the traced graph is also saved (``CompiledFunction.save``), loaded (``ember.graph.load``) and run."""
    eager = run_calls(prog, _function(prog))
    if eager and eager[0][0] == "raise" and eager[0][1] in ("NameError", "SyntaxError"):
        raise AssertionError(f"the program itself is broken ({eager[0][1]}: {eager[0][2]}): {prog}")
    compiled_fn = ember.compile(_function(prog), measure=False, passes=passes)
    compiled = run_calls(prog, compiled_fn)
    for k, (g, w) in enumerate(zip(compiled, eager)):
        found = compare_outcomes(g, w, prog.grad, f"call {k + 1}")
        if found:
            return found
    if saved and not prog.grad and eager[-1][0] == "ok":
        return _compare_saved(prog, compiled_fn, eager[-1])
    return None


def _flat(norm: Any) -> list:
    """The tensors of a normalized result, in order."""
    if norm[0] == "T":
        return [norm]
    if norm[0] == "seq":
        return [t for item in norm[1] for t in _flat(item)]
    return []


def _compare_saved(prog: Program, compiled_fn: Any, want: tuple) -> str | None:
    """The compiled function's graph saved and loaded again gives eager's results on fresh inputs."""
    import tempfile

    from ember.graph.compile import _Compiled

    entry = compiled_fn.last
    if type(entry) is not _Compiled:
        return None  # ran eagerly (a fallback): nothing was traced
    with tempfile.TemporaryDirectory() as tmp:
        try:
            compiled_fn.save(f"{tmp}/g")
        except RuntimeError as error:
            if "in place" in str(error):
                return None  # a graph that writes into its arguments is refused, by design
            raise
        loaded = ember.graph.load(f"{tmp}/g")
        inputs = _inputs(prog)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = loaded(*inputs.values())
    wants = _flat(want[1])
    if len(got) != len(wants):
        return f"loaded graph: {len(got)} outputs, eager {len(wants)} tensors"
    for k, (g, w) in enumerate(zip(got, wants)):
        found = _diff(normalize(ember, g), w, f"loaded graph output {k}")
        if found:
            return found
    return None


# ---- whole training steps ---------------------------------------------------------------------------------
@dataclasses.dataclass
class TrainProgram:
    """``setup`` builds ``model``, ``opt`` (and anything else) from fixed formulas; ``step(x, y)`` is one
    training step that returns the loss. ``batches``: the (x, y) arrays of each step, with dtype names."""

    setup: str
    step: str
    batches: list
    dtype: str = "float32"

    def __str__(self) -> str:
        return f"\n{self.setup}\n{self.step}\nwith {len(self.batches)} batches of x {np.shape(self.batches[0][0])}"


def _train_env(prog: TrainProgram) -> dict:
    env: dict = {"ember": ember, "L": ember, "np": np, "F": ember.nn.functional, "nn": ember.nn}
    exec(compile(prog.setup + "\n" + prog.step, "<train program>", "exec"), env)  # noqa: S102 - generated code
    return env


def _train_state(env: dict) -> dict:
    model, opt = env["model"], env["opt"]
    state = {f"param {k}": normalize(ember, v) for k, v in model.state_dict().items()}
    state.update({f"grad {k}": normalize(ember, p.grad) for k, p in model.named_parameters() if p.grad is not None})
    for i, (p, st) in enumerate(opt.state.items()):
        for name, value in st.items():
            if isinstance(value, ember.Tensor):
                state[f"opt state {i}.{name}"] = normalize(ember, value)
    return state


def compare_train(prog: TrainProgram) -> str | None:
    """None when every compiled step gives eager's loss, parameters, buffers, gradients and optimizer state."""
    eager_env, compiled_env = _train_env(prog), _train_env(prog)
    step = ember.compile(compiled_env["step"], measure=False)
    for k, (x, y, xd, yd) in enumerate(prog.batches):
        outs = []
        for env, fn in ((eager_env, eager_env["step"]), (compiled_env, step)):
            xs, ys = make_input(x, xd, "contiguous"), make_input(y, yd, "contiguous")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outs.append(("ok", normalize(ember, fn(xs, ys)), _train_state(env)))
            except Exception as error:  # noqa: BLE001 - both must raise alike
                outs.append(("raise", type(error).__name__, str(error)[:200]))
        got, want = outs[1], outs[0]
        if got[0] != want[0]:
            return f"step {k + 1}: compiled {got[0]} {got[1:]!r:.200}, eager {want[0]} {want[1:]!r:.200}"
        if want[0] == "raise":
            return None
        found = _diff(got[1], want[1], f"step {k + 1} loss")
        if found:
            return found
        if set(got[2]) != set(want[2]):
            return f"step {k + 1}: state entries differ: compiled {sorted(got[2])}, eager {sorted(want[2])}"
        for name in want[2]:
            found = _diff(got[2][name], want[2][name], f"step {k + 1} {name}", zero_sign=not name.startswith("grad"))
            if found:
                return found
    return None


# ---- gradcheck: eager gradients against central differences in float64 --------------------------------------
def _weighted_total(out: Any, counted: list) -> float:
    """_backward's weighting of the results that carried gradients (``counted``: their positions)."""
    total = 0.0
    for k, t in enumerate(out if isinstance(out, (tuple, list)) else (out,)):
        if k in counted and isinstance(t, ember.Tensor) and t.dtype.is_floating_point:
            w = 1.0 + 0.25 * (np.arange(t.numel(), dtype=np.float64).reshape(tuple(t.shape)) % 7)
            total += float((t.detach().to(ember.float64).numpy() * w).sum())
    return total


def compare_gradcheck(prog: Program, h: float = 1e-6, max_elements: int = 48) -> str | None:
    """None when the gradients of a float64 program (views, in-place writes and all) match central differences
    of its own forward; programs whose value is not finite, or not smooth at the point, are skipped."""
    if any(cast in prog.body for cast in (".float()", ".half()", "bfloat16", "float32", ".int()", ".long()", "uint8")):
        return None  # a rounding cast's gradient is 1 by convention (straight through); differences see 0
    fn = _function(prog)
    grads_of = [k for k in prog.inputs if k.endswith("_g")]
    base = {k: np.array(v[0], dtype=np.float64) for k, v in prog.inputs.items()}

    def value(arrays: dict) -> float:
        inputs = {k: make_input(arrays[k], prog.inputs[k][1], prog.inputs[k][2]) for k in arrays}
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            with ember.no_grad():
                return _weighted_total(fn(**inputs), counted)

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            inputs = _inputs(prog)
            out = fn(**inputs)
            flat = out if isinstance(out, (tuple, list)) else (out,)
            # float64 results that carry gradients (a float32 one rounds away what differences of 1e-6 see)
            counted = [k for k, t in enumerate(flat)
                       if isinstance(t, ember.Tensor) and t.requires_grad and t.dtype is ember.float64]
            if not counted:
                return None
            total = None
            for k in counted:
                w = 1.0 + 0.25 * (np.arange(flat[k].numel(), dtype=np.float64).reshape(tuple(flat[k].shape)) % 7)
                term = (flat[k] * ember.tensor(w)).sum()
                total = term if total is None else total + term
            total.backward()
        grads = {k: inputs[k].grad for k in grads_of}
        f0 = value(base)
    except Exception:  # noqa: BLE001 - a program that does not run: nothing to check
        return None
    if not np.isfinite(f0) or abs(f0) > 1e8:  # huge values: differences lose every digit
        return None
    checked = 0
    for name in grads_of:
        g = grads[name]
        analytic = np.zeros_like(base[name]) if g is None else g.numpy().astype(np.float64)
        for idx in np.ndindex(base[name].shape):
            if checked >= max_elements:
                return None
            checked += 1
            plus, minus = dict(base), dict(base)
            plus[name], minus[name] = base[name].copy(), base[name].copy()
            plus[name][idx] += h
            minus[name][idx] -= h
            fp, fm = value(plus), value(minus)
            if not (np.isfinite(fp) and np.isfinite(fm)):
                continue
            numeric = (fp - fm) / (2 * h)
            # a kink or jump inside [x - h, x + h] (relu at 0, floor, sort order): one-sided slopes disagree
            one_sided = (fp - f0) / h, (f0 - fm) / h
            if abs(one_sided[0] - one_sided[1]) > 1e-3 * (1 + abs(numeric)):
                continue
            if not abs(analytic[idx] - numeric) <= 1e-5 * (1 + abs(numeric)):
                return (f"grad of {name}{list(idx)}: autograd {analytic[idx]!r}, central difference {numeric!r} "
                        f"(value {f0!r})")
    return None
