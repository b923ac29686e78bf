#!/usr/bin/env bash
# What a session with a lent GPU runs (docs/gpu.md, issue 9). ONE `run` call of the device tool does the whole
# check in about 8 minutes (timeout_s 600) and writes every log under $OUT (fetched back by the tool) and under
# benchmarks/results/ there:
#
#   run (carry [".whl"]): bash tools/gpu_session.sh all
#       1. smoke      (~1 min)  GPU, CuPy, torch, cuDNN frontend seen; ember matmul/fused kernel/RNG/conv; CUDA graph
#       2. gpu-tests  (<=200 s) tests/cuda (graphs, cuDNN, ReductionKernel on the GPU) + tests/backends (CUDA cases)
#       3. bench      (~4 min)  benchmarks/bench_gpu.py, issue 9 item 6 + cuDNN on/off + CUDA graph on/off
#                               (--budget 150: no workload starts after 150 s; the log is written line by line,
#                               so a run the call's limit stops keeps what it measured)
#   later calls:  bash tools/gpu_session.sh suite   (~8 min) the whole default suite, 'cuda' = CuPy (summary line)
#                 bash tools/gpu_session.sh bench   the benchmark alone (e.g. after a fix)
#
# Before the session, here (no GPU):
#   bash tools/gpu_session.sh prepare   downloads the cuDNN frontend wheel (the GPU machine has cuDNN's libraries,
#                                       not the `cudnn` Python package) into .whl/ of the checkout the device
#                                       tool sends, ignored by git; name ".whl" in the run's carry
#   bash tools/gpu_session.sh --dry-run all   the same steps on the stand-in device (EMBER_CUDA_STANDIN=1, PyTorch
#                                       on the CPU, tiny sizes): checks the script end to end; times mean nothing
# Give the machine back between fixing rounds (`give_back`): a warm machine counts against the 30 minutes.
set -u -o pipefail
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
step="${1:-all}"
OUT="${OUT:-/tmp/ember-gpu-out}"
RESULTS=benchmarks/results  # (a dry run keeps its files in $OUT only)
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
STAMP="$(date -u +%Y%m%d-%H%M)"
BENCH_ARGS=(--out "$OUT" --budget 150)
if [ "$DRY" = 1 ]; then
  export EMBER_CUDA_STANDIN=1
  RESULTS="$OUT"
  BENCH_ARGS=(--out "$OUT" --dry-run --only matmul,chain,dispatch,modes --budget 120)
fi

wheels() {  # the carried wheels (the cuDNN frontend), installed where this machine's Python finds them
  if ls .whl/*.whl >/dev/null 2>&1 && [ "$DRY" = 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
}

smoke() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "(no nvidia-smi)"
  "$PY" - <<'EOF'
import numpy as np, ember
try:
    import cupy; print("cupy", cupy.__version__)
except ImportError as error:
    print("cupy: not here:", error)
import torch
print("torch", torch.__version__, "ember cuda:", ember.cuda.is_available(), ember.cuda.device_count(),
      ember.cuda.get_device_name())
print("cuDNN for ember:", ember.backends.cudnn.is_available(), ember.backends.cudnn.version())
a = ember.randn(1024, 1024, device="cuda"); b = ember.randn(1024, 1024, device="cuda")
ref = a.cpu().double().numpy() @ b.cpu().double().numpy()
print("matmul rel err", np.linalg.norm((a @ b).cpu().numpy() - ref) / np.linalg.norm(ref))
f = ember.compile(lambda x: (ember.tanh(x * 1.5 + 0.25) * x - 0.5).relu(), fallback="raise")
for _ in range(3): y = f(a)
print("fused == eager:", bool((y == (ember.tanh(a * 1.5 + 0.25) * a - 0.5).relu()).all().item()))
r = ember.compile(lambda x: (ember.tanh(x) * 0.5).sum(), fallback="raise", measure=False)
for _ in range(3): s = r(a)
print("fused reduction vs eager:", s.item(), (ember.tanh(a) * 0.5).sum().item())
ember.manual_seed(0); print("rand on device:", type(ember.rand(5, device="cuda")._data).__module__)
x = ember.randn(64, 1, 28, 28, device="cuda"); m = ember.nn.Conv2d(1, 8, 3).cuda(); print("conv", m(x).shape)
g = ember.cuda.CUDAGraph(); s = ember.ones(4, device="cuda")
with ember.cuda.graph(g):
    t = s * 2 + 1
s.fill_(3.0); g.replay(); print("CUDA graph replay:", t.cpu().tolist())
print("memory allocated", ember.cuda.memory_allocated(), "peak", ember.cuda.max_memory_allocated())
EOF
  } 2>&1 | tee "$OUT/smoke.log"
}

gpu_tests() {
  local tests=(tests/cuda tests/backends tests/distributed/test_ddp_cuda_tensors.py)
  [ "$DRY" = 1 ] && tests=(tests/cuda)
  local limit=(--timeout=120)
  "$PY" -c "import pytest_timeout" 2>/dev/null || limit=()
  timeout 200 "$PY" -m pytest -q -p no:cacheprovider -rfEs "${limit[@]}" "${tests[@]}" 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -25
}

bench() {
  "$PY" benchmarks/bench_gpu.py "${BENCH_ARGS[@]}" 2>&1 | tail -40
  if [ "$RESULTS" != "$OUT" ]; then mkdir -p "$RESULTS"; cp "$OUT"/gpu-*.txt "$OUT"/gpu-*.json "$RESULTS"/ 2>/dev/null; fi
  return 0
}

case "$step" in
prepare)
  mkdir -p .whl
  exclude="$(git rev-parse --git-common-dir)/info/exclude"
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
  "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    -d .whl "nvidia-cudnn-frontend==1.32.0"
  ls -la .whl
  ;;
smoke) wheels; smoke ;;
gpu-tests) wheels; gpu_tests ;;
bench) wheels; bench ;;
all)
  wheels
  start=$SECONDS
  smoke; echo "== smoke: $((SECONDS - start)) s"
  gpu_tests; echo "== gpu-tests: $((SECONDS - start)) s"
  bench; echo "== bench: $((SECONDS - start)) s"
  { echo "ember GPU session $STAMP (dry run: $DRY)"; cat "$OUT/smoke.log"; echo; tail -25 "$OUT/gpu-tests.log"; } \
    > "$OUT/session-$STAMP.txt"
  if [ "$RESULTS" != "$OUT" ]; then cp "$OUT/session-$STAMP.txt" "$RESULTS"/ 2>/dev/null; fi
  echo "== logs in $OUT: $(ls "$OUT" | tr '\n' ' ')"
  ;;
suite)
  wheels
  timeout 560 "$PY" -m pytest -q -p no:cacheprovider -x --timeout=120 2>&1 | tee "$OUT/suite.log" | tail -30
  ;;
*)
  echo "usage: bash tools/gpu_session.sh [--dry-run] prepare|smoke|gpu-tests|bench|all|suite" >&2
  exit 2
  ;;
esac
