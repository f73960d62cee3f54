#!/usr/bin/env bash
# Sets up, builds and runs every linfuse test: lit + FileCheck and the
# GoogleTest unit tests (one lit invocation), then the Python package's
# pytest suite (test/python) in the project venv, then the runtime's unit
# tests under ASan + UBSan (build-asan/). This is what CI runs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
VENV="${LINFUSE_VENV:-$ROOT/.venv}"

"$ROOT/scripts/setup.sh" --python
"$ROOT/scripts/build.sh"

LOG="$(mktemp)"
PYLOG="$(mktemp)"
trap 'rm -f "$LOG" "$PYLOG"' EXIT
set +e
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test" "$BUILD/test/Unit" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}

# Two pytest-xdist workers: most tests are single-threaded Python (Dynamo,
# the importer) and the pip-install test is a 5-minute build, so two
# overlap well even on 2 cores (pytest: 15.4 -> 9.3 minutes there).
echo "== pytest test/python"
PYTHONPATH="$BUILD/python_packages${PYTHONPATH:+:$PYTHONPATH}" \
LINFUSE_BUILD_DIR="$BUILD" \
  "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider \
    -n "${LINFUSE_PYTEST_WORKERS:-2}" --dist worksteal "$ROOT/test/python" \
  2>&1 | tee "$PYLOG"
pystatus=${PIPESTATUS[0]}

# The runtime (the C ABI that reads callers' arrays) under ASan + UBSan;
# the whole lit and unit suite under them is scripts/test-sanitizers.sh
# (about 10 more minutes, run by hand).
echo "== runtime unit tests under ASan + UBSan (build-asan/)"
"$ROOT/scripts/test-sanitizers.sh" --runtime > "$LOG.asan" 2>&1
asanstatus=$?
tail -3 "$LOG.asan"
[ "$asanstatus" -eq 0 ] || cat "$LOG.asan"
rm -f "$LOG.asan"
set -e

# lit pads the labels when the summary has several ("Passed     : 102").
count() { sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" "$LOG" | tail -1; }
passed=$(count Passed); failed=$(count Failed)
unsupported=$(count Unsupported); skipped=$(count Skipped)
# pytest's last line: "== 31 passed, 2 skipped in 40.1s ==".
pycount() { tail -1 "$PYLOG" | sed -E -n "s/^(.*[^0-9])?([0-9]+) $1.*/\2/p"; }
pypassed=$(pycount passed); pyfailed=$(pycount failed); pyerrors=$(pycount error)
pyfailed=$(( ${pyfailed:-0} + ${pyerrors:-0} )); pyskipped=$(pycount skipped)
echo "lit: ${passed:-0} passed, ${failed:-0} failed," \
  "$(( ${unsupported:-0} + ${skipped:-0} )) skipped (unsupported here: GPU-only)"
echo "pytest: ${pypassed:-0} passed, ${pyfailed:-0} failed," \
  "${pyskipped:-0} skipped (GPU-only)"
echo "sanitizers: runtime unit tests $([ "$asanstatus" -eq 0 ] && echo passed || echo FAILED)"
[ "$status" -eq 0 ] && [ "$pystatus" -eq 0 ] && [ "$asanstatus" -eq 0 ]
