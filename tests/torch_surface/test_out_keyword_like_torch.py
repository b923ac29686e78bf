"""PyTorch's ``out=`` keyword (ember/ops/out_arg.py), compared with torch 2.13 call by call.

Tutorials write ``torch.add(x, y, out=z1)`` (aladdinpersson's tensor basics); ember refused the keyword on
every function but a few factories. Checked here: the value written, the returned object (``out`` itself),
dtype rules (integer results into float outs; float results into integer outs refused; exact dtypes for
matrix products and multi-output functions; factories and reductions computing in ``out``'s dtype),
resizing (with PyTorch's warning when ``out`` had elements), tuple outs, and the autograd refusal.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import ember
from ember.ops import out_arg

torch = pytest.importorskip("torch")


def _data() -> dict:
    rng = np.random.default_rng(0)
    return {"a": rng.random((3, 4)).astype(np.float32) + 0.1, "b": rng.random((3, 4)).astype(np.float32) + 0.1,
            "m": rng.random((4, 5)).astype(np.float32), "i": np.array([0, 2]), "n": np.array([[3, 1, 2], [0, 5, 4]])}


# name -> (call(lib, a, b, m, i, n, out), out factory(lib)) ; the out starts with 0 elements unless stated
CASES = {
    "add": (lambda t, d, o: t.add(d["a"], d["b"], out=o), None),
    "add_alpha": (lambda t, d, o: t.add(d["a"], d["b"], alpha=2, out=o), None),
    "sub": (lambda t, d, o: t.sub(d["a"], d["b"], out=o), None),
    "mul": (lambda t, d, o: t.mul(d["a"], 3, out=o), None),
    "div": (lambda t, d, o: t.div(d["a"], d["b"], out=o), None),
    "div_floor": (lambda t, d, o: t.div(d["a"], d["b"], rounding_mode="floor", out=o), None),
    "true_divide": (lambda t, d, o: t.true_divide(d["n"], 2, out=o), None),
    "pow": (lambda t, d, o: t.pow(d["a"], 2, out=o), None),
    "exp": (lambda t, d, o: t.exp(d["a"], out=o), None),
    "log": (lambda t, d, o: t.log(d["a"], out=o), None),
    "sqrt": (lambda t, d, o: t.sqrt(d["a"], out=o), None),
    "sigmoid": (lambda t, d, o: t.sigmoid(d["a"], out=o), None),
    "tanh": (lambda t, d, o: t.tanh(d["a"], out=o), None),
    "neg": (lambda t, d, o: t.neg(d["a"], out=o), None),
    "abs": (lambda t, d, o: t.abs(d["n"] - 2, out=o), lambda t: t.empty(0, dtype=t.long)),
    "clamp": (lambda t, d, o: t.clamp(d["a"], 0.3, 0.6, out=o), None),
    "where": (lambda t, d, o: t.where(d["a"] > 0.5, d["a"], d["b"], out=o), None),
    "maximum": (lambda t, d, o: t.maximum(d["a"], d["b"], out=o), None),
    "remainder": (lambda t, d, o: t.remainder(d["a"], 0.3, out=o), None),
    "lerp": (lambda t, d, o: t.lerp(d["a"], d["b"], 0.25, out=o), None),
    "addcmul": (lambda t, d, o: t.addcmul(d["a"], d["a"], d["b"], value=0.5, out=o), None),
    "eq_into_float": (lambda t, d, o: t.eq(d["a"], d["a"] * (d["b"] > 0.5), out=o), None),
    "gt_bool": (lambda t, d, o: t.gt(d["a"], d["b"], out=o), lambda t: t.empty(0, dtype=t.bool)),
    "matmul": (lambda t, d, o: t.matmul(d["a"], d["m"], out=o), None),
    "mm": (lambda t, d, o: t.mm(d["a"], d["m"], out=o), None),
    "bmm": (lambda t, d, o: t.bmm(d["a"][None], d["m"][None], out=o), None),
    "addmm": (lambda t, d, o: t.addmm(d["a"][:, :1], d["a"], d["m"], out=o), None),
    "mv": (lambda t, d, o: t.mv(d["a"], d["m"][:, 0], out=o), None),
    "dot": (lambda t, d, o: t.dot(d["a"][0], d["b"][0], out=o), None),
    "outer": (lambda t, d, o: t.outer(d["a"][0], d["b"][0], out=o), None),
    "cat": (lambda t, d, o: t.cat([d["a"], d["b"]], dim=1, out=o), None),
    "stack": (lambda t, d, o: t.stack([d["a"], d["b"]], out=o), None),
    "hstack": (lambda t, d, o: t.hstack([d["a"], d["b"]], out=o), None),
    "sum": (lambda t, d, o: t.sum(d["a"], 0, out=o), None),
    "sum_int_into_double": (lambda t, d, o: t.sum(d["n"], 1, out=o), lambda t: t.empty(0, dtype=t.float64)),
    "mean_into_double": (lambda t, d, o: t.mean(d["a"], 1, out=o), lambda t: t.empty(0, dtype=t.float64)),
    "prod": (lambda t, d, o: t.prod(d["a"], 1, out=o), None),
    "cumsum": (lambda t, d, o: t.cumsum(d["a"], 1, out=o), None),
    "logsumexp": (lambda t, d, o: t.logsumexp(d["a"], 1, out=o), None),
    "std": (lambda t, d, o: t.std(d["a"], 1, out=o), None),
    "argmax": (lambda t, d, o: t.argmax(d["a"], 1, out=o), lambda t: t.empty(0, dtype=t.long)),
    "index_select": (lambda t, d, o: t.index_select(d["a"], 0, d["i"], out=o), None),
    "gather": (lambda t, d, o: t.gather(d["a"], 0, d["i"][None], out=o), None),
    "masked_select": (lambda t, d, o: t.masked_select(d["a"], d["a"] > 0.5, out=o), None),
    "nonzero": (lambda t, d, o: t.nonzero(d["a"] > 0.5, out=o), lambda t: t.empty(0, dtype=t.long)),
    "tril": (lambda t, d, o: t.tril(d["a"], out=o), None),
    "arange_into_float": (lambda t, d, o: t.arange(5, out=o), None),
    "arange_into_long": (lambda t, d, o: t.arange(5, out=o), lambda t: t.empty(0, dtype=t.long)),
    "linspace_into_long": (lambda t, d, o: t.linspace(0, 4, 5, out=o), lambda t: t.empty(0, dtype=t.long)),
    "full_into_long": (lambda t, d, o: t.full((3,), 2.5, out=o), lambda t: t.empty(0, dtype=t.long)),
    "eye": (lambda t, d, o: t.eye(3, out=o), None),
    "special_expit": (lambda t, d, o: t.special.expit(d["a"], out=o), None),
    "special_logit": (lambda t, d, o: t.special.logit(d["a"] * 0.5, out=o), None),
    "linalg_vector_norm": (lambda t, d, o: t.linalg.vector_norm(d["a"], dim=1, out=o), None),
    "linalg_inv": (lambda t, d, o: t.linalg.inv(d["a"][:, :3] + 3 * t.eye(3), out=o), None),
}


def _lib_data(lib) -> dict:
    return {k: lib.tensor(v) for k, v in _data().items()}


def _call(lib, name: str, out_shape: tuple = (0,)) -> tuple:
    call, make = CASES[name]
    out = make(lib) if make else lib.empty(0)
    if out_shape != (0,):
        out = lib.empty(out_shape, dtype=out.dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        returned = call(lib, _lib_data(lib), out)
    return out, returned, [str(w.message) for w in caught if "resized" in str(w.message)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_value_dtype_and_identity_like_torch(name: str) -> None:
    t_out, t_ret, _ = _call(torch, name)
    e_out, e_ret, _ = _call(ember, name)
    assert e_ret is e_out and t_ret is t_out
    assert str(e_out.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1]
    assert tuple(e_out.shape) == tuple(t_out.shape)
    np.testing.assert_allclose(e_out.double().numpy(), t_out.double().numpy(), rtol=2e-6, atol=1e-7)


def test_out_with_elements_is_resized_with_torchs_warning() -> None:
    _, _, t_warn = _call(torch, "add", out_shape=(5,))
    e_out, _, e_warn = _call(ember, "add", out_shape=(5,))
    assert tuple(e_out.shape) == (3, 4)
    assert len(t_warn) == len(e_warn) == 1
    assert t_warn[0].startswith(e_warn[0][:150])
    _, _, none = _call(ember, "add", out_shape=(3, 4))
    assert none == []


@pytest.mark.parametrize("case", ["float_into_long", "float_into_bool", "matmul_into_double", "max_indices_float",
                                  "grad_input", "grad_out", "out_not_tensor"])
def test_out_errors_like_torch(case: str) -> None:
    def run(lib):
        d = _lib_data(lib)
        if case == "float_into_long":
            return lib.add(d["a"], d["b"], out=lib.empty(0, dtype=lib.long))
        if case == "float_into_bool":
            return lib.exp(d["a"], out=lib.empty(0, dtype=lib.bool))
        if case == "matmul_into_double":
            return lib.mm(d["a"], d["m"], out=lib.empty(0, dtype=lib.float64))
        if case == "max_indices_float":
            return lib.max(d["a"], 0, out=(lib.empty(0), lib.empty(0)))
        if case == "grad_input":
            return lib.mul(d["a"].requires_grad_(), 2, out=lib.empty(0))
        if case == "grad_out":
            return lib.add(d["a"], d["b"], out=lib.empty(3, 4, requires_grad=True))
        return lib.add(d["a"], d["b"], out=[lib.empty(0)])

    errors = []
    for lib in (torch, ember):
        with pytest.raises((RuntimeError, TypeError)) as info:
            run(lib)
        errors.append((info.type, str(info.value)))
    assert errors[0][0] is errors[1][0]
    assert errors[1][1].startswith(errors[0][1].split(" (Triggered")[0][:60]) or errors[0][1] in errors[1][1]


def test_out_allowed_under_no_grad_and_aliasing_an_input() -> None:
    for lib in (torch, ember):
        d = _lib_data(lib)
        a = d["a"].requires_grad_()
        with lib.no_grad():
            o = lib.mul(a, 2, out=lib.empty(0))
        assert not o.requires_grad
        x = d["b"].clone()
        assert lib.add(x, 1, out=x) is x
    np.testing.assert_allclose(x.numpy(), _data()["b"] + 1, rtol=1e-6)


@pytest.mark.parametrize("fn", ["max", "min", "sort", "topk", "cummax", "kthvalue"])
def test_tuple_outs_like_torch(fn: str) -> None:
    results = []
    for lib in (torch, ember):
        d = _lib_data(lib)
        outs = (lib.empty(0), lib.empty(0, dtype=lib.long))
        call = {"max": lambda: lib.max(d["a"], 1, out=outs), "min": lambda: lib.min(d["a"], 1, out=outs),
                "sort": lambda: lib.sort(d["a"], 1, out=outs), "topk": lambda: lib.topk(d["a"], 2, out=outs),
                "cummax": lambda: lib.cummax(d["a"], 1, out=outs),
                "kthvalue": lambda: lib.kthvalue(d["a"], 2, 1, out=outs)}[fn]
        r = call()
        assert r[0] is outs[0] and r[1] is outs[1] and r.values is outs[0] and r.indices is outs[1]
        results.append((outs[0].numpy().copy(), outs[1].numpy().copy()))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])


def test_every_listed_function_takes_out_in_torch_and_in_ember() -> None:
    """The table is torch's: each listed name accepts out= there; each one ember has accepts it too."""
    missing_in_ember = []
    for ns, names in out_arg.OUT_FUNCTIONS.items():
        t_mod = torch if ns == "torch" else getattr(torch, ns)
        e_mod = ember if ns == "torch" else getattr(ember, ns)
        for name in names:
            with pytest.raises(TypeError) as info:
                _probe_out(getattr(t_mod, name))
            assert "unexpected keyword argument 'out'" not in str(info.value), f"torch.{ns}.{name}"
            fn = getattr(e_mod, name, None)
            if fn is None:
                missing_in_ember.append(f"{ns}.{name}")
                continue
            assert "out" in inspect.signature(fn).parameters, f"ember {ns}.{name} lacks out="
    assert len(missing_in_ember) < 40, missing_in_ember  # names ember lacks altogether (api_coverage lists them)


def _probe_out(fn) -> None:
    """Call ``fn`` with a non-tensor out: torch's parser names 'out' when it is an argument."""
    last = None
    for k in range(5):
        try:
            fn(*([torch.ones(2, 2)] * k), out=object())
        except TypeError as e:
            if "unexpected keyword argument 'out'" in str(e) or "argument 'out'" in str(e) or "out = None" in str(e) \
                    or "Tensor out" in str(e) or "Tensors out" in str(e):
                raise
            last = e
        except Exception:  # noqa: BLE001 - wrong arguments for this function; try more tensors
            continue
    if last is not None:
        raise TypeError("out accepted: " + str(last))
    raise TypeError("out accepted")


def test_resize_grows_and_shrinks_like_torch() -> None:
    for lib in (torch, ember):
        x = lib.arange(6, dtype=lib.float32)
        x.resize_(2, 2)
        assert x.tolist() == [[0.0, 1.0], [2.0, 3.0]]
        x.resize_(0)
        assert x.numel() == 0
        y = lib.arange(4, dtype=lib.float32)
        y.resize_(2, 3)
        assert y.flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0] and tuple(y.shape) == (2, 3)
