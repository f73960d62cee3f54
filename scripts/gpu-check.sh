#!/usr/bin/env bash
# The GPU check, run ON the GPU machine (one H200, CUDA 13, PyTorch; no
# MLIR, no network) from the repository root, with gpu-bundle/ made here by
# scripts/gpu-prepare.sh and carried along (see docs/GPU.md):
#
#   OUT=/some/dir bash scripts/gpu-check.sh      # results in $OUT
#   bash scripts/gpu-check.sh                    # results in gpu-results/
#
# 1. nvidia-smi: the GPU, driver and CUDA versions;
# 2. the *Device* gtests of the runtime (gpu-bundle/bin/LinfuseCudaRuntimeTests);
# 3. bench/gpu_check.py: numerics of every compiled module (merged, unfused,
#    and graph: merged with --cuda-graph, captured then replayed) against
#    PyTorch in float64, GEMM counts, then the benchmark (linfuse
#    unfused/merged/graph vs PyTorch eager and torch.compile);
# 4. a summary. Writes $OUT/gpu_check.{json,md,png}, $OUT/device_tests.log.
#
# Exits non-zero on any numerics, GEMM-count or device-test failure. Takes
# about 4-5 minutes (GPU_CHECK_BUDGET seconds for step 3, default 240; the
# whole script ends within ~345 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUNDLE="${GPU_BUNDLE:-$ROOT/gpu-bundle}"
OUT="${OUT:-$ROOT/gpu-results}"
PY="${PYTHON:-python3}"
BUDGET="${GPU_CHECK_BUDGET:-240}"
START=$SECONDS
mkdir -p "$OUT"

echo "== gpu-check: bundle $BUNDLE, results $OUT"
[ -f "$BUNDLE/modules/modules.json" ] || {
  echo "gpu-check: $BUNDLE is missing or incomplete: run scripts/gpu-prepare.sh" \
       "where linfuse is built and carry gpu-bundle" >&2
  exit 2
}
grep -E '^# (date|source|modules|total_bytes)' "$BUNDLE/MANIFEST" || true

# 1. The GPU.
if ! command -v nvidia-smi > /dev/null; then
  echo "gpu-check: no nvidia-smi: not a GPU machine" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader || { echo "gpu-check: nvidia-smi failed" >&2; exit 2; }
echo "CUDA (driver): $(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
if command -v nvcc > /dev/null; then nvcc --version | tail -2 | head -1; fi
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch",
  torch.__version__, "CUDA", torch.version.cuda, "device",
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' ||
  { echo "gpu-check: $PY cannot import torch" >&2; exit 2; }

# The bundle's libraries first (OpenBLAS & co may be absent here); this
# machine's libstdc++/libgcc_s unless they are too old for the bundle.
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ldd "$BUNDLE/lib/liblinfuse_runtime.so" 2>&1 | grep 'not found' > /dev/null; then
  echo "gpu-check: system libstdc++/libgcc_s too old: using gpu-bundle/lib/compat"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$BUNDLE/lib/compat"
fi
if ldd "$BUNDLE/lib/liblinfuse_runtime.so" 2>&1 | grep 'not found' > /dev/null; then
  ldd "$BUNDLE/lib/liblinfuse_runtime.so" >&2 || true
  echo "gpu-check: liblinfuse_runtime.so cannot load here" >&2
  exit 2
fi

# cuBLASLt for the gtests: the runtime tries libcublasLt.so.13 (loader
# path), then /usr/local/cuda/lib64; else PyTorch's pip copy, if any.
CUBLASLT="${LINFUSE_CUBLASLT_LIBRARY:-}"
if [ -z "$CUBLASLT" ] && ! ldconfig -p 2>/dev/null | grep 'libcublasLt\.so\.13 ' > /dev/null &&
   [ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ]; then
  CUBLASLT=$("$PY" - <<'EOF' 2>/dev/null || true
import glob, os, site
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    hits = glob.glob(os.path.join(sp, "nvidia", "**", "libcublasLt.so.13*"),
                     recursive=True)
    if hits:
        print(sorted(hits)[0])
        break
EOF
)
fi
if [ -n "$CUBLASLT" ]; then echo "cuBLASLt for the gtests: $CUBLASLT"; fi

# 2. Device gtests.
DEV_LOG="$OUT/device_tests.log"
DEV_RC=0
if [ -x "$BUNDLE/bin/LinfuseCudaRuntimeTests" ]; then
  echo "== device gtests"
  env ${CUBLASLT:+LINFUSE_CUBLASLT_LIBRARY="$CUBLASLT"} timeout 150 \
    "$BUNDLE/bin/LinfuseCudaRuntimeTests" --gtest_filter='*Device*' \
    > "$DEV_LOG" 2>&1 || DEV_RC=$?
  echo "$DEV_RC" > "$DEV_LOG.rc"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ tests?' "$DEV_LOG" || tail -20 "$DEV_LOG"
else
  echo "== device gtests: not in the bundle (LinfuseCudaRuntimeTests was not built)"
  rm -f "$DEV_LOG" "$DEV_LOG.rc"
fi

# 3. Numerics and benchmark, within what is left of ~345 s (the check must
# end within 6 minutes): gpu_check.py stops starting new shapes at --budget
# and the timeout cuts it 60 s later (its results are written as it goes).
LEFT=$((345 - (SECONDS - START)))
if [ "$BUDGET" -gt $((LEFT - 60)) ]; then BUDGET=$((LEFT - 60)); fi
echo "== numerics and benchmark (budget ${BUDGET} s)"
PY_RC=0
timeout $((BUDGET + 60)) "$PY" "$ROOT/bench/gpu_check.py" --bundle "$BUNDLE" \
  --out "$OUT" --device-tests-log "$DEV_LOG" --budget "$BUDGET" "$@" || PY_RC=$?

# 4. Summary.
echo "== summary ($((SECONDS - START)) s)"
if [ -f "$DEV_LOG" ]; then
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$DEV_LOG" | head -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$DEV_LOG" | head -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$DEV_LOG" | head -1)
  echo "device gtests: rc $DEV_RC, ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
  if [ "$DEV_RC" != 0 ] || [ "${p:-0}" = 0 ] || [ "${s:-0}" != 0 ]; then DEV_RC=1; fi
fi
case "$PY_RC" in
  0) echo "gpu_check.py: OK" ;;
  1) echo "gpu_check.py: FAILURES (see $OUT/gpu_check.md)" ;;
  124) echo "gpu_check.py: cut by the time limit (partial results in $OUT)" ;;
  *) echo "gpu_check.py: exit $PY_RC (setup failure or crash)" ;;
esac
ls -l "$OUT" | sed 1d
if [ -f "$OUT/gpu_check.md" ]; then
  echo "----- $OUT/gpu_check.md"
  cat "$OUT/gpu_check.md"
fi
if [ "$DEV_RC" != 0 ] || [ "$PY_RC" != 0 ]; then
  echo "gpu-check: FAILED"
  exit 1
fi
echo "gpu-check: OK"
