"""One ``cupy.ReductionKernel`` for a fused group that ends in ``sum``/``mean`` (issue 9, item 4).

:func:`ember.backends.cuda_codegen.split_reduction` splits such a group into an elementwise head and a
reduction tail; run as an ElementwiseKernel plus a CuPy reduction it costs two launches and writes the
reduction's operand to memory in between. When the group's only result is the reduction (then casts),
:func:`generate_reduction` writes a single ReductionKernel instead: the head's body becomes a device
function ``ember_map_<key>(inputs...)`` in the preamble (the map expression), ``a + b`` reduces in the
accumulator type NumPy's reduction uses, and the post-map divides by the count for ``mean`` and
applies the tail's casts. Called with the group's ``axis``/``keepdims``; one launch, no operand array.

Accumulator types follow NumPy: float16/bfloat16/float32 accumulate in float (NumPy's pairwise sum of
16-bit floats runs in float too), float64 in double, integers and bool in the 64-bit type NumPy's sum
returns; ``mean`` of integers accumulates and divides in double. The summation order differs from
NumPy's pairwise order (CuPy's tree), so results agree to rounding, not bit for bit.

Checked without a GPU as the elementwise kernels are: the generated C compiled as host C++
(:mod:`cuda_codegen_host`, ``HostReductions``) and compared with the fuser's generic replay.

Example:
    >>> from ember.backends import cuda_codegen
    >>> p = cuda_codegen.parse("# inputs: in0\\n# outputs: t2\\nt1 = multiply(in0, in0)\\nt2 = sum(t1)")
    >>> source = generate_reduction(p, ["float32"])
    >>> source.map_expr.startswith("ember_map_"), source.reduce_type, source.post_map_expr
    (True, 'float', 'out0 = (float)(a)')
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ember.backends.cuda_codegen import (_HALF, PREAMBLE, Program, UnsupportedKernel, _c, _name, dtype_of, generate,
                                         split_reduction)


@dataclass(frozen=True)
class ReductionSource:
    """What ``cupy.ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
    name, reduce_type=..., preamble=...)`` takes, plus how to call it (``axis``, ``keepdims``)."""

    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str
    name: str
    reduce_type: str
    preamble: str
    out_dtype: np.dtype
    kind: str  # "sum" or "mean"
    axis: Any
    keepdims: bool

    @property
    def key(self) -> str:
        text = "\0".join((self.in_params, self.out_params, self.map_expr, self.post_map_expr, self.reduce_type,
                          self.preamble))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def single_kernel(program: Program) -> bool:
    """Whether a group can be one ReductionKernel: a trailing sum/mean (then casts) is its only result."""
    try:
        head, tail = split_reduction(program)
    except UnsupportedKernel:
        return False
    return bool(tail) and len(head.outputs) == 1 and len(program.outputs) == 1 and program.outputs[0] == tail[-1].name


def _accumulator(kind: str, operand: np.dtype, result: np.dtype) -> np.dtype:
    """NumPy's accumulation dtype for ``sum``/``mean`` of ``operand`` giving ``result``."""
    if operand.kind in "biu":
        return np.dtype(np.float64) if kind == "mean" else result
    if _name(operand) in _HALF or operand == np.float32:
        return np.dtype(np.float32) if result != np.float64 else result
    return result


def generate_reduction(program: Program, input_dtypes: Sequence[Any], name: str = "ember_fused_reduce") -> ReductionSource:
    """The ReductionKernel for ``program`` (see the module docstring); UnsupportedKernel when it is not one
    reduction of a fused head, or a dtype or keyword has no translation (the caller runs two launches)."""
    if not single_kernel(program):
        raise UnsupportedKernel("the group's results are not one trailing reduction")
    head, tail = split_reduction(program)
    elementwise = generate(head, input_dtypes)
    operand = np.dtype(elementwise.out_dtypes[0])
    reduction = tail[0]
    kwargs = dict(reduction.kwargs)
    if set(kwargs) - {"axis", "keepdims", "dtype"}:
        raise UnsupportedKernel(f"{reduction.fn} keyword(s) {sorted(set(kwargs) - {'axis', 'keepdims', 'dtype'})}")
    requested = dtype_of(kwargs["dtype"]) if kwargs.get("dtype") is not None else None
    witness = np.zeros(1, operand)
    result = np.dtype(getattr(np, reduction.fn)(witness, dtype=requested).dtype)
    accumulator = _accumulator(reduction.fn, operand, result)
    acc = _c(accumulator)
    chain = "a" if reduction.fn == "sum" else f"a / ({acc})(_in_ind.size() / _out_ind.size())"
    final = result
    chain = f"({_c(result)})({chain})"
    for step in tail[1:]:
        final = dtype_of(dict(step.kwargs)["dtype"])
        _name(final)
        chain = f"({_c(final)})({'(float)' if _name(result) in _HALF else ''}{chain})"  # 16-bit: through float
        result = final
    in_names = [p.split()[1] for p in elementwise.in_params.split(",") if p.strip()]
    ins = [p.strip() for p in elementwise.in_params.split(",") if p.strip()]
    key = hashlib.sha256((elementwise.body + elementwise.in_params).encode()).hexdigest()[:12]
    function = f"ember_map_{key}"
    params = ", ".join(f"const {_c(dtype_of(p.split()[0]))} {p.split()[1]}" for p in ins)
    widen = "(float)" if _name(operand) in _HALF else ""
    body = "\n".join(["EMBER_DEVICE inline " + acc + f" {function}({params}) {{",
                      f"  {_c(operand)} out0;",
                      *("  " + line for line in elementwise.body.splitlines()),
                      f"  return ({acc})({widen}out0);", "}"])
    return ReductionSource(
        in_params=elementwise.in_params, out_params=f"{_name(final)} out0",
        map_expr=f"{function}({', '.join(in_names)})", reduce_expr="a + b",
        post_map_expr=f"out0 = {chain}", identity="0", name=name, reduce_type=acc,
        preamble=PREAMBLE + "\n" + body + "\n", out_dtype=final, kind=reduction.fn,
        axis=kwargs.get("axis"), keepdims=bool(kwargs.get("keepdims", False)))
