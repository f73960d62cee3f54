#!/usr/bin/env bash
# Builds linfuse with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan/ (LINFUSE_ENABLE_SANITIZERS=ON; no Python module) and runs the
# lit suite and the unit tests there (about 10 minutes on 2 cores, most of
# it the build). Usage: scripts/test-sanitizers.sh [lit filter regex].
#   --runtime   only the runtime and its unit tests (LinfuseRuntimeTests:
#               the C ABI that reads callers' arrays), about 2 minutes;
#               what the README's test command (CI) runs.
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
if [ "${1:-}" = "--runtime" ]; then
  ninja -C "$BUILD" -j"$JOBS" LinfuseRuntimeTests
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  GTEST_FILTER=-*Device* "$BUILD/test/Unit/LinfuseRuntimeTests"
  exit
fi
ninja -C "$BUILD" -j"$JOBS"
filter=()
[ $# -gt 0 ] && filter=(--filter "$1")
/usr/lib/llvm-22/bin/lit -sv "${filter[@]}" "$BUILD/test" "$BUILD/test/Unit"
