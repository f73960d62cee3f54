#!/usr/bin/env bash
# Configures and builds linfuse into build/ (Debian's LLVM/MLIR 22, ninja).
# Usage: scripts/build.sh [extra ninja targets...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
JOBS="${LINFUSE_JOBS:-$(nproc)}"

VENV="${LINFUSE_VENV:-$ROOT/.venv}"

if [ ! -f "$BUILD/build.ninja" ]; then
  # The Python module is built for the project venv's interpreter when there
  # is one (scripts/setup.sh --python), else for Debian's python3.
  PYTHON=/usr/bin/python3
  [ -x "$VENV/bin/python" ] && PYTHON="$VENV/bin/python"
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DPython_EXECUTABLE="$PYTHON"
fi
ninja -C "$BUILD" -j"$JOBS" "$@"
