#!/usr/bin/env bash
# Builds gpu-bundle/, everything scripts/gpu-check.sh needs on a GPU machine
# that has no MLIR (see docs/GPU.md). Runs HERE, where linfuse is built:
#
#   scripts/gpu-prepare.sh [--quick] [--out DIR] [--build-dir DIR] [--jobs N]
#                          [--target=cuda|cpu]
#
#   DIR/modules/   the generated MLIR modules and modules.json (their
#                  manifest: shapes, reference expressions, expected GEMM
#                  calls), from bench/gpu_modules.py
#   DIR/lib/       lib<name>.so + .h compiled with linfuse-compile
#                  --target=cuda (merged), lib<name>_unfused.so + .h
#                  (--no-optimize) and lib<name>_graph.so + .h (merged,
#                  --cuda-graph: captured into a CUDA graph on the first call
#                  with given arguments, replayed after), liblinfuse_runtime.so
#                  and the non-system shared libraries it needs (OpenBLAS,
#                  libgfortran, libquadmath: Debian's, maybe absent there)
#   DIR/lib/compat/  this machine's libstdc++/libgcc_s, used only if the GPU
#                  machine's are older than the binaries need
#   DIR/bin/       LinfuseCudaRuntimeTests (the *Device* gtests), if built
#   DIR/include/   linfuse/Runtime/Runtime.h (for gpu_check.py --dry-run)
#   DIR/MANIFEST   every file with its size, the total, the source revision
#   DIR/bundle.json  target, quick, date
#
# --quick: only the numerics modules and the hidden-768 f32 Q/K/V benchmark
# module (for test/Tools/gpu-bundle.test). --target=cpu compiles for the
# host instead (CBLAS), merged and unfused only (CUDA graphs need the cuda
# target): bench/gpu_check.py then runs the numerics with numpy, a self-test
# of its calling code without a GPU. Fails if the bundle exceeds 64 MiB (the
# device tool's limit on carried files).
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$SRC/gpu-bundle"
BUILD="${LINFUSE_BUILD_DIR:-$SRC/build}"
QUICK=""
TARGET=cuda
JOBS="$(nproc 2>/dev/null || echo 4)"
LIMIT=$((64 * 1024 * 1024))
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=--quick ;;
    --out) OUT="$2"; shift ;;
    --out=*) OUT="${1#--out=}" ;;
    --build-dir) BUILD="$2"; shift ;;
    --build-dir=*) BUILD="${1#--build-dir=}" ;;
    --jobs) JOBS="$2"; shift ;;
    --target=*) TARGET="${1#--target=}" ;;
    --target) TARGET="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu-prepare: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

START=$(date +%s.%N)
COMPILE="$BUILD/bin/linfuse-compile"
RUNNER="$BUILD/bin/linfuse-run"
RUNTIME="$BUILD/lib/liblinfuse_runtime.so"
TESTS="$BUILD/test/Unit/LinfuseCudaRuntimeTests"
for f in "$COMPILE" "$RUNTIME"; do
  [ -e "$f" ] || { echo "gpu-prepare: missing $f (build linfuse first)" >&2; exit 1; }
done
case "$TARGET" in cuda|cpu) ;; *) echo "gpu-prepare: --target=cuda or cpu" >&2; exit 2 ;; esac
if [ "$TARGET" = cuda ] &&
   ! nm -D --defined-only "$RUNTIME" | grep ' T linfuse_cuda_gemm$' > /dev/null; then
  echo "gpu-prepare: $RUNTIME has no CUDA backend (configure with CUDA)" >&2
  exit 1
fi
# ptxas for the sm_90a fatbins.
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"

case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
# Only ever delete an earlier bundle (or an empty folder).
if [ -e "$OUT" ] && [ ! -f "$OUT/MANIFEST" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu-prepare: $OUT exists and is not a bundle: not overwriting it" >&2
  exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT/modules" "$OUT/lib/compat" "$OUT/bin" "$OUT/include/linfuse/Runtime"

echo "gpu-prepare: generating modules${QUICK:+ (quick)}"
"$PYTHON" "$SRC/bench/gpu_modules.py" "$OUT/modules" $QUICK > "$OUT/modules/list.txt"
NMOD=$(wc -l < "$OUT/modules/list.txt")

# The graph variant only for cuda: linfuse-compile rejects --cuda-graph
# with --target=cpu.
VARIANTS="merged unfused"
[ "$TARGET" = cuda ] && VARIANTS="$VARIANTS graph"
NVAR=$(echo $VARIANTS | wc -w)
echo "gpu-prepare: compiling $NMOD modules x $NVAR ($(echo $VARIANTS | sed 's/ /, /g')) for $TARGET, $JOBS jobs"
export COMPILE OUT TARGET
# One job per (module, variant); a failure stops the script with its log.
compile_one() {
  local name="$1" variant="$2" suffix log
  local -a flags
  case "$variant" in
    merged) suffix="" flags=() ;;
    unfused) suffix=_unfused flags=(--no-optimize) ;;
    graph) suffix=_graph flags=(--cuda-graph) ;;  # merged, in a CUDA graph
    *) echo "gpu-prepare: unknown variant $variant" >&2; return 1 ;;
  esac
  log="$OUT/modules/$name$suffix.log"
  "$COMPILE" "$OUT/modules/$name.mlir" --target="$TARGET" "${flags[@]}" \
    -o "$OUT/lib/lib$name$suffix.so" > "$log" 2>&1 || { cat "$log" >&2; return 1; }
  rm -f "$log"
}
export -f compile_one
while read -r name; do
  for v in $VARIANTS; do echo "$name $v"; done
done < "$OUT/modules/list.txt" |
  xargs -P "$JOBS" -n 2 bash -c 'compile_one "$0" "$1"'
T_COMPILE=$(date +%s.%N)

# Expected GEMM calls per module, counted on the CPU target with linfuse-run
# (one small module per kind and dtype; the count does not depend on sizes).
if [ -x "$RUNNER" ]; then
  echo "gpu-prepare: counting GEMM calls with linfuse-run (cpu)"
  "$PYTHON" "$SRC/bench/gpu_modules.py" --expect-gemm-calls "$OUT/modules" "$RUNNER"
fi

echo "gpu-prepare: runtime and its shared libraries"
cp "$RUNTIME" "$OUT/lib/"
cp "$SRC/include/linfuse/Runtime/Runtime.h" "$OUT/include/linfuse/Runtime/"
if [ -x "$TESTS" ]; then
  cp "$TESTS" "$OUT/bin/"
else
  echo "gpu-prepare: note: $TESTS not built; no device gtests in the bundle"
fi

# Libraries every x86-64 Linux with a C++ toolchain has (glibc, libstdc++,
# libgcc_s); anything else a bundled binary needs is copied beside it.
is_system() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libdl.so.*|\
    libpthread.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) return 0 ;;
  esac
  return 1
}
changed=1
while [ $changed = 1 ]; do
  changed=0
  for bin in "$OUT"/lib/*.so* "$OUT"/bin/*; do
    [ -f "$bin" ] || continue
    # "name => /path (0x...)" lines; LD_LIBRARY_PATH lets a bundled copy win.
    while read -r name path; do
      [ -n "$name" ] || continue
      is_system "$name" && continue
      [ -e "$OUT/lib/$name" ] && continue
      if [ "$path" = "not" ] || [ ! -e "$path" ]; then
        echo "gpu-prepare: $bin needs $name, not found here" >&2
        exit 1
      fi
      cp -L "$path" "$OUT/lib/$name"
      echo "gpu-prepare:   + $name (from $path, needed by $(basename "$bin"))"
      changed=1
    done < <(LD_LIBRARY_PATH="$OUT/lib" ldd "$bin" 2>/dev/null |
             awk '$2 == "=>" {print $1, $3}')
  done
done
# Fallbacks only (scripts/gpu-check.sh adds them if the system's are older).
for name in libstdc++.so.6 libgcc_s.so.1; do
  path=$(ldd "$RUNTIME" | awk -v n="$name" '$1 == n {print $3}')
  [ -n "$path" ] && cp -L "$path" "$OUT/lib/compat/$name"
done
chmod -R u+w "$OUT"
cat > "$OUT/bundle.json" <<EOF
{"target": "$TARGET", "quick": $([ -n "$QUICK" ] && echo true || echo false), "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF

# MANIFEST: sizes, total, provenance.
total=0
{
  echo "# gpu-bundle, made by scripts/gpu-prepare.sh${QUICK:+ --quick}"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
  rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git -C "$SRC" status --porcelain 2>/dev/null | head -1)" ]; then
    rev="$rev (working tree modified)"
  fi
  echo "# source: $rev"
  echo "# linfuse-compile: $COMPILE"
  if [ "$TARGET" = cuda ]; then
    echo "# modules: $NMOD (x3: merged, _unfused and _graph), target $TARGET"
  else
    echo "# modules: $NMOD (x2: merged and _unfused), target $TARGET"
  fi
  echo "# size_bytes path"
} > "$OUT/MANIFEST"
while IFS= read -r f; do
  size=$(stat -c %s "$OUT/$f")
  total=$((total + size))
  printf '%d %s\n' "$size" "$f" >> "$OUT/MANIFEST"
done < <(cd "$OUT" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort)
total=$((total + $(stat -c %s "$OUT/MANIFEST")))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
echo "# total_bytes $total ($(mib "$total") MiB; limit 64 MiB)" >> "$OUT/MANIFEST"

END=$(date +%s.%N)
echo "gpu-prepare: $(grep -vc '^#' "$OUT/MANIFEST") files, $(mib "$total") MiB in $OUT" \
  "(compile $(secs "$START" "$T_COMPILE") s, total $(secs "$START" "$END") s)"
if [ "$total" -gt "$LIMIT" ]; then
  echo "gpu-prepare: bundle is over 64 MiB: it cannot be carried" >&2
  exit 1
fi
echo "gpu-prepare: OK"
