"""Random numbers drawn on the GPU: a counter-based Philox4x32-10 generator in CuPy kernels.

Each element ``i`` of a draw is a pure function of ``(key, counter)``: the key is the 64-bit seed,
the counter is ``(i, call)`` where ``call`` counts the draws made by this generator. So the whole
state is two integers (``seed``, ``offset``), which serialize to JSON for checkpoints and restore
exactly (what PyTorch's CUDA generator keeps as seed and Philox offset), and no per-thread curand
state lives on the device. Streams keyed by ``(seed, stream)`` (graph random nodes) hash the pair
into the key with NumPy's SeedSequence.

The kernel bodies below are plain C over 32/64-bit integers; tests compile them on the host and
check the Philox core against Random123's published known-answer vectors and the distributions'
moments (tests/backends/test_cuda_random.py). CuPy runs them as ElementwiseKernels; no GPU has run
them yet (docs/gpu.md).

Example (with a GPU):
    >>> rng = PhiloxGenerator(cupy, seed=0)          # doctest: +SKIP
    >>> rng.random((2, 3), dtype=numpy.float32)       # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

import numpy as np

# Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): 10 rounds of
# two 32x32->64 multiplies; key schedule by the Weyl constants.
PREAMBLE = r"""
#ifndef EMBER_DEVICE
#define EMBER_DEVICE __device__
#endif
struct ember_u4 { unsigned int x, y, z, w; };
EMBER_DEVICE inline ember_u4 ember_philox(unsigned int c0, unsigned int c1, unsigned int c2, unsigned int c3,
                                          unsigned int k0, unsigned int k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    unsigned long long p0 = (unsigned long long)0xD2511F53u * c0;
    unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c2;
    unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  ember_u4 out = {c0, c1, c2, c3};
  return out;
}
EMBER_DEVICE inline ember_u4 ember_draw(long long i, unsigned int k0, unsigned int k1, unsigned int o0,
                                        unsigned int o1) {
  return ember_philox((unsigned int)(i & 0xffffffffLL), (unsigned int)((unsigned long long)i >> 32), o0, o1, k0, k1);
}
/* [0, 1): 24 random bits for float, 53 for double (as NumPy's generators) */
EMBER_DEVICE inline float ember_u01f(unsigned int a) { return (float)(a >> 8) * 5.9604644775390625e-08f; }
EMBER_DEVICE inline double ember_u01d(unsigned int a, unsigned int b) {
  unsigned long long v = (((unsigned long long)a << 32) | b) >> 11;
  return (double)v * 1.1102230246251565e-16;
}
"""

# ElementwiseKernel bodies: ``out`` is the output element, ``i`` its index; k0, k1, o0, o1 the key and
# the call counter (uint32 scalars). Box-Muller takes (0, 1] for the logarithm.
BODIES = {
    ("random", "float32"): "ember_u4 r = ember_draw(i, k0, k1, o0, o1); out = ember_u01f(r.x);",
    ("random", "float64"): "ember_u4 r = ember_draw(i, k0, k1, o0, o1); out = ember_u01d(r.x, r.y);",
    ("normal", "float32"): "ember_u4 r = ember_draw(i, k0, k1, o0, o1); "
                           "float u1 = 1.0f - ember_u01f(r.x); float u2 = ember_u01f(r.y); "
                           "out = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795865f * u2);",
    ("normal", "float64"): "ember_u4 r = ember_draw(i, k0, k1, o0, o1); "
                           "double u1 = 1.0 - ember_u01d(r.x, r.y); double u2 = ember_u01d(r.z, r.w); "
                           "out = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);",
    # 64 random bits; integers() maps them to [low, high) (bias below range / 2**64)
    ("bits", "uint64"): "ember_u4 r = ember_draw(i, k0, k1, o0, o1); "
                        "out = (((unsigned long long)r.x) << 32) | r.y;",
}


def key_of(seed: int, stream: int | None) -> int:
    """The 64-bit Philox key: the seed itself, or a hash of (seed, stream) for an independent stream."""
    if stream is None:
        return int(seed) % 2**64
    return int(np.random.SeedSequence([int(seed) % 2**64, int(stream) % 2**64]).generate_state(1, np.uint64)[0])


class PhiloxGenerator:
    """NumPy ``Generator``'s sampling methods, drawn by CuPy kernels on the current device.

    ``random``/``standard_normal`` (float32 or float64), ``integers(low, high, shape)`` (int64),
    ``exponential(scale, shape)`` (float64), ``permutation(n)`` (int64). ``state``/``set_state``:
    ``{"seed": s, "stream": k or None, "offset": calls}``.
    """

    def __init__(self, cupy: Any, seed: int, stream: int | None = None, offset: int = 0) -> None:
        self._cp = cupy
        self.seed, self.stream, self.offset = int(seed), stream, int(offset)
        self._key = key_of(seed, stream)

    # ---- state ----------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"seed": self.seed, "stream": self.stream, "offset": self.offset}

    def set_state(self, state: dict) -> None:
        seed, stream, offset = state["seed"], state["stream"], state["offset"]
        if not (isinstance(seed, int) and isinstance(offset, int) and offset >= 0
                and (stream is None or isinstance(stream, int))):
            raise ValueError(f"cuda generator state: expected integer seed/offset and an integer or null stream, "
                             f"got {state!r:.200}")
        self.seed, self.stream, self.offset = seed, stream, offset
        self._key = key_of(seed, stream)

    # ---- drawing --------------------------------------------------------------------------------
    def _draw(self, kind: str, shape: Any, dtype: Any) -> Any:
        dtype = np.dtype(dtype)
        body = BODIES.get((kind, dtype.name))
        if body is None:
            raise TypeError(f"cuda random: {kind} draws float32 or float64, not {dtype}")
        kernel = _kernel(self._cp, kind, dtype.name, body)
        shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
        out = self._cp.empty(shape, dtype=dtype)
        call = self.offset
        self.offset += 1
        u32 = np.uint32
        kernel(u32(self._key & 0xffffffff), u32(self._key >> 32), u32(call & 0xffffffff), u32((call >> 32) & 0xffffffff),
               out)
        return out

    def random(self, size: Any = None, dtype: Any = np.float64) -> Any:
        return self._draw("random", size, dtype)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64) -> Any:
        return self._draw("normal", size, dtype)

    def integers(self, low: int, high: int | None = None, size: Any = None) -> Any:
        if high is None:
            low, high = 0, low
        span = int(high) - int(low)
        if span <= 0:
            raise ValueError(f"integers: low >= high ({low} >= {high})")
        bits = self._draw("bits", size, np.uint64)
        return (bits % self._cp.uint64(span)).astype(self._cp.int64) + int(low)

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any:
        u = self._draw("random", size, np.float64)
        return -self._cp.log1p(-u) * scale

    def permutation(self, n: int) -> Any:
        return self._cp.argsort(self._draw("bits", (int(n),), np.uint64)).astype(self._cp.int64)


_KERNELS: dict[tuple, Any] = {}


def _kernel(cupy: Any, kind: str, dtype: str, body: str) -> Any:
    key = (id(cupy), kind, dtype)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = cupy.ElementwiseKernel("uint32 k0, uint32 k1, uint32 o0, uint32 o1", f"{dtype} out", body,
                                        f"ember_philox_{kind}_{dtype}", preamble=PREAMBLE)
        _KERNELS[key] = kernel
    return kernel
