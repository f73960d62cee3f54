#!/usr/bin/env bash
# Configures and builds linfuse into build/ (Debian's LLVM/MLIR 22, ninja).
# Usage: scripts/build.sh [extra ninja targets...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
JOBS="${LINFUSE_JOBS:-$(nproc)}"

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$BUILD" -j"$JOBS" "$@"
