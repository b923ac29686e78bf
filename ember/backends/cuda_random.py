"""Random numbers drawn on the GPU: a counter-based Philox4x32-10 generator in CuPy kernels.

Each element ``i`` of a draw is a pure function of ``(key, counter)``: the key is the 64-bit seed,
the counter is ``(i, call)`` where ``call`` counts the draws made by this generator. So the whole
state is two integers (``seed``, ``offset``), which serialize to JSON for checkpoints and restore
exactly (what PyTorch's CUDA generator keeps as seed and Philox offset), and no per-thread curand
state lives on the device. A stream ``k`` (graph random nodes: one per node) is the counter space
``(i, call, 2**31 | k)`` under the same key, disjoint from the default stream's ``(i, call)`` (whose
high word stays below 2**31), so it needs no host-side hashing.

**Capture-safe seeds.** The seed may also be a 0-d int64 *device* array: the kernels then read the key
from device memory (``raw int64 seedp``) instead of taking it as a launch argument, so a CUDA graph
captured once draws new numbers at each replay after the host writes a fresh seed into that array
(ember/graph/cuda_graph_step.py does, from the generator the compiled code named; PyTorch's graphs
read their Philox seed and offset from device memory the same way). Both forms give the same numbers
for the same seed value and stream.

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


# The same bodies with the key read from device memory (a 0-d int64 seed array: capture-safe).
DEVICE_SEED = "unsigned long long ember_s = (unsigned long long)seedp[0]; " \
              "unsigned int k0 = (unsigned int)ember_s, k1 = (unsigned int)(ember_s >> 32); "
STREAM_BIT = 0x80000000
# The default generator inside a CUDA-graph capture: key and base offset read from a 2-element int64 device array
# (``st``: [key, offset], rewritten before each replay), the draw's place in the graph (``add``) baked.
CAPTURED = "unsigned long long ember_s = (unsigned long long)st[0]; " \
           "unsigned int k0 = (unsigned int)ember_s, k1 = (unsigned int)(ember_s >> 32); " \
           "unsigned long long ember_c = (unsigned long long)(st[1] + add); " \
           "unsigned int o0 = (unsigned int)ember_c, o1 = (unsigned int)(ember_c >> 32) & 0x7fffffffu; "


def key_of(seed: int, stream: int | None = None) -> int:
    """The 64-bit Philox key: the seed itself (a stream is a counter space, see :func:`counter_of`)."""
    return int(seed) % 2**64


def counter_of(call: int, stream: int | None) -> tuple[int, int]:
    """The counter's high words for draw ``call``: ``(call, call >> 32)`` for the default stream (below 2**31
    for any reachable count), ``(call, 2**31 | stream)`` for stream ``k``: disjoint spaces under one key."""
    if stream is None:
        return call & 0xffffffff, (call >> 32) & 0x7fffffff
    return call & 0xffffffff, STREAM_BIT | (int(stream) & 0x7fffffff)


class PhiloxGenerator:
    """NumPy ``Generator``'s sampling methods, drawn by CuPy kernels on the current device.

    ``random``/``standard_normal`` (float32 or float64), ``integers(low, high, shape)`` (int64),
    ``exponential(scale, shape)`` (float64), ``permutation(n)`` (int64). ``state``/``set_state``:
    ``{"seed": s, "stream": k or None, "offset": calls}``.
    """

    def __init__(self, cupy: Any, seed: Any, stream: int | None = None, offset: int = 0) -> None:
        self._cp = cupy
        # a device array seed (capture-safe: read by the kernels at run time), else an integer
        self._seed_array = None if isinstance(seed, (int, np.integer)) else seed
        if self._seed_array is not None and getattr(seed, "ndim", None) != 0:
            raise TypeError(f"cuda random: a seed is an int or a 0-d int64 device array, got {type(seed).__name__}")
        if self._seed_array is not None and self._seed_array.dtype != np.int64:
            raise TypeError(f"cuda random: a device seed is a 0-d int64 array, got {self._seed_array.dtype}")
        self.seed = None if self._seed_array is not None else int(seed)
        self.stream, self.offset = stream, int(offset)
        self._key = None if self.seed is None else key_of(self.seed, stream)
        self._captured: list | None = None  # [state array, draws so far] while a CUDA graph captures

    # ---- CUDA-graph capture (torch's generator registered with a graph) ----------------------------------
    def capture_begin(self, state: Any) -> None:
        """Draws until :meth:`capture_end` read the key and base offset from ``state`` (a 2-element int64 device
        array) plus their place in the graph, so each replay samples anew once :meth:`replay_state` is written
        there. Only the default stream of an integer-seeded generator registers."""
        if self.seed is None or self.stream is not None:
            raise RuntimeError("cuda random: only a default generator can be registered with a CUDA graph")
        self._captured = [state, 0]

    def capture_end(self) -> int:
        """Stop capturing; the number of draws the graph makes per replay (its offset increment)."""
        count = 0 if self._captured is None else self._captured[1]
        self._captured = None
        return count

    def replay_state(self, increment: int) -> np.ndarray:
        """``[key, offset]`` for the next replay (as int64), advancing the offset past the replay's draws, as
        PyTorch's generator advances by a graph's whole increment."""
        state = np.array([self._key, self.offset], dtype=np.uint64).view(np.int64)
        self.offset += int(increment)
        return state

    # ---- state ----------------------------------------------------------------------------------
    def state(self) -> dict:
        if self.seed is None:
            raise RuntimeError("cuda random: a generator seeded from device memory has no host state to save")
        return {"seed": self.seed, "stream": self.stream, "offset": self.offset}

    def set_state(self, state: dict) -> None:
        seed, stream, offset = state["seed"], state["stream"], state["offset"]
        if not (isinstance(seed, int) and isinstance(offset, int) and offset >= 0
                and (stream is None or isinstance(stream, int))):
            raise ValueError(f"cuda generator state: expected integer seed/offset and an integer or null stream, "
                             f"got {state!r:.200}")
        self.seed, self.stream, self.offset = seed, stream, offset
        self._key, self._seed_array = key_of(seed, stream), None

    # ---- drawing --------------------------------------------------------------------------------
    def _draw(self, kind: str, shape: Any, dtype: Any) -> Any:
        dtype = np.dtype(dtype)
        body = BODIES.get((kind, dtype.name))
        if body is None:
            raise TypeError(f"cuda random: {kind} draws float32 or float64, not {dtype}")
        shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
        out = self._cp.empty(shape, dtype=dtype)
        if self._captured is not None:  # inside a CUDA-graph capture: key and offset from device memory
            state, k = self._captured
            self._captured[1] += 1
            _kernel(self._cp, kind, dtype.name, body, captured=True)(state, np.int64(k), out)
            return out
        o0, o1 = counter_of(self.offset, self.stream)
        self.offset += 1
        u32 = np.uint32
        if self._seed_array is not None:
            # (a 1-element view: CuPy's CArray of a 1-d array indexes seedp[0] as a plain pointer would)
            _kernel(self._cp, kind, dtype.name, body, device_seed=True)(self._seed_array.reshape(1), u32(o0), u32(o1),
                                                                        out)
        else:
            _kernel(self._cp, kind, dtype.name, body)(u32(self._key & 0xffffffff), u32(self._key >> 32), u32(o0),
                                                     u32(o1), out)
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


def _kernel(cupy: Any, kind: str, dtype: str, body: str, device_seed: bool = False, captured: bool = False) -> Any:
    key = (id(cupy), kind, dtype, device_seed, captured)
    kernel = _KERNELS.get(key)
    if kernel is None:
        if captured:
            kernel = cupy.ElementwiseKernel("raw int64 st, int64 add", f"{dtype} out", CAPTURED + body,
                                            f"ember_philox_captured_{kind}_{dtype}", preamble=PREAMBLE)
        elif device_seed:
            kernel = cupy.ElementwiseKernel("raw int64 seedp, uint32 o0, uint32 o1", f"{dtype} out",
                                            DEVICE_SEED + body, f"ember_philox_seeded_{kind}_{dtype}",
                                            preamble=PREAMBLE)
        else:
            kernel = cupy.ElementwiseKernel("uint32 k0, uint32 k1, uint32 o0, uint32 o1", f"{dtype} out", body,
                                            f"ember_philox_{kind}_{dtype}", preamble=PREAMBLE)
        _KERNELS[key] = kernel
    return kernel
