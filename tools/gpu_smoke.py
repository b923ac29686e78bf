"""The first minute of a GPU session (tools/gpu_session.sh smoke): does each piece of ember's CUDA path run, and
does it agree with a reference? Every check runs in its own try block and prints one line, ``ok`` or ``FAIL``
with the error, so one broken piece does not hide the others. Runs on the stand-in device too
(``EMBER_CUDA_STANDIN=1``: the session script's dry run).

    python tools/gpu_smoke.py
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import ember  # noqa: E402

FAILED: list[str] = []


def check(name: str, fn: Callable[[], Any]) -> None:
    t0 = time.perf_counter()
    try:
        detail = fn()
        print(f"ok    {name}: {detail} ({time.perf_counter() - t0:.1f} s)", flush=True)
    except Exception as error:  # noqa: BLE001 - report and go on
        FAILED.append(name)
        print(f"FAIL  {name}: {type(error).__name__}: {error}", flush=True)
        print("      " + "      ".join(traceback.format_exc().splitlines(True)[-6:]), flush=True)


def versions() -> str:
    parts = [f"ember cuda available={ember.cuda.is_available()} count={ember.cuda.device_count()}"]
    if ember.cuda.is_available():
        parts.append(f"device={ember.cuda.get_device_name()}")
    try:
        import cupy
        parts.append(f"cupy {cupy.__version__}")
    except ImportError as error:
        parts.append(f"cupy: not here ({error})")
    try:
        import torch
        parts.append(f"torch {torch.__version__} cuda={torch.cuda.is_available()}")
    except ImportError:
        parts.append("torch: not here")
    from ember.backends import cuda_cudnn
    try:
        parts.append(f"cuDNN for ember: {ember.backends.cudnn.is_available()} version {ember.backends.cudnn.version()}"
                     + ("" if ember.backends.cudnn.is_available()
                        else f" ({cuda_cudnn.unavailable_reason() or 'no GPU'})"))
    except Exception as error:  # noqa: BLE001 - the frontend imported but cuDNN's library did not load
        parts.append(f"cuDNN for ember: the frontend loads but cuDNN does not answer ({type(error).__name__}: "
                     f"{error}; LD_LIBRARY_PATH must name the folder of libcudnn.so.9)")
    return "; ".join(parts)


def matmul() -> str:
    a, b = ember.randn(1024, 1024, device="cuda"), ember.randn(1024, 1024, device="cuda")
    ref = a.cpu().double().numpy() @ b.cpu().double().numpy()
    err = np.linalg.norm((a @ b).cpu().numpy() - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    return f"fp32 rel err {err:.2e}"


def fused() -> str:
    a = ember.randn(4096, device="cuda")
    f = ember.compile(lambda x: (ember.tanh(x * 1.5 + 0.25) * x - 0.5).relu(), fallback="raise")
    for _ in range(3):
        y = f(a)
    same = bool((y == (ember.tanh(a * 1.5 + 0.25) * a - 0.5).relu()).all().item())
    r = ember.compile(lambda x: (ember.tanh(x) * 0.5).sum(), fallback="raise", measure=False)
    for _ in range(3):
        s = r(a)
    want = (ember.tanh(a) * 0.5).sum().item()
    assert same and abs(s.item() - want) <= 1e-4 * max(1.0, abs(want)), (same, s.item(), want)
    return f"elementwise == eager, reduction {s.item():.6f} vs {want:.6f}"


def rng() -> str:
    ember.manual_seed(0)
    u = ember.rand(100000, device="cuda")
    assert type(u._data).__module__.split(".")[0] in ("cupy", "ember"), type(u._data)
    m = float(u.mean().item())
    assert abs(m - 0.5) < 0.01, m
    state = ember.cuda.get_rng_state()
    a = ember.randn(5, device="cuda")
    ember.cuda.set_rng_state(state)
    assert bool((ember.randn(5, device="cuda") == a).all().item())
    return f"on {type(u._data).__module__}, mean {m:.4f}, state restores"


def norms_with_and_without_cudnn() -> str:
    """Conv, batch norm and layer norm forward + backward with cuDNN on and off (the CuPy path): equal to 1e-4."""
    results = []
    for enabled in (True, False):
        ember.backends.cudnn.enabled = enabled
        ember.manual_seed(1)
        model = ember.nn.Sequential(ember.nn.Conv2d(3, 8, 3, padding=1), ember.nn.BatchNorm2d(8), ember.nn.ReLU(),
                                    ember.nn.Flatten(), ember.nn.LayerNorm(8 * 16 * 16), ember.nn.Linear(2048, 4)).cuda()
        x = ember.tensor(np.random.default_rng(2).standard_normal((16, 3, 16, 16)).astype(np.float32), device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        results.append([loss.item()] + [p.grad.cpu().numpy() for p in model.parameters()])
    ember.backends.cudnn.enabled = True
    worst = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-12))
                for a, b in zip(results[0][1:], results[1][1:]))
    assert worst < 1e-3 and abs(results[0][0] - results[1][0]) < 1e-4 * abs(results[1][0]), worst
    return f"loss {results[0][0]:.6f} (cuDNN) vs {results[1][0]:.6f}, worst relative gradient difference {worst:.1e}"


def cuda_graph() -> str:
    g = ember.cuda.CUDAGraph()
    s = ember.ones(4, device="cuda")
    with ember.cuda.graph(g):
        t = s * 2 + 1
    s.fill_(3.0)
    g.replay()
    assert t.cpu().tolist() == [7.0] * 4, t.cpu().tolist()
    return "replay read the new input"


def compiled_steps_as_graphs() -> str:
    """A compiled step with dropout and capturable AdamW, mode='reduce-overhead': captured once, then replayed."""
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(32, 64), ember.nn.Dropout(0.1), ember.nn.GELU(),
                                ember.nn.Linear(64, 10)).cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    f = ember.compile(step, mode="reduce-overhead")
    x = ember.randn(128, 32, device="cuda")
    y = ember.randint(0, 10, (128,), device="cuda")
    losses = [f(x, y).item() for _ in range(8)]
    status = f.last.executable.status
    assert status.startswith("CUDA graph: replayed") and losses[-1] < losses[0], (status, losses)
    return f"{status}; loss {losses[0]:.4f} -> {losses[-1]:.4f}"


def memory() -> str:
    ember.cuda.reset_peak_memory_stats()
    x = ember.empty(1 << 20, device="cuda")
    peak = ember.cuda.max_memory_allocated()
    if type(x._data).__module__.startswith("cupy"):  # (the stand-in device keeps no allocator statistics)
        assert peak >= 4 << 20, peak
    del x
    return f"allocated {ember.cuda.memory_allocated()} B, peak {peak} B"


def main() -> int:
    print(versions(), flush=True)
    if not ember.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    for name, fn in (("matmul", matmul), ("fused kernels", fused), ("device random numbers", rng),
                     ("conv/batch norm/layer norm, cuDNN on vs off", norms_with_and_without_cudnn),
                     ("CUDA graph", cuda_graph), ("compiled steps as CUDA graphs", compiled_steps_as_graphs),
                     ("memory statistics", memory)):
        check(name, fn)
    print(f"smoke: {'all ok' if not FAILED else 'FAILED: ' + ', '.join(FAILED)}", flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
