"""One ReductionKernel for fused groups ending in sum/mean (ember/backends/cuda_codegen_reduce.py), checked without a
GPU: the fused kernels real compiled functions produce are recorded through the CPU backend's fuse hook (with
their inputs and the generic replay's outputs, which equal eager), the generated ReductionKernel C is compiled as
host C++ (``HostReductions``) and run on the same inputs. The host sums sequentially and NumPy pairwise, so
floats agree to rounding (a bound from the accumulator's precision and the count), integers exactly."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cuda_codegen, cuda_codegen_reduce as reduce, get_backend

host = pytest.importorskip("ember.backends.cuda_codegen_host")

FUNCTIONS = {
    "tanh(x*y).sum()": lambda x, y: ember.tanh(x * y).sum(),
    "(x-y)^2.mean()": lambda x, y: ((x - y) * (x - y)).mean(),
    "exp(x).sum(1)": lambda x, y: ember.exp(x * 0.5).sum(dim=1),
    "(x*y+1).mean(-1, keepdim)": lambda x, y: (x * y + 1.0).mean(dim=-1, keepdim=True),
    "relu(x-y).sum(0)": lambda x, y: ember.relu(x - y).sum(dim=0),
}


def record(fn, arrays: list) -> list:
    """(source, inputs, generic outputs) of the fused kernels of ``fn`` compiled on the CPU."""
    cpu, records = get_backend("cpu"), []
    saved = cpu.fuse

    def recorder(kernel, *rest):
        def run(xp, *inputs):
            out = kernel(xp, *inputs)
            records.append((kernel.source, [np.array(a, copy=True) for a in inputs], out))
            return out

        return run

    cpu.fuse = recorder
    try:
        compiled = ember.compile(fn, fallback="raise", measure=False)
        tensors = [ember.tensor(a) for a in arrays]
        for _ in range(3):
            compiled(*tensors)
    finally:
        cpu.fuse = saved
    return records


def _cases() -> list:
    rng = np.random.default_rng(0)
    cases = []
    for name, fn in FUNCTIONS.items():
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            np_dtype = ember.dtypes.to_dtype(dtype).np
            arrays = [rng.standard_normal((37, 53)).astype(np_dtype) for _ in range(2)]
            cases += [(name, dtype, source, inputs, out) for source, inputs, out in record(fn, arrays)]
    ints = [rng.integers(-50, 50, (41, 7)).astype(np.int32) for _ in range(2)]
    cases += [("int (x*y).sum()", "int32", s, i, o) for s, i, o in record(lambda x, y: (x * y).sum(), ints)]
    return cases


@pytest.fixture(scope="module")
def cases() -> list:
    if host.compiler() is None:
        pytest.skip("no C++ compiler to check the generated kernels on the host")
    return _cases()


def test_real_groups_ending_in_a_reduction_become_one_kernel(cases):
    single = [c for c in cases if reduce.single_kernel(cuda_codegen.parse(c[2]))]
    names = {c[0] for c in single}
    assert names == set(FUNCTIONS) | {"int (x*y).sum()"}, names  # every function: one fused group + reduction


def test_generated_reduction_c_matches_the_generic_replay(cases):
    chosen = [c for c in cases if reduce.single_kernel(cuda_codegen.parse(c[2]))]
    sources = [reduce.generate_reduction(cuda_codegen.parse(src), [a.dtype for a in ins]) for _, _, src, ins, _ in
               chosen]
    lib = host.HostReductions(sources)
    for k, ((name, dtype, _, inputs, want), source) in enumerate(zip(chosen, sources)):
        got = lib.run(k, *inputs)
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, (name, dtype, got.shape, want.shape, got.dtype)
        if want.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype}")
            continue
        count = max(int(np.prod(np.broadcast_shapes(*[a.shape for a in inputs]))) // max(want.size, 1), 1)
        accumulate = np.finfo(np.float64 if want.dtype == np.float64 else np.float32).eps * count
        stored = float(np.finfo(want.dtype).eps) if want.dtype.itemsize > 2 or dtype == "float16" else 2.0 ** -7
        magnitude = 1.0 + np.abs(want.astype(np.float64))
        err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / magnitude
        assert err.max() <= 4 * accumulate + stored, (name, dtype, err.max())


def test_the_source_is_what_cupy_takes():
    program = cuda_codegen.parse("# inputs: in0, in1\n# outputs: t4\nt1 = multiply(in0, in1)\nt2 = tanh(t1)\n"
                                 "t3 = mean(t2, axis=1, keepdims=True)\nt4 = cast(t3, dtype='float32')")
    source = reduce.generate_reduction(program, ["float16", "float16"])
    assert source.in_params == "float16 in0, float16 in1" and source.out_params == "float32 out0"
    assert source.reduce_type == "float" and source.reduce_expr == "a + b" and source.identity == "0"
    assert source.map_expr.startswith("ember_map_") and source.map_expr.endswith("(in0, in1)")
    assert "_in_ind.size() / _out_ind.size()" in source.post_map_expr  # mean: divide by the reduced count
    assert source.axis == 1 and source.keepdims is True
    assert f"inline float {source.map_expr.split('(')[0]}(const float16 in0, const float16 in1)" in source.preamble


def test_groups_with_other_results_keep_two_launches():
    both = cuda_codegen.parse("# inputs: in0\n# outputs: t1, t2\nt1 = exp(in0)\nt2 = sum(t1)")
    assert not reduce.single_kernel(both)
    with pytest.raises(cuda_codegen.UnsupportedKernel):
        reduce.generate_reduction(both, ["float32"])
    plain = cuda_codegen.parse("# inputs: in0\n# outputs: t1\nt1 = exp(in0)")
    assert not reduce.single_kernel(plain)
