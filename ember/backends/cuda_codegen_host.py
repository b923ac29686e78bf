"""Compile generated CUDA elementwise kernels as host C++ (g++/clang++) to check them without a GPU.

The body :func:`ember.backends.cuda_codegen.generate` writes is plain C++ over scalars; with small
stand-ins for CuPy's ``float16``/``bfloat16`` classes (``_Float16`` and round-to-nearest-even bits,
as CUDA's conversions round) it compiles on the host, so tests prove the C is valid and compare its
results with eager ember on random and special inputs. Many kernels go into one shared library, so
a test session pays for one compiler run. Used by tests and tools only, never at run time.

Example:
    >>> import numpy as np
    >>> from ember.backends.cuda_codegen import generate
    >>> k = generate("# inputs: in0\\n# outputs: t1\\nt1 = multiply(in0, 3.0)", ["float32"])
    >>> lib = HostKernels([k])              # doctest: +SKIP  (needs a C++ compiler)
    >>> lib.run(0, np.ones(3, np.float32))  # doctest: +SKIP
    (array([3., 3., 3.], dtype=float32),)
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from typing import Any, Sequence

import numpy as np

from ember.backends.cuda_codegen import C_TYPES, PREAMBLE, KernelSource, dtype_of

HOST_PRELUDE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#define EMBER_DEVICE
#define EMBER_INF __builtin_inf()
#define EMBER_NAN __builtin_nan("")
struct float16 {  /* CuPy's float16: stored as IEEE half, converts through float */
  _Float16 v;
  float16() {}
  float16(float f) : v((_Float16)f) {}
  explicit float16(double d) : v((_Float16)d) {}
  explicit float16(bool b) : v((_Float16)(float)b) {}
  explicit float16(int i) : v((_Float16)i) {}
  explicit float16(unsigned int i) : v((_Float16)i) {}
  explicit float16(long long i) : v((_Float16)i) {}
  explicit float16(unsigned long long i) : v((_Float16)i) {}
  operator float() const { return (float)v; }
};
struct bfloat16 {  /* CuPy's bfloat16: the top 16 bits of a float, rounded to nearest even */
  uint16_t bits;
  bfloat16() {}
  bfloat16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = (uint16_t)((u >> 16) | 0x40u); return; }
    u += 0x7fffu + ((u >> 16) & 1u); bits = (uint16_t)(u >> 16);
  }
  explicit bfloat16(double d) : bfloat16((float)d) {}
  explicit bfloat16(bool b) : bfloat16((float)b) {}
  explicit bfloat16(int i) : bfloat16((float)i) {}
  explicit bfloat16(unsigned int i) : bfloat16((float)i) {}
  explicit bfloat16(long long i) : bfloat16((float)i) {}
  explicit bfloat16(unsigned long long i) : bfloat16((float)i) {}
  operator float() const { uint32_t u = ((uint32_t)bits) << 16; float f; memcpy(&f, &u, 4); return f; }
};
"""


def compiler() -> str | None:
    """A C++ compiler on this machine, or None."""
    for name in (os.environ.get("CXX", ""), "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _wrapper(index: int, kernel: KernelSource) -> str:
    """``extern "C" void kernel_<index>(n, ins, outs)``: the body in a loop over flat arrays."""
    def params(text: str) -> list[tuple[str, str]]:
        return [tuple(p.split()) for p in text.split(",") if p.strip()]  # type: ignore[misc]

    ins, outs = params(kernel.in_params), params(kernel.out_params)
    lines = [f'extern "C" void kernel_{index}(long long n, void** ins, void** outs) {{',
             "  for (long long i = 0; i < n; ++i) {"]
    for k, (dtype, name) in enumerate(ins):
        ctype = C_TYPES[dtype]
        lines.append(f"    const {ctype} {name} = (({ctype}*)ins[{k}])[i];")
    for dtype, name in outs:
        lines.append(f"    {C_TYPES[dtype]} {name};")
    lines += ["    {", *("      " + line for line in kernel.body.splitlines()), "    }"]
    for k, (dtype, name) in enumerate(outs):
        lines.append(f"    (({C_TYPES[dtype]}*)outs[{k}])[i] = {name};")
    lines += ["  }", "}"]
    return "\n".join(lines)


class HostKernels:
    """Kernels compiled together into one host shared library; ``run(k, *arrays)`` calls kernel k."""

    def __init__(self, kernels: Sequence[KernelSource], directory: str | None = None) -> None:
        cxx = compiler()
        if cxx is None:
            raise RuntimeError("HostKernels: no C++ compiler (g++ or clang++) found")
        self.kernels = list(kernels)
        self.source = "\n".join([HOST_PRELUDE, PREAMBLE] + [_wrapper(k, kern) for k, kern in enumerate(self.kernels)])
        self._dir = directory or tempfile.mkdtemp(prefix="ember-cuda-host-")
        try:
            src, lib = os.path.join(self._dir, "kernels.cpp"), os.path.join(self._dir, "kernels.so")
            with open(src, "w") as f:
                f.write(self.source)
            # -ffp-contract=off: no fused multiply-add, as NumPy (the backend passes --fmad=false to NVRTC)
            result = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off",
                                     "-fno-fast-math", "-o", lib, src], capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"HostKernels: the generated C++ does not compile:\n{result.stderr[:4000]}")
            self._lib = ctypes.CDLL(lib)
        finally:
            # A directory we made is ours to remove: the loaded library stays mapped after its file is
            # unlinked, and every compile otherwise leaves a folder in the temp dir (tests make dozens).
            if directory is None:
                shutil.rmtree(self._dir, ignore_errors=True)

    def run(self, index: int, *arrays: Any) -> tuple:
        """Run kernel ``index`` on ``arrays`` (broadcast to one shape); returns its outputs."""
        kernel = self.kernels[index]
        in_dtypes = [dtype_of(p.split()[0]) for p in kernel.in_params.split(",") if p.strip()]
        shape = np.broadcast_shapes(*[np.shape(a) for a in arrays]) if arrays else ()
        ins = [np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=dt), shape)) for a, dt in zip(arrays, in_dtypes)]
        outs = [np.empty(shape, dtype=dt) for dt in kernel.out_dtypes]
        n = int(np.prod(shape, dtype=np.int64))
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        getattr(self._lib, f"kernel_{index}")(ctypes.c_longlong(n), in_ptrs, out_ptrs)
        return tuple(outs)


def _reduction_wrapper(index: int, kernel: Any) -> str:
    """``extern "C" void reduce_<index>(rows, cols, ins, out)``: each row of ``cols`` elements mapped by the
    kernel's map function, summed in its reduce type (sequentially), then its post-map (``_in_ind.size() /
    _out_ind.size()`` is ``cols``)."""
    ins = [tuple(p.split()) for p in kernel.in_params.split(",") if p.strip()]
    dtype, out_name = kernel.out_params.split()
    post = kernel.post_map_expr.replace("_in_ind.size() / _out_ind.size()", "cols")
    lines = [f'extern "C" void reduce_{index}(long long rows, long long cols, void** ins, void* out) {{',
             "  for (long long r = 0; r < rows; ++r) {",
             f"    {kernel.reduce_type} a = ({kernel.reduce_type}){kernel.identity};",
             "    for (long long c = 0; c < cols; ++c) {", "      long long i = r * cols + c;"]
    for k, (in_dtype, name) in enumerate(ins):
        ctype = C_TYPES[in_dtype]
        lines.append(f"      const {ctype} {name} = (({ctype}*)ins[{k}])[i];")
    lines += [f"      {kernel.reduce_type} b = {kernel.map_expr};", "      a = a + b;", "    }",
              f"    {C_TYPES[dtype]} {out_name};", f"    {post};",
              f"    (({C_TYPES[dtype]}*)out)[r] = {out_name};", "  }", "}"]
    return "\n".join(lines)


class HostReductions:
    """ReductionKernel sources (:mod:`cuda_codegen_reduce`) compiled together as host C++; ``run(k, *arrays)``
    reduces over the kernel's ``axis`` (all axes for None) of the arrays broadcast to one shape."""

    def __init__(self, kernels: Sequence[Any]) -> None:
        cxx = compiler()
        if cxx is None:
            raise RuntimeError("HostReductions: no C++ compiler (g++ or clang++) found")
        self.kernels = list(kernels)
        # Each kernel brings the whole preamble: keep the shared part once, then each map function.
        maps = list(dict.fromkeys(k.preamble[len(PREAMBLE):] for k in self.kernels))  # one per map function
        self.source = "\n".join([HOST_PRELUDE, PREAMBLE, *maps] +
                                [_reduction_wrapper(i, k) for i, k in enumerate(self.kernels)])
        directory = tempfile.mkdtemp(prefix="ember-cuda-reduce-")
        try:
            src, lib = os.path.join(directory, "reduce.cpp"), os.path.join(directory, "reduce.so")
            with open(src, "w") as f:
                f.write(self.source)
            result = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off",
                                     "-fno-fast-math", "-o", lib, src], capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"HostReductions: the generated C++ does not compile:\n{result.stderr[:4000]}")
            self._lib = ctypes.CDLL(lib)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def run(self, index: int, *arrays: Any) -> np.ndarray:
        kernel = self.kernels[index]
        in_dtypes = [dtype_of(p.split()[0]) for p in kernel.in_params.split(",") if p.strip()]
        shape = np.broadcast_shapes(*[np.shape(a) for a in arrays])
        axes = tuple(range(len(shape))) if kernel.axis is None else tuple(
            a % len(shape) for a in (kernel.axis if isinstance(kernel.axis, tuple) else (kernel.axis,)))
        kept = [d for d in range(len(shape)) if d not in axes]
        rows = int(np.prod([shape[d] for d in kept], dtype=np.int64))
        cols = int(np.prod([shape[d] for d in axes], dtype=np.int64))
        ins = [np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=dt), shape).transpose(kept + list(axes)))
               for a, dt in zip(arrays, in_dtypes)]
        out = np.empty(rows, dtype=kernel.out_dtype)
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins])
        getattr(self._lib, f"reduce_{index}")(ctypes.c_longlong(rows), ctypes.c_longlong(cols), in_ptrs,
                                              ctypes.c_void_p(out.ctypes.data))
        result = out.reshape([shape[d] for d in kept])
        if kernel.keepdims:
            result = np.expand_dims(result, axes)
        return result
