#!/usr/bin/env bash
# Builds linfuse with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan/ (LINFUSE_ENABLE_SANITIZERS=ON; no Python module) and runs the
# lit suite and the unit tests there. Usage: scripts/test-sanitizers.sh
# [lit filter regex]. The README's test command runs it too.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_ASAN_BUILD_DIR:-$ROOT/build-asan}"
JOBS="${LINFUSE_JOBS:-$(nproc)}"

"$ROOT/scripts/setup.sh"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DLINFUSE_ENABLE_SANITIZERS=ON \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$BUILD" -j"$JOBS"
filter=()
[ $# -gt 0 ] && filter=(--filter "$1")
/usr/lib/llvm-22/bin/lit -sv "${filter[@]}" "$BUILD/test" "$BUILD/test/Unit"
