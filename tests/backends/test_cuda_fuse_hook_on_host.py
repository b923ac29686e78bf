"""The CuPy backend's fuse hook, end to end, with a host stand-in for ``cupy.ElementwiseKernel``.

``ember.backends.cuda.FusedCudaKernel`` is what a compiled graph calls on a GPU. Here its ``cupy`` is
replaced by a small namespace whose ``ElementwiseKernel`` compiles the generated body with g++
(``ember/backends/cuda_codegen_host.py``) and runs it on NumPy arrays, so the hook's own logic runs
for real: parsing, one kernel per input-dtype signature, the cache keyed by generated source, the
generic replay for signatures the generator cannot translate, and ``ember.compile`` using the
kernels inside a compiled function.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cuda_codegen, cuda_codegen_reduce as reduce, get_backend
from ember.backends.cuda_codegen import KernelSource, dtype_of
from ember.graph.passes.fuse import FusedKernel

host = pytest.importorskip("ember.backends.cuda_codegen_host")
cuda_backend = pytest.importorskip("ember.backends.cuda")

pytestmark = pytest.mark.skipif(host.compiler() is None, reason="no C++ compiler")


class _HostElementwiseKernel:
    built: list = []

    def __init__(self, in_params, out_params, body, name, preamble="", return_tuple=False, options=()):
        assert preamble == cuda_codegen.PREAMBLE and "--fmad=false" in options and return_tuple
        outs = [dtype_of(p.split()[0]) for p in out_params.split(",")]
        self.source = KernelSource(in_params, out_params, body, name, preamble, tuple(outs))
        self.lib = None

    def __call__(self, *arrays):
        if self.lib is None:
            self.lib = host.HostKernels([self.source])
            _HostElementwiseKernel.built.append(self.source.key)
        return self.lib.run(0, *arrays)


class _HostReductionKernel:
    """``cupy.ReductionKernel`` on the host: the generated map/post-map compiled by ``HostReductions``."""

    built: list = []

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, reduce_type=None,
                 reduce_dims=True, preamble="", options=()):
        assert preamble.startswith(cuda_codegen.PREAMBLE) and "--fmad=false" in options and reduce_expr == "a + b"
        self.parts = dict(in_params=in_params, out_params=out_params, map_expr=map_expr, reduce_expr=reduce_expr,
                          post_map_expr=post_map_expr, identity=identity, name=name, reduce_type=reduce_type,
                          preamble=preamble, out_dtype=dtype_of(out_params.split()[0]), kind="")

    def __call__(self, *arrays, axis=None, keepdims=False):
        source = reduce.ReductionSource(**self.parts, axis=axis, keepdims=keepdims)
        _HostReductionKernel.built.append(source.key)
        return host.HostReductions([source]).run(0, *arrays)


class _HostCupy:
    """CuPy's namespace on the host: NumPy's functions, and the host Elementwise/ReductionKernel."""

    ElementwiseKernel = _HostElementwiseKernel
    ReductionKernel = _HostReductionKernel

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture()
def hook(monkeypatch):
    monkeypatch.setattr(cuda_backend, "cupy", _HostCupy())
    monkeypatch.setattr(cuda_backend.FusedCudaKernel, "_CACHE", {})
    monkeypatch.setattr(cuda_backend.SingleReduction, "_CACHE", {})
    _HostElementwiseKernel.built, _HostReductionKernel.built = [], []
    return cuda_backend.CuPyBackend()


SOURCE = "# inputs: in0, in1\n# outputs: t3, t4\nt1 = multiply(in0, 1.5)\nt2 = tanh(t1)\nt3 = add(t2, in1)\n" \
         "t4 = maximum(t3, 0.0)"


def _generic(source):
    program = cuda_codegen.parse(source)
    return FusedKernel(cuda_codegen.fuser_steps(program), len(program.inputs), list(program.outputs), source, np)


def test_kernels_per_dtype_signature_cached_by_source(hook):
    kernel = hook.fuse(SOURCE, "fused")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64, np.float32):
        a, b = rng.standard_normal((3, 50)).astype(dtype), rng.standard_normal(50).astype(dtype)
        got = kernel(np, a, b)
        want = _generic(SOURCE)(np, a, b)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == dtype and g.shape == (3, 50)
            np.testing.assert_allclose(g, w, rtol=1e-6 if dtype == np.float32 else 1e-14)
    assert len(_HostElementwiseKernel.built) == 2  # float32 once (cached), float64 once
    again = hook.fuse(SOURCE, "fused")  # another node with the same math reuses the compiled kernel
    again(np, np.ones(4, np.float32), np.ones(4, np.float32))
    assert len(_HostElementwiseKernel.built) == 2


def test_untranslatable_signature_runs_the_generic_replay(hook):
    kernel = hook.fuse(SOURCE, "fused")
    a = np.array([1 + 2j, -1j], np.complex64)  # no CUDA translation for complex: the generic path
    got = kernel(np, a, a)
    want = _generic(SOURCE)(np, a, a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert _HostElementwiseKernel.built == []


@pytest.mark.parametrize("source, dtype", [
    ("# inputs: in0\n# outputs: t1, t3\nt1 = exp(in0)\nt2 = multiply(t1, 2.0)\n"
     "t3 = sum(t2, axis=None, keepdims=False)", np.float32),
    ("# inputs: in0\n# outputs: t3\nt1 = tanh(in0)\nt2 = multiply(t1, t1)\nt3 = mean(t2, axis=(1,), keepdims=True)",
     np.float64),
    ("# inputs: in0\n# outputs: t4\nt1 = multiply(in0, 0.5)\nt2 = add(t1, 1.0)\n"
     "t3 = sum(t2, axis=None, keepdims=False, dtype='float32')\nt4 = cast(t3, dtype='float16')", np.float16),
])
def test_groups_ending_in_a_reduction_run_one_kernel_and_one_reduction(hook, source, dtype):
    """Two launches (elementwise kernel + CuPy reduction) when the group has other results; one ReductionKernel
    (ember/backends/cuda_codegen_reduce.py) when the reduction is its only result."""
    kernel = hook.fuse(source, "fused")
    assert kernel is not None and kernel.tail
    x = np.random.default_rng(1).standard_normal((6, 40)).astype(dtype)
    got = kernel(np, x)
    want = _generic(source)(np, x)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3 if dtype == np.float16 else 1e-6)
    single = reduce.single_kernel(cuda_codegen.parse(source))
    assert (len(_HostElementwiseKernel.built), len(_HostReductionKernel.built)) == ((0, 1) if single else (1, 0))


def test_hostile_source_is_declined(hook):
    assert hook.fuse("# inputs: in0\n# outputs: t1\nt1 = exp(__import__)", "fused") is None
    assert hook.fuse("# inputs: in0\n# outputs: t1\nt1 = sum(in0, axis=None, keepdims=False)", "fused") is None


def test_compiled_function_runs_the_generated_kernels(hook, monkeypatch):
    """ember.compile with the CPU backend's hook swapped for the CUDA one: the compiled step's fused
    groups run as generated CUDA C (compiled for the host) and agree with eager."""
    cpu = get_backend("cpu")
    monkeypatch.setattr(cpu, "fuse", hook.fuse)

    def f(x, y):
        z = ember.tanh(x * 1.5 + y) * ember.sigmoid(y) - 0.25
        return z, (z * z).sum()

    x, y = ember.randn(64, 32), ember.randn(64, 32)
    compiled = ember.compile(f, fallback="raise")
    for _ in range(3):
        got = compiled(x, y)
    for g, w in zip(got, f(x, y)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    assert _HostElementwiseKernel.built, "the compiled function ran no generated kernel"
