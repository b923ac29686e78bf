"""Compile every generated CUDA kernel with NVRTC, without a GPU.

The fused-kernel bodies (every kernel the op-spec table's compiled functions produce, on float16,
bfloat16, float32, float64 and integer dtypes; see tests/backends/test_cuda_codegen.py) and the
Philox random-number bodies are wrapped the way ``cupy.ElementwiseKernel`` wraps them (CuPy's
``carray.cuh``/``float16.cuh``/``bfloat16.cuh`` headers, the element as a scalar named like the
parameter) and compiled to PTX for sm_90 with CuPy's NVRTC bindings and CuPy's own compile options
(``--fmad=false`` as the backend passes). NVRTC needs no GPU, so this proves the C is valid CUDA
before a GPU session. Needs CuPy and NVRTC (not part of ``make test``):

    pip install --target /tmp/cupy_site cupy-cuda13x==14.2.0 cuda-pathfinder "nvidia-cuda-nvrtc==13.*" \\
        "nvidia-cuda-runtime==13.*"
    LD_LIBRARY_PATH=/tmp/cupy_site/nvidia/cu13/lib PYTHONPATH=/tmp/cupy_site:. python tools/check_cuda_nvrtc.py
"""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..", "tests", "backends"),
                os.path.join(HERE, "..", "tests", "cuda")]

import cupy  # noqa: E402
from cupy.cuda import nvrtc  # noqa: E402

from ember.backends import cuda_random  # noqa: E402
from ember.backends.cuda_codegen import C_TYPES, PREAMBLE, UnsupportedKernel, generate  # noqa: E402

HEADERS = "#include <cupy/carray.cuh>\n#include <cupy/float16.cuh>\n#include <cupy/bfloat16.cuh>\n"


def _params(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split()) for p in text.split(",") if p.strip()]  # type: ignore[misc]


def wrap(k: int, kernel) -> str:
    ins, outs = _params(kernel.in_params), _params(kernel.out_params)
    args = [f"const {C_TYPES[d]}* p_{n}" for d, n in ins] + [f"{C_TYPES[d]}* p_{n}" for d, n in outs]
    lines = [f'extern "C" __global__ void k{k}({", ".join(args + ["long long n"])}) {{',
             "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;", "  if (i >= n) return;"]
    lines += [f"  const {C_TYPES[d]} {n} = p_{n}[i];" for d, n in ins]
    lines += [f"  {C_TYPES[d]} {n};" for d, n in outs]
    lines += ["  {", kernel.body, "  }"] + [f"  p_{n}[i] = {n};" for _, n in outs] + ["}"]
    return "\n".join(lines)


def compile_source(source: str) -> tuple[bool, str]:
    include = os.path.join(os.path.dirname(cupy.__file__), "_core", "include")
    options = ["-arch=compute_90", "-std=c++17", "--fmad=false", f"-I{include}",
               f"-I{include}/cupy/_cccl/libcudacxx", f"-I{include}/cupy/_cccl/cub", f"-I{include}/cupy/_cccl/thrust"]
    cuda_include = os.environ.get("CUDA_INCLUDE") or os.path.join(
        os.path.dirname(os.path.dirname(cupy.__file__)), "nvidia", "cu13", "include")
    options.append(f"-I{cuda_include}")
    prog = nvrtc.createProgram(source, "ember_kernels.cu", [], [])
    try:
        nvrtc.compileProgram(prog, options)
        return True, f"{len(nvrtc.getPTX(prog))} bytes of PTX"
    except Exception as error:  # noqa: BLE001 - report NVRTC's log
        return False, f"{error}\n{nvrtc.getProgramLog(prog)[:6000]}"


def check_api() -> list[str]:
    """The CuPy names and keywords ember's CUDA backend uses exist in the installed CuPy (no GPU needed)."""
    import inspect

    from cupy._core import _routines_linalg

    problems = []
    needed = ["cuda.Event", "cuda.Stream", "cuda.get_elapsed_time", "cuda.alloc_pinned_memory",
              "cuda.PinnedMemoryPointer", "cuda.set_allocator", "cuda.get_current_stream", "cuda.Device",
              "cuda.runtime.getDeviceCount", "cuda.runtime.getDevice", "cuda.runtime.setDevice",
              "cuda.runtime.getDeviceProperties", "cuda.runtime.memGetInfo", "get_default_memory_pool",
              "get_default_pinned_memory_pool", "may_share_memory", "ElementwiseKernel", "asarray", "asnumpy"]
    for name in needed:
        obj = cupy
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            problems.append(f"cupy.{name} missing")
    pool = cupy.get_default_memory_pool()
    problems += [f"MemoryPool.{m} missing" for m in ("malloc", "used_bytes", "total_bytes", "free_all_blocks")
                 if not hasattr(pool, m)]
    if getattr(_routines_linalg, "COMPUTE_TYPE_TF32", None) is None or not hasattr(_routines_linalg,
                                                                                   "set_compute_type"):
        problems.append("cupy._core._routines_linalg TF32 compute type missing")
    for fn, words in ((cupy.ndarray.get, ("stream", "out", "blocking")), (cupy.ndarray.set, ("stream",)),
                      (cupy.cuda.Event.__init__, ("block", "disable_timing", "interprocess")),
                      (cupy.ElementwiseKernel, ("preamble", "return_tuple", "options"))):
        doc = (fn.__doc__ or "") + str(getattr(fn, "__text_signature__", "") or "")
        try:
            doc += str(inspect.signature(fn))
        except (TypeError, ValueError):
            pass
        problems += [f"{fn.__qualname__}: no {w!r}" for w in words if w not in doc]
    return problems


def main() -> int:
    import test_cuda_codegen

    problems = check_api()
    print(f"CuPy {cupy.__version__} API used by ember/backends/cuda.py: " + ("OK" if not problems else
                                                                          f"PROBLEMS {problems}"))

    t0 = time.perf_counter()
    seen, kernels = set(), []
    for source, ins, _ in test_cuda_codegen.record_kernels():
        dts = tuple(str(a.dtype) for a in ins)
        if (source, dts) in seen:
            continue
        seen.add((source, dts))
        try:
            kernels.append(generate(source, [a.dtype for a in ins]))
        except UnsupportedKernel:
            continue
    # CuPy parses the parameter lists at construction (no GPU): each C type must be the one the body uses.
    mismatched = []
    for kern in kernels:
        ek = cupy.ElementwiseKernel(kern.in_params, kern.out_params, kern.body, kern.name, preamble=kern.preamble,
                                    return_tuple=True, options=("--fmad=false",))
        for info, (dtype, _) in zip(ek.in_params + ek.out_params, _params(kern.in_params) + _params(kern.out_params)):
            if info.ctype != C_TYPES[dtype]:
                mismatched.append((dtype, info.ctype))
    problems += [f"CuPy's C type for {d} is {c}" for d, c in sorted(set(mismatched))]
    print(f"ElementwiseKernel parameter lists: {len(kernels)} parsed by CuPy, "
          f"{'C types agree' if not mismatched else sorted(set(mismatched))}")
    parts = [HEADERS, PREAMBLE] + [wrap(k, kern) for k, kern in enumerate(kernels)]
    ok, message = compile_source("\n".join(parts))
    print(f"fused kernels: {len(kernels)} generated, NVRTC {'OK' if ok else 'FAILED'}: {message}")
    rng_parts = [HEADERS, cuda_random.PREAMBLE]
    for j, ((kind, dtype), body) in enumerate(cuda_random.BODIES.items()):
        t = C_TYPES[dtype]
        rng_parts.append(f'extern "C" __global__ void r{j}(unsigned int k0, unsigned int k1, unsigned int o0, '
                         f"unsigned int o1, {t}* p_out, long long n) {{ long long i = blockIdx.x * (long long)"
                         f"blockDim.x + threadIdx.x; if (i >= n) return; {t} out; {{ {body} }} p_out[i] = out; }}")
        # the capture-safe form: the key read from a device seed (CuPy passes `raw int64` as a CArray; a pointer here)
        rng_parts.append(f'extern "C" __global__ void s{j}(const long long* seedp, unsigned int o0, unsigned int o1, '
                         f"{t}* p_out, long long n) {{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
                         f"if (i >= n) return; {t} out; {{ {cuda_random.DEVICE_SEED}{body} }} p_out[i] = out; }}")
        rng_parts.append(f'extern "C" __global__ void c{j}(const long long* st, long long add, {t}* p_out, long long n) '
                         f"{{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i >= n) return; "
                         f"{t} out; {{ {cuda_random.CAPTURED}{body} }} p_out[i] = out; }}")
    ok2, message2 = compile_source("\n".join(rng_parts))
    print(f"philox kernels: {3 * len(cuda_random.BODIES)} (integer seeds, device seeds, captured), "
          f"NVRTC {'OK' if ok2 else 'FAILED'}: {message2}")
    ok3 = check_reductions()
    print(f"NVRTC {nvrtc.getVersion()}, {time.perf_counter() - t0:.1f} s")
    return 0 if ok and ok2 and ok3 and not problems else 1


def check_reductions() -> bool:
    """The ReductionKernels of tests/cuda/test_cuda_reduction_kernel.py's recorded groups: built as
    cupy.ReductionKernel objects (CuPy parses them without a GPU) and their map functions and post-maps
    compiled by NVRTC inside a one-thread-per-row kernel of the same shape as the host twin."""
    import test_cuda_reduction_kernel as reduction_tests
    from ember.backends import cuda_codegen, cuda_codegen_reduce

    sources = {}
    for _, _, src, ins, _ in reduction_tests._cases():
        program = cuda_codegen.parse(src)
        if cuda_codegen_reduce.single_kernel(program):
            r = cuda_codegen_reduce.generate_reduction(program, [a.dtype for a in ins])
            sources[r.key] = r
    for r in sources.values():
        cupy.ReductionKernel(r.in_params, r.out_params, r.map_expr, r.reduce_expr, r.post_map_expr, r.identity,
                             r.name, reduce_type=r.reduce_type, preamble=r.preamble, options=("--fmad=false",))
    parts = [HEADERS, PREAMBLE] + list(dict.fromkeys(r.preamble[len(PREAMBLE):] for r in sources.values()))
    for j, r in enumerate(sources.values()):
        ins = _params(r.in_params)
        (dtype, name), = _params(r.out_params)
        args = [f"const {C_TYPES[d]}* p_{n}" for d, n in ins] + [f"{C_TYPES[dtype]}* p_out", "long long rows",
                                                                 "long long cols"]
        post = r.post_map_expr.replace("_in_ind.size() / _out_ind.size()", "cols")
        parts.append("\n".join([
            f'extern "C" __global__ void red{j}({", ".join(args)}) {{',
            "  long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (row >= rows) return;",
            f"  {r.reduce_type} a = ({r.reduce_type}){r.identity};",
            "  for (long long c = 0; c < cols; ++c) { long long i = row * cols + c;",
            *[f"    const {C_TYPES[d]} {n} = p_{n}[i];" for d, n in ins],
            f"    {r.reduce_type} b = {r.map_expr}; a = {r.reduce_expr}; }}",
            f"  {C_TYPES[dtype]} {name}; {post}; p_out[row] = {name};", "}"]))
    ok, message = compile_source("\n".join(parts))
    print(f"reduction kernels: {len(sources)} generated, ReductionKernel objects built, NVRTC "
          f"{'OK' if ok else 'FAILED'}: {message}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
