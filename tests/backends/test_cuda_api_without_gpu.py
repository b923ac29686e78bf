"""``ember.cuda`` and ``torch.backends.cuda`` on a machine without a GPU: PyTorch's CPU-build answers.

``is_available()`` False and ``device_count()`` 0, as ``torch.cuda`` says on a CPU build; calls that
need a device raise an error naming the call and the fix; seeding and ``empty_cache`` are accepted;
``pin_memory`` needs the CUDA backend; ``DataLoader(pin_memory=True)`` warns once and passes batches
through (torch's behaviour). Compared with torch 2.13 (a CPU build) where torch answers.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cuda_flags, get_backend

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(ember.cuda.is_available(), reason="a CUDA device (or the stand-in) is present")


def test_availability_matches_torch_cpu_build():
    assert torch.cuda.is_available() is False  # the reference is a CPU build
    assert ember.cuda.is_available() is torch.cuda.is_available()
    assert ember.cuda.device_count() == torch.cuda.device_count() == 0
    assert ember.cuda.is_bf16_supported() is False


@pytest.mark.parametrize("call", [
    lambda: ember.cuda.synchronize(), lambda: ember.cuda.current_device(), lambda: ember.cuda.set_device(0),
    lambda: ember.cuda.reset_peak_memory_stats(),
    lambda: ember.cuda.get_device_name(), lambda: ember.cuda.get_device_properties(0),
    lambda: ember.cuda.Event(enable_timing=True), lambda: ember.cuda.Stream(), lambda: ember.cuda.current_stream(),
    lambda: ember.cuda.mem_get_info(),
])
def test_calls_that_need_a_device_say_so(call):
    with pytest.raises(RuntimeError, match=r"ember\.cuda\.\w+: no CUDA device is available .*device='cpu'"):
        call()


def test_memory_queries_answer_zero_as_torch_cpu_build():
    # llm.c's train_gpt2.py prints torch.cuda.max_memory_allocated() at the end of every run, on any device
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        assert getattr(ember.cuda, name)() == getattr(torch.cuda, name)() == 0, name
        assert getattr(ember.cuda, name)(0) == getattr(torch.cuda, name)(0) == 0, name
    assert ember.cuda.memory_stats() == dict(torch.cuda.memory_stats()) == {}


def test_seeding_and_cache_are_accepted_without_a_device():
    ember.cuda.manual_seed(1)
    ember.cuda.manual_seed_all(1)
    ember.cuda.empty_cache()
    torch.cuda.manual_seed_all(1)  # torch accepts these on a CPU build too
    torch.cuda.empty_cache()
    a = ember.manual_seed(3) and ember.rand(4)
    ember.manual_seed(3)
    np.testing.assert_array_equal(ember.rand(4).numpy(), a.numpy())  # CPU numbers unchanged by the CUDA seeding


def test_device_and_transfer_errors_name_the_fix():
    # naming the device works, as torch.device('cuda') does on a CPU build (library code uses it as a default
    # argument); using it raises
    assert str(ember.device("cuda")) == str(torch.device("cuda")) == "cuda"
    for make in (lambda: ember.zeros(2, device=ember.device("cuda")), lambda: ember.zeros(2, device="cuda"),
                 lambda: ember.ones(2).cuda(), lambda: ember.ones(2).to("cuda:1")):
        with pytest.raises(RuntimeError, match="no CUDA device is available .*pip install 'ember\\[gpu\\]'"):
            make()


def test_pinned_memory_needs_the_backend():
    x = ember.arange(4.0)
    assert x.is_pinned() is False and torch.arange(4.0).is_pinned() is False
    with pytest.raises(RuntimeError, match=r"pin_memory\(\): no CUDA device is available"):
        x.pin_memory()
    assert x.to("cpu", non_blocking=True) is x


def test_dataloader_pin_memory_warns_once_and_passes_batches_through():
    data = ember.data.TensorDataset(ember.arange(10.0), ember.arange(10))
    loader = ember.data.DataLoader(data, batch_size=4, pin_memory=True)
    from ember import cuda as ember_cuda

    ember_cuda._WARNED_NO_PIN[0] = False
    with pytest.warns(UserWarning, match="no accelerator is found"):
        batches = list(loader)
    assert [b[0].tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    assert not any(b[0].is_pinned() for b in batches)


def test_backends_cuda_flags_like_torch():
    assert ember.backends.cuda.matmul.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is False
    calls = []
    cuda_flags.on_change(lambda: calls.append(cuda_flags.matmul.allow_tf32))
    try:
        ember.backends.cuda.matmul.allow_tf32 = True
        ember.backends.cuda.matmul.allow_tf32 = False
    finally:
        cuda_flags._LISTENERS.pop()
    assert calls == [True, False]  # the CUDA backend applies the flag to CuPy's GEMM compute type this way


def test_cuda_backend_module_imports_without_cupy_and_reports_why():
    import ember.backends.cuda as cuda_backend

    assert cuda_backend.matmul is cuda_flags.matmul  # torch.backends.cuda's names live there too
    reason = cuda_backend.BACKEND.unavailable_reason()
    assert "CuPy" in reason
    with pytest.raises(RuntimeError, match="CuPy"):
        get_backend("cuda")
