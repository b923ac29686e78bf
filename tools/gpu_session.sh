#!/usr/bin/env bash
# What a session with a lent GPU runs (docs/gpu.md "Plan for the first GPU session", issue 9 items 6 and 7).
# The device tool allows 10 minutes per call and 30 device minutes per session (the machine's start, ~1-2 min per
# fresh machine, and idle warm time count too). So the session is TWO calls, each ending by itself inside 600 s:
#
#   call 1, run(command="bash tools/gpu_session.sh all", carry=[".whl"], timeout_s=600)        ~9.5 min
#       smoke      <= 90 s  tools/gpu_smoke.py: GPU, CuPy, torch, cuDNN frontend seen; matmul, fused kernel and
#                           reduction, device RNG, conv + batch norm + layer norm with cuDNN on vs off, a CUDA graph
#                           replay, a compiled step with dropout and capturable AdamW replayed as a graph, memory stats
#       bench      until ~100 s are left: benchmarks/bench_gpu.py, issue 9 item 6 in this order: matmul 8192^3
#                           fp32/TF32/bf16 (the MFU peaks), the 100-op chain compiled, one small op's dispatch, W3
#                           (batch 256, fp32 and bf16 autocast), W4 (B=32 S=512 D=1024, fp32 and bf16 autocast),
#                           GPT-2 small (B=8 S=1024, bf16 autocast, AdamW, MFU), then `modes` (cuDNN on/off, CUDA
#                           graph on/off); no workload starts once its budget is spent, the log is written line by line
#       gpu-tests  the rest (<= 150 s): tests/cuda/test_cuda_features_on_gpu.py, tests/backends/test_cuda_on_gpu.py
#                           (graphs, cuDNN vs the CuPy path, Philox GPU == host, ...; call 2 runs them again in the suite)
#   call 2, run(command="bash tools/gpu_session.sh suite", carry=[".whl"], timeout_s=600)      ~9.5 min
#       the whole default suite (`make test`'s selection) with 8 xdist workers, 'cuda' served by CuPy: item 7's
#       summary line (pytest --timeout=120 per test; the run is cut at 560 s and says so)
#
# Every log lands in $OUT (the tool brings back at most 8 files): session-<stamp>-<device>.txt (smoke, GPU tests,
# bench summary), gpu-<stamp>-<device>.txt/.json (bench_gpu.py), suite-<stamp>-<device>.txt. Back here:
#   bash tools/gpu_session.sh collect <files_at>   copies them under benchmarks/results/ (commit them)
#
# Before the session, here (no GPU):
#   bash tools/gpu_session.sh prepare          downloads the cuDNN frontend wheel (the GPU machine has cuDNN's
#                                              libraries, not the `cudnn` Python package) into .whl/ of THIS
#                                              checkout (ignored by git); name ".whl" in each run's carry. The tool
#                                              sends the checkout the session was started in: run it there.
#   OUT=/tmp/x PYTHON=.venv/bin/python bash tools/gpu_session.sh --dry-run all   the same steps on the stand-in
#                                              device (EMBER_CUDA_STANDIN=1, PyTorch on the CPU, tiny sizes)
# Give the machine back between calls when fixing takes longer than its 30 s warm time (`give_back`).
set -u -o pipefail
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
step="${1:-all}"
OUT="${OUT:-/tmp/ember-gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
STAMP="$(date -u +%Y%m%d-%H%M)"
CALL_LIMIT="${CALL_LIMIT:-570}"  # seconds a call may use before the tool's 600 s: the steps below share it
START=$SECONDS
if [ "$DRY" = 1 ]; then export EMBER_CUDA_STANDIN=1; fi

device_name() {  # "NVIDIA-H200" (nvidia-smi), or the stand-in's name in a dry run
  local name=""
  [ "$DRY" = 0 ] && name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  [ -z "$name" ] && name="$("$PY" -c 'import ember; print(ember.cuda.get_device_name() if ember.cuda.is_available() else "no-gpu")' 2>/dev/null)"
  echo "${name:-unknown}" | tr -c 'A-Za-z0-9._\n-' '-' | sed 's/-\+/-/g; s/^-//; s/-$//'
}
DEVICE=none
case "$step" in prepare|collect) ;; *) DEVICE="$(device_name)" ;; esac
TAG="$STAMP-$DEVICE$([ "$DRY" = 1 ] && echo -dry-run)"
SESSION="$OUT/session-$TAG.txt"

left() { echo $((CALL_LIMIT - (SECONDS - START))); }

wheels() {  # the carried wheels (the cuDNN frontend), installed where this machine's Python finds them
  if ls .whl/*.whl >/dev/null 2>&1 && [ "$DRY" = 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
  # The frontend dlopens libcudnn.so.9 from LD_LIBRARY_PATH first, then <site-packages>/nvidia/cudnn/lib: name the
  # folder of the machine's nvidia-cudnn wheel (where PyTorch's cuDNN lives) whatever its layout (cu12 or cu13).
  local lib
  lib="$("$PY" -c 'import glob, os, sysconfig
hits = sorted(glob.glob(os.path.join(sysconfig.get_path("purelib"), "nvidia", "**", "libcudnn.so.9"), recursive=True))
print(os.path.dirname(hits[0]) if hits else "")' 2>/dev/null)"
  [ -n "$lib" ] && [ "$DRY" = 0 ] && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  return 0
}

smoke() {
  echo "== smoke ($DEVICE)"
  { [ "$DRY" = 0 ] && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    timeout 90 "$PY" tools/gpu_smoke.py; } 2>&1
}

gpu_tests() {
  echo "== gpu-tests"
  local tests=(tests/cuda/test_cuda_features_on_gpu.py tests/backends/test_cuda_on_gpu.py)
  [ "$DRY" = 1 ] && tests=(tests/cuda)
  local limit=(--timeout=60)
  "$PY" -c "import pytest_timeout" 2>/dev/null || limit=()
  local t=$(( $(left) - 10 ))
  [ "$t" -gt 150 ] && t=150
  [ "$t" -lt 20 ] && { echo "(gpu-tests skipped: $(left) s left in this call)"; return 0; }
  timeout "$t" "$PY" -m pytest -q -p no:cacheprovider -rfEs "${limit[@]}" "${tests[@]}" 2>&1 | tail -40
}

bench() {
  local reserve=$([ "$step" = all ] && echo 100 || echo 10)  # all: gpu-tests run after the bench
  local budget=$(( $(left) - reserve - 120 ))  # no workload starts after this; one (GPT-2) may take ~2 min
  [ "$budget" -lt 30 ] && budget=30
  local args=(--out "$OUT" --budget "$budget" --tag "$TAG")
  [ "$DRY" = 1 ] && args+=(--dry-run --only matmul,chain,dispatch,w3,modes)
  echo "== bench (no workload starts after $budget s; the call has $(left) s left)"
  timeout "$(( $(left) - reserve ))" "$PY" benchmarks/bench_gpu.py "${args[@]}" 2>&1 | tail -45
  [ "${PIPESTATUS[0]}" = 124 ] && echo "(bench cut at its share of the call; its log keeps every line measured)"
  return 0
}

suite() {
  echo "== suite (the default selection of make test, 'cuda' = $DEVICE)"
  local workers=(-n 8 --dist loadfile)
  "$PY" -c "import xdist" 2>/dev/null || workers=()
  [ "${#workers[@]}" -gt 0 ] && "$PY" -m pytest --help 2>/dev/null | grep -q -- --no-loadscope-reorder \
    && workers+=(--no-loadscope-reorder)
  local limit=(--timeout=120)
  "$PY" -c "import pytest_timeout" 2>/dev/null || limit=()
  timeout "$(( $(left) - 5 ))" "$PY" -m pytest -p no:cacheprovider -rfE "${workers[@]}" "${limit[@]}" 2>&1 \
    | tee "$OUT/suite-$TAG.txt" | tail -60
  local rc=$?
  [ "$rc" = 124 ] && echo "(the suite was cut at the call's limit: $(left) s left; rerun with fewer folders)" \
    | tee -a "$OUT/suite-$TAG.txt"
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
smoke) wheels; smoke 2>&1 | tee "$SESSION" ;;
gpu-tests) wheels; gpu_tests 2>&1 | tee "$SESSION" ;;
bench) wheels; bench 2>&1 | tee "$SESSION" ;;
all)
  wheels
  { echo "ember GPU session $TAG (dry run: $DRY), call limit $CALL_LIMIT s"
    smoke; echo "== smoke done at $((SECONDS - START)) s"
    bench; echo "== bench done at $((SECONDS - START)) s"
    gpu_tests; echo "== gpu-tests done at $((SECONDS - START)) s"
  } 2>&1 | tee "$SESSION"
  echo "== files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
  ;;
suite) wheels; suite ;;
collect)  # here, after a call: bash tools/gpu_session.sh collect <files_at of the run's reply>
  src="${2:?usage: bash tools/gpu_session.sh collect <folder the device tool put the files in>}"
  mkdir -p benchmarks/results
  n=0
  for f in "$src"/session-*.txt "$src"/gpu-*.txt "$src"/gpu-*.json "$src"/suite-*.txt; do
    [ -f "$f" ] || continue
    cp "$f" benchmarks/results/ && chmod u+w "benchmarks/results/$(basename "$f")" && n=$((n + 1))
    echo "benchmarks/results/$(basename "$f")"
  done
  echo "($n files: git add them, and paste the figures and the suite's summary line into the issue's note)"
  ;;
*)
  echo "usage: bash tools/gpu_session.sh [--dry-run] prepare|smoke|gpu-tests|bench|all|suite|collect DIR" >&2
  exit 2
  ;;
esac
