"""ember on an NVIDIA GPU against PyTorch CUDA, side by side in one process (issue 9's figures).

    python benchmarks/bench_gpu.py                 # everything, log under benchmarks/results/
    python benchmarks/bench_gpu.py --only matmul,chain --quick

Workloads (ember and PyTorch run the same model code, weights copied, same inputs):
  matmul   8192^3 in fp32, TF32 (``backends.cuda.matmul.allow_tf32``) and bf16; results checked against
           PyTorch's (relative error) before timing
  w3       the README's MNIST CNN, batch 256, SGD
  w4       pre-LN Transformer encoder block B=32 S=512 D=1024 16 heads MLP 4096, Adam, fp32 and bf16 autocast
  gpt2     GPT-2 small (124M: 12 layers, d 768, 12 heads, vocab 50257), B=8 S=1024, bf16 autocast, AdamW
  chain    a 100-op elementwise chain, forward and backward: ember.compile (fused CUDA kernels) vs
           PyTorch eager
  dispatch one small op (a + b on 1,000 floats): per-call cost with the GPU idle between calls
  modes    the switches of issue 9 item 4 on and off, each next to PyTorch eager: the W3 step with cuDNN on
           and off (ember.backends.cudnn.enabled), and compiled W3 / MLP steps replayed as CUDA graphs
           (ember.compile(mode="reduce-overhead")) against the same steps compiled kernel by kernel; the
           graph's status line (replayed, or why not) is printed

Timing: CUDA events around each step (ember.cuda.Event / torch.cuda.Event), warm-up calls first
(kernel compilation, cuBLAS handles), median of repeats, the two libraries in alternating rounds.
Ratios are ember time / PyTorch time (under 1: ember faster). MFU is achieved FLOP/s over the best
8192^3 matmul throughput measured here for that precision (the library's ceiling on this card).

Each workload runs in its own try block: a failure prints its traceback and the rest still run, so
one call on a lent GPU gives every figure it can. Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import io
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import ember  # noqa: E402

TARGETS = {  # issue 9: ember time / PyTorch time must stay at or under these
    "matmul fp32": 1 / 0.9, "matmul tf32": 1 / 0.9, "matmul bf16": 1 / 0.9, "w3 fp32": 1.2, "w3 bf16 autocast": 1.2,
    "w4 fp32": 1.2,
    "w4 bf16 autocast": 1.2, "gpt2 bf16 autocast": 1.3, "chain fwd+bwd": 0.2,
}


class Log:
    """Print and keep every line (written to the results file at the end)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.path: Path | None = None  # set by main: every line also goes there at once (a killed run keeps its log)

    def __call__(self, *parts: Any) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.buffer.write(line + "\n")
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(line + "\n")


log = Log()
# PyTorch's device: "cuda"; "cpu" in --dry-run (ember then runs on the stand-in device: the script's
# logic and ember's device paths are checked on a machine without a GPU; the figures mean nothing).
TORCH_DEVICE = "cuda"
DRY = False  # --dry-run: tiny sizes


def _sync(lib: Any) -> None:
    if lib is ember or TORCH_DEVICE == "cuda":
        lib.cuda.synchronize()


# ---- timing -------------------------------------------------------------------------------------------
def event_ms(lib: Any, fn: Callable[[], Any], repeats: int) -> list[float]:
    """Milliseconds of ``fn`` per call, by CUDA events of ``lib`` (ember.cuda or torch.cuda), one sample
    per call."""
    samples = []
    if lib is not ember and TORCH_DEVICE != "cuda":  # dry run: PyTorch on the CPU, host clock
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return samples
    for _ in range(repeats):
        start, end = lib.cuda.Event(enable_timing=True), lib.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def side_by_side(fns: dict[str, tuple[Any, Callable[[], Any]]], warmup: int, repeats: int,
                 rounds: int = 3) -> dict[str, float]:
    """Median ms per call of each (lib, fn), in alternating rounds after ``warmup`` calls each."""
    for lib, fn in fns.values():
        for _ in range(warmup):
            fn()
        _sync(lib)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, (lib, fn) in fns.items():
            samples[name] += event_ms(lib, fn, repeats)
    return {name: statistics.median(s) for name, s in samples.items()}


RESULTS: dict[str, dict] = {}


def report(name: str, ember_ms: float, torch_ms: float | None, flops: float | None = None,
           peak: float | None = None) -> None:
    row: dict[str, Any] = {"ember_ms": ember_ms, "torch_ms": torch_ms}
    text = f"  {name:<24} ember {ember_ms:10.3f} ms"
    if torch_ms:
        ratio = ember_ms / torch_ms
        row["ratio"] = ratio
        target = TARGETS.get(name)
        verdict = "" if target is None else (" (target <= %.2fx: %s)" % (target, "met" if ratio <= target else
                                                                          "NOT met"))
        text += f"   torch {torch_ms:10.3f} ms   ratio {ratio:6.3f}x{verdict}"
    if flops:
        achieved = flops / (ember_ms * 1e-3)
        row["ember_tflops"] = achieved / 1e12
        text += f"   {achieved / 1e12:7.1f} TFLOP/s"
        if peak:
            row["mfu"] = achieved / peak
            text += f"   MFU {100 * achieved / peak:5.1f}%"
    RESULTS[name] = row
    log(text)


def check(name: str, got: Any, want: Any, tol: float) -> None:
    """Relative Frobenius error of ember's result against PyTorch's (both brought to float64 on the host)."""
    import numpy as np

    g = np.asarray(got.detach().float().cpu().numpy(), dtype=np.float64)
    w = want.detach().float().cpu().numpy().astype(np.float64)
    err = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))
    ok = err <= tol and np.isfinite(g).all()
    RESULTS.setdefault("checks", {})[name] = {"rel_err": err, "tol": tol, "ok": bool(ok)}
    log(f"  check {name:<22} rel. error {err:.2e} (tolerance {tol:.0e}): {'ok' if ok else 'WRONG'}")


# ---- helpers ------------------------------------------------------------------------------------------
def to_ember(t: Any) -> Any:
    """A torch CUDA tensor's values as an ember CUDA tensor (through the host: exact)."""
    return ember.tensor(t.detach().cpu().float().numpy(), dtype=getattr(ember, str(t.dtype).split(".")[-1]),
                        device="cuda")


def copy_weights(torch_module: Any, ember_module: Any) -> None:
    state = {k: ember.tensor(v.detach().cpu().numpy()) for k, v in torch_module.state_dict().items()}
    ember_module.load_state_dict(state)


def train_step(lib: Any, model: Any, opt: Any, loss_fn: Callable, x: Any, y: Any,
               autocast: Any = None) -> Callable[[], Any]:
    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        if autocast is not None:
            with lib.autocast("cuda" if lib is ember else TORCH_DEVICE, dtype=autocast):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


# ---- workloads ----------------------------------------------------------------------------------------
PEAK: dict[str, float] = {}


def bench_matmul(torch: Any, quick: bool) -> None:
    n = 128 if DRY else 2048 if quick else 8192
    log(f"\nmatmul {n}x{n}x{n}")
    a_t = torch.randn(n, n, device=TORCH_DEVICE)
    b_t = torch.randn(n, n, device=TORCH_DEVICE)
    a_e, b_e = to_ember(a_t), to_ember(b_t)
    flops = 2.0 * n ** 3
    for mode in ("fp32", "tf32", "bf16"):
        tf32 = mode == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ember.backends.cuda.matmul.allow_tf32 = tf32
        at, bt, ae, be = (a_t, b_t, a_e, b_e) if mode != "bf16" else \
            (a_t.bfloat16(), b_t.bfloat16(), a_e.bfloat16(), b_e.bfloat16())
        ref64 = (a_t.double() @ b_t.double()) if not quick or n <= 4096 else None
        got, want = ae @ be, at @ bt
        tol = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 2e-2}[mode]
        if ref64 is not None:
            check(f"matmul {mode} vs fp64", got, ref64, tol)
            check(f"torch {mode} vs fp64", want, ref64, tol)
        times = side_by_side({"ember": (ember, lambda: ae @ be), "torch": (torch, lambda: at @ bt)},
                             warmup=3, repeats=10)
        PEAK[mode] = max(PEAK.get(mode, 0.0), flops / (min(times.values()) * 1e-3))
        report(f"matmul {mode}", times["ember"], times["torch"], flops, PEAK[mode])
    torch.backends.cuda.matmul.allow_tf32 = False
    ember.backends.cuda.matmul.allow_tf32 = False


def bench_w3(torch: Any, quick: bool) -> None:
    import workload_models as models

    batch = 8 if DRY else 256
    log(f"\nW3: MNIST CNN (conv32-pool-conv64-pool-linear), batch {batch}, SGD")
    torch.manual_seed(0)
    m_t = models.mnist_cnn(torch)
    m_e = models.mnist_cnn(ember)
    copy_weights(m_t, m_e)
    m_t, m_e = m_t.to(TORCH_DEVICE), m_e.cuda()
    x_t = torch.randn(batch, 1, 28, 28, device=TORCH_DEVICE)
    y_t = torch.randint(0, 10, (batch,), device=TORCH_DEVICE)
    x_e, y_e = to_ember(x_t), to_ember(y_t)
    check("w3 forward", m_e(x_e), m_t(x_t), 1e-4)
    step_t = train_step(torch, m_t, torch.optim.SGD(m_t.parameters(), 0.01), torch.nn.functional.cross_entropy,
                        x_t, y_t)
    step_e = train_step(ember, m_e, ember.optim.SGD(m_e.parameters(), 0.01), ember.nn.functional.cross_entropy,
                        x_e, y_e)
    times = side_by_side({"ember": (ember, step_e), "torch": (torch, step_t)}, warmup=3, repeats=10)
    report("w3 fp32", times["ember"], times["torch"])
    step_t = train_step(torch, m_t, torch.optim.SGD(m_t.parameters(), 0.01), torch.nn.functional.cross_entropy,
                        x_t, y_t, torch.bfloat16)
    step_e = train_step(ember, m_e, ember.optim.SGD(m_e.parameters(), 0.01), ember.nn.functional.cross_entropy,
                        x_e, y_e, ember.bfloat16)
    times = side_by_side({"ember": (ember, step_e), "torch": (torch, step_t)}, warmup=3, repeats=10)
    report("w3 bf16 autocast", times["ember"], times["torch"])


def bench_w4(torch: Any, quick: bool) -> None:
    b, s, d, h, f = (2, 16, 32, 4, 64) if DRY else (8, 128, 256, 4, 1024) if quick else (32, 512, 1024, 16, 4096)
    log(f"\nW4: pre-LN encoder block B={b} S={s} D={d} {h} heads MLP {f}, Adam")
    make = lambda lib: lib.nn.TransformerEncoderLayer(d, h, f, dropout=0.0, batch_first=True, norm_first=True)
    torch.manual_seed(0)
    m_t, m_e = make(torch), make(ember)
    copy_weights(m_t, m_e)
    m_t, m_e = m_t.to(TORCH_DEVICE), m_e.cuda()
    x_t = torch.randn(b, s, d, device=TORCH_DEVICE)
    x_e = to_ember(x_t)
    check("w4 forward", m_e(x_e), m_t(x_t), 1e-4)
    flops = 3 * 2 * b * s * (4 * d * d + 2 * d * f) + 3 * 4 * b * s * s * d  # fwd + 2x for bwd: matmuls only
    for mode, dtype in (("fp32", None), ("bf16 autocast", "bf16")):
        step_t = train_step(torch, m_t, torch.optim.Adam(m_t.parameters(), 1e-4), torch.nn.functional.mse_loss,
                            x_t, x_t, torch.bfloat16 if dtype else None)
        step_e = train_step(ember, m_e, ember.optim.Adam(m_e.parameters(), 1e-4), ember.nn.functional.mse_loss,
                            x_e, x_e, ember.bfloat16 if dtype else None)
        times = side_by_side({"ember": (ember, step_e), "torch": (torch, step_t)}, warmup=3, repeats=5)
        report(f"w4 {mode}", times["ember"], times["torch"], flops, PEAK.get("bf16" if dtype else "fp32"))


def bench_gpt2(torch: Any, quick: bool) -> None:
    import workload_models as models

    layers, d, heads, context, vocab, b = (1, 32, 2, 16, 97, 2) if DRY else (2, 256, 4, 256, 50257, 2) if quick \
        else (12, 768, 12, 1024, 50257, 8)
    log(f"\nGPT-2 small: {layers} layers, d {d}, {heads} heads, vocab {vocab}, B={b} S={context}, bf16 autocast, "
        "AdamW")
    torch.manual_seed(0)
    m_t = models.gpt(torch, layers=layers, d=d, heads=heads, context=context, vocab=vocab)
    m_e = models.gpt(ember, layers=layers, d=d, heads=heads, context=context, vocab=vocab)
    copy_weights(m_t, m_e)
    m_t, m_e = m_t.to(TORCH_DEVICE), m_e.cuda()
    params = sum(p.numel() for p in m_t.parameters())
    idx_t = torch.randint(0, vocab, (b, context), device=TORCH_DEVICE)
    tgt_t = torch.randint(0, vocab, (b, context), device=TORCH_DEVICE)
    idx_e, tgt_e = to_ember(idx_t), to_ember(tgt_t)
    with torch.no_grad(), ember.no_grad():
        check("gpt2 forward (fp32)", m_e(idx_e[:1]), m_t(idx_t[:1]), 1e-3)

    def loss_fn(lib: Any) -> Callable:
        return lambda logits, y: lib.nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))

    step_t = train_step(torch, m_t, torch.optim.AdamW(m_t.parameters(), 3e-4), loss_fn(torch), idx_t, tgt_t,
                        torch.bfloat16)
    step_e = train_step(ember, m_e, ember.optim.AdamW(m_e.parameters(), 3e-4), loss_fn(ember), idx_e, tgt_e,
                        ember.bfloat16)
    tokens = b * context
    flops = 6 * params * tokens + 12 * layers * d * context * tokens  # nanoGPT's estimate (fwd + bwd)
    log(f"  {params / 1e6:.1f}M parameters, {flops / 1e12:.2f} TFLOP per step")
    times = side_by_side({"ember": (ember, step_e), "torch": (torch, step_t)}, warmup=2, repeats=3)
    report("gpt2 bf16 autocast", times["ember"], times["torch"], flops, PEAK.get("bf16"))


def _chain(lib: Any, x: Any) -> Any:
    """100 elementwise ops (a mix of arithmetic and transcendental), then a sum."""
    for k in range(25):
        x = lib.tanh(x * 1.01 + 0.01 * k) * 0.9 - 0.001
    return x.sum()


def bench_chain(torch: Any, quick: bool) -> None:
    n = 2 ** 10 if DRY else 2 ** 20 if quick else 2 ** 24
    log(f"\n100-op elementwise chain, forward + backward, {n} float32 elements")
    x_t = torch.randn(n, device=TORCH_DEVICE, requires_grad=True)
    x_e = to_ember(x_t.detach()).requires_grad_(True)

    def eager_t() -> Any:
        x_t.grad = None
        _chain(torch, x_t).backward()
        return x_t.grad

    def step() -> Any:  # x_e is reached, not passed: backward() writing an argument's .grad runs eagerly
        x_e.grad = None
        loss = _chain(ember, x_e)
        loss.backward()
        return loss

    compiled = ember.compile(step, measure=False)  # (no speed trial: the figure is the compiled step's)
    for _ in range(3):
        compiled()
    assert compiled.last is not None, f"the chain did not compile: {compiled.eager_reason}"
    check("chain grad", x_e.grad, eager_t(), 1e-4)
    x_e2 = to_ember(x_t.detach()).requires_grad_(True)

    def eager_e() -> Any:
        x_e2.grad = None
        _chain(ember, x_e2).backward()
        return x_e2.grad

    times = side_by_side({"ember compiled": (ember, compiled), "ember eager": (ember, eager_e),
                          "torch": (torch, eager_t)}, warmup=2, repeats=10)
    report("chain fwd+bwd", times["ember compiled"], times["torch"])
    report("chain fwd+bwd (eager)", times["ember eager"], times["torch"])


def bench_dispatch(torch: Any, quick: bool) -> None:
    calls = 200 if DRY else 2000 if quick else 20000
    log(f"\nsmall-op dispatch: a + b on 1,000 floats, {calls} calls, per-call host time")
    a_t, b_t = torch.randn(1000, device=TORCH_DEVICE), torch.randn(1000, device=TORCH_DEVICE)
    a_e, b_e = to_ember(a_t), to_ember(b_t)
    out = {}
    for name, lib, a, b in (("ember", ember, a_e, b_e), ("torch", torch, a_t, b_t)):
        for _ in range(100):
            a + b
        _sync(lib)
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                a + b
            _sync(lib)
            samples.append((time.perf_counter() - start) / calls * 1e3)
        out[name] = statistics.median(samples)
    report("dispatch a+b (1k)", out["ember"], out["torch"])
    log(f"  = {out['ember'] * 1e3:.1f} us per op in ember, {out['torch'] * 1e3:.1f} us in PyTorch")


def _graph_status(compiled: Any) -> str:
    executable = getattr(getattr(compiled, "last", None), "executable", None)
    return getattr(executable, "status", "CUDA graph: no whole-step graph (" +
                   (compiled.eager_reason or "not a compiled whole step") + ")")


def bench_modes(torch: Any, quick: bool) -> None:
    """cuDNN on/off and CUDA graphs on/off (issue 9 item 4), each next to PyTorch eager."""
    import workload_models as models

    batch = 8 if DRY else 256
    log(f"\nmodes: W3 (batch {batch}) with cuDNN on/off, compiled steps with CUDA graphs on/off")
    torch.manual_seed(0)
    m_t = models.mnist_cnn(torch)
    x_t = torch.randn(batch, 1, 28, 28, device=TORCH_DEVICE)
    y_t = torch.randint(0, 10, (batch,), device=TORCH_DEVICE)
    x_e, y_e = to_ember(x_t), to_ember(y_t)
    m_t = m_t.to(TORCH_DEVICE)
    step_t = train_step(torch, m_t, torch.optim.SGD(m_t.parameters(), 0.01), torch.nn.functional.cross_entropy,
                        x_t, y_t)

    def ember_step(model_fn: Callable) -> Callable[[], Any]:
        m_e = model_fn(ember)
        copy_weights(m_t, m_e)
        m_e = m_e.cuda()
        return train_step(ember, m_e, ember.optim.SGD(m_e.parameters(), 0.01), ember.nn.functional.cross_entropy,
                          x_e, y_e)

    cudnn_was = ember.backends.cudnn.enabled
    log(f"  cuDNN available to ember: {ember.backends.cudnn.is_available()} (version {ember.backends.cudnn.version()})")
    try:
        for enabled in (True, False):
            ember.backends.cudnn.enabled = enabled
            step_e = ember_step(models.mnist_cnn)
            times = side_by_side({"ember": (ember, step_e), "torch": (torch, step_t)}, warmup=3, repeats=10)
            report(f"w3 eager cuDNN {'on' if enabled else 'off'}", times["ember"], times["torch"])
    finally:
        ember.backends.cudnn.enabled = cudnn_was
    plain = ember.compile(ember_step(models.mnist_cnn), measure=False)
    graphed = ember.compile(ember_step(models.mnist_cnn), mode="reduce-overhead")
    times = side_by_side({"graph": (ember, lambda: graphed()), "plain": (ember, lambda: plain()),
                          "torch": (torch, step_t)}, warmup=3, repeats=10)
    report("w3 compiled, CUDA graph on", times["graph"], times["torch"])
    report("w3 compiled, CUDA graph off", times["plain"], times["torch"])
    log(f"  {_graph_status(graphed)}")

    width = 64 if DRY else 512
    mlp = lambda lib: lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(784, width), lib.nn.ReLU(),
                                        lib.nn.Linear(width, width), lib.nn.ReLU(), lib.nn.Linear(width, 10))
    torch.manual_seed(0)
    m_t = mlp(torch).to(TORCH_DEVICE)
    step_t = train_step(torch, m_t, torch.optim.SGD(m_t.parameters(), 0.01, momentum=0.9),
                        torch.nn.functional.cross_entropy, x_t[:64], y_t[:64])

    def mlp_step() -> Callable[[], Any]:
        m_e = mlp(ember)
        copy_weights(m_t, m_e)
        m_e = m_e.cuda()
        return train_step(ember, m_e, ember.optim.SGD(m_e.parameters(), 0.01, momentum=0.9),
                          ember.nn.functional.cross_entropy, x_e[:64], y_e[:64])

    plain = ember.compile(mlp_step(), measure=False)
    graphed = ember.compile(mlp_step(), mode="reduce-overhead")
    eager = mlp_step()
    times = side_by_side({"graph": (ember, lambda: graphed()), "plain": (ember, lambda: plain()),
                          "eager": (ember, eager), "torch": (torch, step_t)}, warmup=3, repeats=20)
    report("mlp step, CUDA graph on", times["graph"], times["torch"])
    report("mlp step, CUDA graph off", times["plain"], times["torch"])
    report("mlp step, ember eager", times["eager"], times["torch"])
    log(f"  {_graph_status(graphed)}")


# The order a --budget run keeps: issue 9 item 6's figures first (matmul first: its throughput is every MFU's
# peak), the on/off switches of item 4 last.
WORKLOADS = {"matmul": bench_matmul, "chain": bench_chain, "dispatch": bench_dispatch, "w3": bench_w3,
             "w4": bench_w4, "gpt2": bench_gpt2, "modes": bench_modes}


# ---- main -----------------------------------------------------------------------------------------------
def environment(torch: Any) -> dict:
    import numpy as np

    info = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "python": sys.version.split()[0],
            "numpy": np.__version__, "ember_device": ember.cuda.get_device_name(), "torch": torch.__version__,
            "torch_device": TORCH_DEVICE}
    try:
        import cupy

        info["cupy"] = cupy.__version__
        info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        info["driver"] = cupy.cuda.runtime.driverGetVersion()
    except Exception as error:  # noqa: BLE001 - report, do not fail
        info["cupy"] = f"unavailable ({error})"
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {list(WORKLOADS)}")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run, figures not comparable)")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "results"),
                        help="folder for the log and JSON (default: $OUT if set, else benchmarks/results)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="seconds: start no new workload after this many (0: no limit); the GPU session keeps "
                             "one call inside its 10 minutes with it")
    parser.add_argument("--tag", default="",
                        help="names the files gpu-<tag>.txt/.json (tools/gpu_session.sh: <date>-<device>); default: "
                             "the date and ember's device name")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: ember on the stand-in device (EMBER_CUDA_STANDIN=1), PyTorch on the CPU, small "
                             "sizes; checks the script and ember's device paths, the times mean nothing")
    args = parser.parse_args(argv)
    global TORCH_DEVICE, DRY
    if args.dry_run:
        TORCH_DEVICE, args.quick, DRY = "cpu", True, True
    if not ember.cuda.is_available():
        try:
            ember.zeros(1, device="cuda")  # naming the device works; using it says what is missing
        except RuntimeError as error:
            print(f"bench_gpu: nothing to measure here: {error}")
        return 0
    try:
        import torch
    except ImportError:
        print("bench_gpu: PyTorch is not installed; the figures are ember vs PyTorch CUDA, so there is nothing to "
              "compare against")
        return 0
    if not torch.cuda.is_available() and not args.dry_run:
        print("bench_gpu: this PyTorch has no CUDA; the comparison needs PyTorch's CUDA build")
        return 0
    info = environment(torch)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M")
    device = "".join(c if c.isalnum() else "-" for c in info["ember_device"]).strip("-")
    base = out / (f"gpu-{args.tag}" if args.tag else
                  f"gpu-{stamp}-{device}{'-dry-run' if args.dry_run else '-quick' if args.quick else ''}")
    log.path = base.with_suffix(".txt")
    log.path.write_text(log.buffer.getvalue())
    log("bench_gpu:", json.dumps(info))
    failed, started = [], time.perf_counter()
    for name in args.only.split(","):
        name = name.strip()
        if args.budget and time.perf_counter() - started > args.budget:
            log(f"  ({name}: skipped, the {args.budget:.0f} s budget is spent)")
            continue
        if name not in WORKLOADS:
            log(f"unknown workload {name!r}; choose from {list(WORKLOADS)}")
            continue
        t0 = time.perf_counter()
        try:
            WORKLOADS[name](torch, args.quick)
        except Exception:  # noqa: BLE001 - keep going: one GPU call should bring back every figure it can
            failed.append(name)
            log(f"  {name} FAILED:\n" + traceback.format_exc())
        log(f"  ({name}: {time.perf_counter() - t0:.1f} s)")
        try:
            ember.cuda.empty_cache()
            if TORCH_DEVICE == "cuda":
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
    log("\nsummary (ratio = ember / PyTorch time):")
    for name, row in RESULTS.items():
        if name != "checks" and "ratio" in row:
            log(f"  {name:<24} {row['ratio']:6.3f}x" + (f"   MFU {100 * row['mfu']:.1f}%" if "mfu" in row else ""))
    if failed:
        log(f"failed workloads: {failed}")
    (base.with_suffix(".json")).write_text(json.dumps({"environment": info, "results": RESULTS}, indent=1))
    print(f"log: {base.with_suffix('.txt')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
