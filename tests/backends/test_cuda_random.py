"""The GPU's Philox generator (ember/backends/cuda_random.py), checked on the host.

The kernel bodies are compiled as host C++ (g++) and run through :class:`PhiloxGenerator` with a
stand-in for ``cupy.ElementwiseKernel`` that calls the compiled loop. Checked: Random123's
known-answer vectors for Philox4x32-10, moments and a chi-square of the distributions, that a draw
depends only on (seed, stream, offset) (so a saved state restores the same numbers), and that
successive draws and different streams differ.
"""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from ember.backends import cuda_random
from ember.backends.cuda_random import BODIES, CAPTURED, DEVICE_SEED, PREAMBLE, PhiloxGenerator

host = pytest.importorskip("ember.backends.cuda_codegen_host")

C_TYPE = {"float32": "float", "float64": "double", "uint64": "unsigned long long"}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if host.compiler() is None:
        pytest.skip("no C++ compiler")
    return build_host_lib(tmp_path_factory.mktemp("philox"))


def build_host_lib(d):
    """The Philox core and every kernel body compiled as host C++ into ``d`` (also used by the GPU test)."""
    cxx = host.compiler()
    parts = ["#include <math.h>", "#define EMBER_DEVICE", PREAMBLE,
             'extern "C" void kat(unsigned int* c, unsigned int* k, unsigned int* out) {'
             " ember_u4 r = ember_philox(c[0], c[1], c[2], c[3], k[0], k[1]);"
             " out[0] = r.x; out[1] = r.y; out[2] = r.z; out[3] = r.w; }"]
    for (kind, dtype), body in BODIES.items():
        t = C_TYPE[dtype]
        parts.append(f'extern "C" void draw_{kind}_{dtype}(long long n, unsigned int k0, unsigned int k1, '
                     f"unsigned int o0, unsigned int o1, {t}* dst) {{ for (long long i = 0; i < n; ++i) "
                     f"{{ {t} out; {{ {body} }} dst[i] = out; }} }}")
        parts.append(f'extern "C" void draw_seeded_{kind}_{dtype}(long long n, const long long* seedp, '
                     f"unsigned int o0, unsigned int o1, {t}* dst) {{ for (long long i = 0; i < n; ++i) "
                     f"{{ {t} out; {{ {DEVICE_SEED}{body} }} dst[i] = out; }} }}")
        parts.append(f'extern "C" void draw_captured_{kind}_{dtype}(long long n, const long long* st, long long add, '
                     f"{t}* dst) {{ for (long long i = 0; i < n; ++i) "
                     f"{{ {t} out; {{ {CAPTURED}{body} }} dst[i] = out; }} }}")
    (d / "philox.cpp").write_text("\n".join(parts))
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(d / "philox.so"), str(d / "philox.cpp")], check=True)
    return ctypes.CDLL(str(d / "philox.so"))


class _HostKernel:
    """What ``cupy.ElementwiseKernel(...)`` returns, for the Philox bodies: call(k0, k1, o0, o1, out)."""

    def __init__(self, lib, name):
        self.fn = getattr(lib, name.replace("ember_philox_", "draw_"))

    def __call__(self, *args):
        u = ctypes.c_uint
        if len(args) == 3:  # the captured form: (state [key, offset], add, out)
            st, add, out = args
            assert isinstance(st, np.ndarray) and st.dtype == np.int64 and st.shape == (2,)
            self.fn(ctypes.c_longlong(out.size), ctypes.c_void_p(st.ctypes.data), ctypes.c_longlong(int(add)),
                    ctypes.c_void_p(out.ctypes.data))
            return out
        *head, o0, o1, out = args
        if len(head) == 1:  # the device-seed form: (seed array, o0, o1, out)
            seed = head[0]
            assert isinstance(seed, np.ndarray) and seed.dtype == np.int64 and seed.shape == (1,)
            self.fn(ctypes.c_longlong(out.size), ctypes.c_void_p(seed.ctypes.data), u(int(o0)), u(int(o1)),
                    ctypes.c_void_p(out.ctypes.data))
        else:
            k0, k1 = head
            self.fn(ctypes.c_longlong(out.size), u(int(k0)), u(int(k1)), u(int(o0)), u(int(o1)),
                    ctypes.c_void_p(out.ctypes.data))
        return out


class _HostCupy:
    """The slice of CuPy PhiloxGenerator uses, on NumPy arrays and host-compiled kernels."""

    def __init__(self, lib):
        self.lib = lib

    def ElementwiseKernel(self, in_params, out_params, body, name, preamble=""):  # noqa: N802 - CuPy's name
        assert preamble == PREAMBLE and body.replace(DEVICE_SEED, "", 1).replace(CAPTURED, "", 1) in BODIES.values()
        assert ("raw int64 seedp" in in_params) == body.startswith(DEVICE_SEED)
        return _HostKernel(self.lib, name)

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture()
def hcp(lib, monkeypatch):
    monkeypatch.setattr(cuda_random, "_KERNELS", {})
    return _HostCupy(lib)


@pytest.mark.parametrize("ctr, key, want", [
    # Random123 kat_vectors, philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff, 0xffffffff), (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
])
def test_philox_known_answers(lib, ctr, key, want):
    c, k, out = (ctypes.c_uint * 4)(*ctr), (ctypes.c_uint * 2)(*key), (ctypes.c_uint * 4)()
    lib.kat(c, k, out)
    assert tuple(out) == want


def test_uniform_and_normal_moments(hcp):
    rng = PhiloxGenerator(hcp, seed=1234)
    n = 400_000
    for dtype in (np.float32, np.float64):
        u = rng.random((n,), dtype=dtype)
        assert u.dtype == dtype and u.min() >= 0.0 and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n) and abs(u.var() - 1 / 12) < 2e-3
        z = rng.standard_normal((n,), dtype=dtype)
        assert z.dtype == dtype and np.isfinite(z).all()
        assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1) < 5 * np.sqrt(2 / n)
        assert abs(np.mean(z ** 3)) < 0.03 and abs(np.mean(z ** 4) - 3) < 0.06  # Box-Muller, not a uniform
    e = rng.exponential(2.0, (n,))
    assert e.min() >= 0 and abs(e.mean() - 2.0) < 5 * 2.0 / np.sqrt(n)


def test_integers_and_permutation(hcp):
    rng = PhiloxGenerator(hcp, seed=7)
    draws = rng.integers(-3, 7, (100_000,))
    assert draws.dtype == np.int64 and draws.min() == -3 and draws.max() == 6
    counts = np.bincount(draws + 3, minlength=10)
    chi2 = ((counts - 10_000) ** 2 / 10_000).sum()
    assert chi2 < 30  # 9 degrees of freedom: p < 0.0005 above 30
    perm = rng.permutation(1000)
    assert sorted(perm.tolist()) == list(range(1000)) and perm.tolist() != list(range(1000))


def test_state_is_seed_stream_offset(hcp):
    a = PhiloxGenerator(hcp, seed=99)
    first = a.random((5,), dtype=np.float32)
    state = a.state()
    second = a.random((5,), dtype=np.float32)
    assert state == {"seed": 99, "stream": None, "offset": 1}
    assert not np.array_equal(first, second)  # successive draws use new counters
    b = PhiloxGenerator(hcp, seed=0)
    b.set_state(state)
    np.testing.assert_array_equal(b.random((5,), dtype=np.float32), second)
    np.testing.assert_array_equal(PhiloxGenerator(hcp, seed=99).random((5,), dtype=np.float32), first)
    other = PhiloxGenerator(hcp, seed=99, stream=3).random((5,), dtype=np.float32)
    assert not np.array_equal(other, first)  # an independent stream
    with pytest.raises(ValueError):
        b.set_state({"seed": "1; rm", "stream": None, "offset": 0})
    # The first n elements of a longer draw are the same numbers (element i depends only on i).
    c = PhiloxGenerator(hcp, seed=99)
    np.testing.assert_array_equal(c.random((9,), dtype=np.float32)[:5], first)


def test_a_seed_in_device_memory_draws_the_numbers_of_the_same_integer_seed(hcp):
    """The capture-safe form: the kernels read the key from a 0-d int64 array (a CUDA graph replays them after
    the host writes a new seed there), and give exactly the numbers of the integer seed, stream by stream."""
    for stream in (None, 0, 5):
        for kind in ("random", "standard_normal"):
            for dtype in (np.float32, np.float64):
                want = getattr(PhiloxGenerator(hcp, seed=2**40 + 17, stream=stream), kind)((7,), dtype=dtype)
                seed = np.array(2**40 + 17, dtype=np.int64)
                got = getattr(PhiloxGenerator(hcp, seed=seed, stream=stream), kind)((7,), dtype=dtype)
                np.testing.assert_array_equal(got, want)
    seed = np.array(3, dtype=np.int64)
    rng = PhiloxGenerator(hcp, seed=seed, stream=1)
    first = rng.integers(0, 1000, (6,))
    seed[()] = 4  # a new seed written into the same memory: new numbers from the same generator object
    assert not np.array_equal(PhiloxGenerator(hcp, seed=seed, stream=1).integers(0, 1000, (6,)), first)
    np.testing.assert_array_equal(PhiloxGenerator(hcp, seed=4, stream=1).integers(0, 1000, (6,)),
                                  PhiloxGenerator(hcp, seed=seed, stream=1).integers(0, 1000, (6,)))
    with pytest.raises(RuntimeError, match="no host state"):
        rng.state()
    # streams are disjoint counter spaces of one key: stream k's draw is not the default stream's
    assert not np.array_equal(PhiloxGenerator(hcp, seed=3, stream=0).random((4,), dtype=np.float32),
                              PhiloxGenerator(hcp, seed=3).random((4,), dtype=np.float32))


def test_a_generator_registered_with_a_graph_reads_key_and_offset_from_device_memory(hcp):
    """Inside a capture the default generator's draws read [key, offset] from a device array plus their place in
    the graph: with the state of offset 3 written there, the graph's draws k = 0, 1 are the eager draws at offsets
    3 and 4; replay_state advances the offset by the graph's draw count (PyTorch's whole-graph increment)."""
    eager = PhiloxGenerator(hcp, seed=2**63 + 5)
    eager.set_state({"seed": 2**63 + 5, "stream": None, "offset": 3})
    want = [eager.random((6,), dtype=np.float32), eager.standard_normal((6,), dtype=np.float64)]
    g = PhiloxGenerator(hcp, seed=2**63 + 5)
    g.set_state({"seed": 2**63 + 5, "stream": None, "offset": 3})
    state = np.zeros(2, dtype=np.int64)
    state[...] = g.replay_state(2)  # (the host kernels run at once: the state is written before the draws)
    assert g.offset == 5
    g.capture_begin(state)
    got = [g.random((6,), dtype=np.float32), g.standard_normal((6,), dtype=np.float64)]
    assert g.capture_end() == 2 and g.offset == 5  # draws inside the capture do not move the host offset
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="default generator"):
        PhiloxGenerator(hcp, seed=1, stream=2).capture_begin(state)
