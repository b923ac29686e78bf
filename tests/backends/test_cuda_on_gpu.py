"""The CuPy backend on a real GPU. Skipped where CuPy or a GPU is missing (CI); the first GPU session
runs it (tools/gpu_session.sh). What the CPU-side tests cannot show:

* fused CUDA kernels give the eager results (exact where the steps are exact IEEE arithmetic: the
  kernels are built with --fmad=false), for every kernel the op specs produce;
* the Philox kernels on the GPU give the host-compiled numbers bit for bit (uniform draws);
* memory statistics, events, streams, pinned memory and non_blocking copies, the TF32 flag, device
  random numbers and their states, checkpoints saved on the GPU loaded on the CPU.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cuda_codegen, get_backend

cupy = pytest.importorskip("cupy")
cuda_backend = pytest.importorskip("ember.backends.cuda")

pytestmark = pytest.mark.skipif(
    not (cuda_backend.BACKEND.is_available() and ember.cuda.is_available()
         and get_backend("cuda") is cuda_backend.BACKEND), reason="needs CuPy and a GPU serving device 'cuda'")


def test_fused_kernels_match_eager_on_the_gpu():
    import test_cuda_codegen as host_tests

    failures, count = [], 0
    for source, ins, want in host_tests.record_kernels():
        program = cuda_codegen.parse(source)
        try:
            cuda_codegen.generate(program, [a.dtype for a in ins])
        except cuda_codegen.UnsupportedKernel:
            continue
        kernel = cuda_backend.FusedCudaKernel(program, None)
        got = kernel(cupy, *[cupy.asarray(a) for a in ins])
        got = got if isinstance(got, tuple) else (got,)
        count += 1
        exact = program.fns <= host_tests.EXACT
        for g, w in zip(got, want):
            g = cupy.asnumpy(g)
            assert g.dtype == w.dtype, (source, g.dtype, w.dtype)
            if exact or w.dtype.kind != "f":
                ok = np.array_equal(g, w, equal_nan=w.dtype.kind == "f")
            else:
                tol = {2: 1.6e-2, 4: 1e-5, 8: 1e-13}[w.dtype.itemsize]
                ok = np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)
            if not ok:
                failures.append((source, ins, g, w))
    assert count > 300
    assert not failures, "\n\n".join(f"{s}\n{i}\nGPU   {g}\neager {w}" for s, i, g, w in failures[:3])


def test_compiled_step_uses_cuda_kernels_and_matches_eager():
    x = ember.randn(1000, 1000, device="cuda")

    def f(x):
        return (ember.tanh(x * 1.5 + 0.25) * x - 0.5).relu()

    compiled = ember.compile(f, fallback="raise")
    for _ in range(3):
        got = compiled(x)
    np.testing.assert_array_equal(got.cpu().numpy(), f(x).cpu().numpy())
    assert cuda_backend.FusedCudaKernel._CACHE, "no ElementwiseKernel was built"


def test_philox_on_gpu_equals_host_compiled(tmp_path):
    from ember.backends.cuda_codegen_host import compiler
    from ember.backends.cuda_random import PhiloxGenerator
    import test_cuda_random as host_rng

    gpu = cupy.asnumpy(PhiloxGenerator(cupy, seed=2024).random((4096,), dtype=np.float32))
    assert 0.0 <= gpu.min() and gpu.max() < 1.0 and abs(gpu.mean() - 0.5) < 0.02
    if compiler() is None:
        pytest.skip("no host C++ compiler to compare with")
    lib = host_rng.build_host_lib(tmp_path)
    host = PhiloxGenerator(host_rng._HostCupy(lib), seed=2024).random((4096,), dtype=np.float32)
    np.testing.assert_array_equal(gpu, host)


def test_memory_statistics():
    ember.cuda.empty_cache()
    ember.cuda.reset_peak_memory_stats()
    before = ember.cuda.memory_allocated()
    x = ember.empty(16 * 2**20, dtype=ember.float32, device="cuda")  # 64 MiB
    assert ember.cuda.memory_allocated() - before >= 64 * 2**20
    assert ember.cuda.max_memory_allocated() >= ember.cuda.memory_allocated()
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del x
    assert ember.cuda.memory_allocated() - before < 64 * 2**20
    assert ember.cuda.max_memory_allocated() - before >= 64 * 2**20  # the peak remembers
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == ember.cuda.memory_allocated()
    ember.cuda.empty_cache()
    free, total = ember.cuda.mem_get_info()
    assert 0 < free <= total


def test_events_streams_and_properties():
    props = ember.cuda.get_device_properties(0)
    assert props.total_memory > 2**30 and props.multi_processor_count > 0
    assert ember.cuda.get_device_name() == props.name
    a = ember.randn(2048, 2048, device="cuda")
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    b = a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        c = a * 2
    s.synchronize()
    np.testing.assert_array_equal(c.cpu().numpy(), a.cpu().numpy() * 2)
    assert ember.cuda.current_stream() != s
    del b


def test_pinned_memory_and_non_blocking_copies():
    x = ember.randn(1000, 100)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p[10:].is_pinned()
    y = p.to("cuda", non_blocking=True)
    ember.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    back = y.to("cpu", non_blocking=True)
    ember.cuda.synchronize()
    assert back.is_pinned()
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    loader = ember.data.DataLoader(ember.data.TensorDataset(ember.randn(10, 3)), batch_size=4, pin_memory=True)
    assert all(batch[0].is_pinned() for batch in loader)


def test_tf32_flag_changes_float32_matmul():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1024, 1024)), rng.standard_normal((1024, 1024))
    ref = a @ b
    ea, eb = ember.tensor(a, dtype=ember.float32, device="cuda"), ember.tensor(b, dtype=ember.float32, device="cuda")
    try:
        errors = {}
        for flag in (False, True):
            ember.backends.cuda.matmul.allow_tf32 = flag
            got = (ea @ eb).cpu().numpy().astype(np.float64)
            errors[flag] = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    finally:
        ember.backends.cuda.matmul.allow_tf32 = False
    assert errors[False] < 1e-5 < errors[True] < 5e-3, errors


def test_random_numbers_are_drawn_on_the_device_and_seeded():
    ember.manual_seed(0)
    a = ember.rand(1000, device="cuda")
    assert isinstance(a._data, cupy.ndarray)
    ember.manual_seed(0)
    np.testing.assert_array_equal(ember.rand(1000, device="cuda").cpu().numpy(), a.cpu().numpy())
    state = ember.cuda.get_rng_state()
    n1 = ember.randn(10, device="cuda")
    ember.cuda.set_rng_state(state)
    np.testing.assert_array_equal(ember.randn(10, device="cuda").cpu().numpy(), n1.cpu().numpy())
    d = ember.nn.functional.dropout(ember.ones(10000, device="cuda"), 0.5)
    kept = float((d != 0).float().mean().item())
    assert 0.45 < kept < 0.55


def test_checkpoint_saved_on_gpu_loads_on_cpu(tmp_path):
    model = ember.nn.Linear(4, 3).cuda()
    ember.save(model.state_dict(), tmp_path / "m.pt")
    state = ember.load(tmp_path / "m.pt", map_location="cpu")
    for k, v in model.state_dict().items():
        assert state[k].device.type == "cpu"
        np.testing.assert_array_equal(state[k].numpy(), v.cpu().numpy())
