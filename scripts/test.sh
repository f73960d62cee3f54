#!/usr/bin/env bash
# Sets up, builds and runs every linfuse test (lit + FileCheck and the
# GoogleTest unit tests, one lit invocation). This is what CI runs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"

LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
set +e
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test" "$BUILD/test/Unit" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e

# lit pads the labels when the summary has several ("Passed     : 102").
count() { sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" "$LOG" | tail -1; }
passed=$(count Passed); failed=$(count Failed)
unsupported=$(count Unsupported); skipped=$(count Skipped)
echo "${passed:-0} passed, ${failed:-0} failed," \
  "$(( ${unsupported:-0} + ${skipped:-0} )) skipped (unsupported here: GPU-only)"
exit "$status"
