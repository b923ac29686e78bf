#!/usr/bin/env bash
# What a session with a lent GPU runs, in as few device calls as possible (docs/gpu.md, issue 9).
# Each step is one `run` call of the device tool from the repository root; results land in $OUT
# (fetched back by the tool) and under benchmarks/results/ there. The device machine has CuPy 14
# (cupy-cuda13x), PyTorch 2.11 CUDA, NCCL, pytest, mpi4py: ember needs no wheels carried.
#
#   run: bash tools/gpu_session.sh smoke      (~1 min)  CuPy sees the GPU; ember matmul/fused kernel/RNG vs torch
#   run: bash tools/gpu_session.sh gpu-tests  (~3 min)  tests/backends (CUDA cases included) + DDP on cuda, 2 ranks
#   run: bash tools/gpu_session.sh suite      (~8 min)  the whole default suite, 'cuda' = CuPy (summary line)
#   run: bash tools/gpu_session.sh bench      (~6 min)  benchmarks/bench_gpu.py: every figure of issue 9
#
# Before the session, on any machine (no GPU): EMBER_CUDA_STANDIN=1 python benchmarks/bench_gpu.py --dry-run
# runs every workload with ember on the stand-in device and PyTorch on the CPU (checks the script).
# Paste into the `run` tool's command, e.g.:  bash tools/gpu_session.sh smoke
# (timeout_s 600; the whole session has 30 device minutes: smoke, gpu-tests, bench, then fixes).
set -u -o pipefail
OUT="${OUT:-/tmp/ember-gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
step="${1:-smoke}"

case "$step" in
smoke)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/smoke.log"
  "$PY" - <<'EOF' 2>&1 | tee -a "$OUT/smoke.log"
import time, numpy as np, cupy, torch, ember
print("cupy", cupy.__version__, "torch", torch.__version__, "ember cuda:", ember.cuda.is_available(),
      ember.cuda.device_count(), ember.cuda.get_device_name())
a = ember.randn(1024, 1024, device="cuda"); b = ember.randn(1024, 1024, device="cuda")
ref = a.cpu().double().numpy() @ b.cpu().double().numpy()
print("matmul rel err", np.linalg.norm((a @ b).cpu().numpy() - ref) / np.linalg.norm(ref))
f = ember.compile(lambda x: (ember.tanh(x * 1.5 + 0.25) * x - 0.5).relu(), fallback="raise")
for _ in range(3): y = f(a)
print("fused == eager:", bool((y == (ember.tanh(a * 1.5 + 0.25) * a - 0.5).relu()).all().item()))
ember.manual_seed(0); r = ember.rand(5, device="cuda"); print("rand on device:", type(r._data).__module__, r)
x = ember.randn(64, 1, 28, 28, device="cuda"); m = ember.nn.Conv2d(1, 8, 3).cuda(); print("conv", m(x).shape)
print("memory allocated", ember.cuda.memory_allocated(), "peak", ember.cuda.max_memory_allocated())
EOF
  ;;
gpu-tests)
  "$PY" -m pytest -q -p no:cacheprovider tests/backends tests/distributed/test_ddp_cuda_tensors.py 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -40
  ;;
suite)
  timeout 560 "$PY" -m pytest -q -p no:cacheprovider -x --timeout=120 2>&1 | tee "$OUT/suite.log" | tail -30
  ;;
bench)
  "$PY" benchmarks/bench_gpu.py --out "$OUT" 2>&1 | tail -60
  mkdir -p benchmarks/results && cp "$OUT"/gpu-*.txt "$OUT"/gpu-*.json benchmarks/results/ 2>/dev/null
  ;;
*)
  echo "usage: bash tools/gpu_session.sh smoke|gpu-tests|suite|bench" >&2
  exit 2
  ;;
esac
