"""``torch.xpu``, ``torch.mps``, ``torch.backends.mkldnn`` and ``torch.backends.openmp`` answer as torch 2.13's CPU
build (pytorch/tutorials' profiler recipe stopped at ``torch.xpu.is_available()``)."""
import warnings

import pytest

import ember

torch = pytest.importorskip("torch")

QUERIES = {
    "xpu": ["is_available", "device_count", "is_initialized", "is_bf16_supported", "manual_seed", "manual_seed_all",
            "seed", "seed_all", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
            "synchronize", "current_device", "get_device_name", "initial_seed", "get_rng_state"],
    "mps": ["is_available", "device_count", "manual_seed", "seed", "synchronize", "empty_cache", "get_rng_state"],
}


def _outcome(fn, name):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn(0) if name in ("manual_seed", "manual_seed_all") else fn()
        return ("value", value)
    except Exception as e:  # the type of refusal is part of the answer
        return ("raises", type(e).__name__)


@pytest.mark.parametrize("module", sorted(QUERIES))
def test_device_namespaces_answer_like_torch_without_the_device(module):
    for name in QUERIES[module]:
        got = _outcome(getattr(getattr(ember, module), name), name)
        want = _outcome(getattr(getattr(torch, module), name), name)
        assert got == want, (module, name, got, want)


def test_mkldnn_and_openmp_switches_like_torch():
    for lib in (ember, torch):
        mk = lib.backends.mkldnn
        assert mk.is_available() and mk.enabled and lib.backends.openmp.is_available()
        with mk.flags(enabled=False):
            assert mk.enabled is False
        assert mk.enabled is True
        with mk.verbose(mk.VERBOSE_OFF):
            pass
