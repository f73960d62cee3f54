#!/usr/bin/env bash
# Sets up, builds and runs linfuse on the bundled example, a transformer
# block's attention projections and gated MLP
# (examples/transformer_block.mlir): shows what linfuse merges, then runs the
# block on the CPU unoptimized and optimized, checks that the results match,
# and compares GEMM calls and time per call.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
EXAMPLE="${1:-$ROOT/examples/transformer_block.mlir}"
ROWS="${LINFUSE_DEMO_ROWS:-64}"   # M = batch x sequence
PY=/usr/bin/python3               # Debian's, with numpy (setup.sh)

"$ROOT/scripts/setup.sh" >/dev/null
echo "== building linfuse-opt and linfuse-run (first run: a few minutes)"
"$ROOT/scripts/build.sh" linfuse-opt linfuse-run >/dev/null

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "== linfuse-opt --linfuse-optimize=lift-weights=true --linfuse-remarks -mlir-pass-statistics $(basename "$EXAMPLE")"
"$BUILD/bin/linfuse-opt" --linfuse-optimize=lift-weights=true \
  --linfuse-remarks -mlir-pass-statistics "$EXAMPLE" -o "$WORK/opt.mlir"
echo "== optimized IR"
cat "$WORK/opt.mlir"
count() { grep -cE "linalg\.(batch_)?matmul" "$1" || true; }
echo "== matmuls: $(count "$EXAMPLE") -> $(count "$WORK/opt.mlir") (the weight concatenations moved into @main__pack, run once)"

# Random inputs (x is ROWS x 64; weights scaled like an initialized layer).
"$PY" - "$WORK" "$ROWS" <<'PYEOF'
import sys, numpy as np
d, m = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
shapes = [("x", (m, 64), 1), ("wq", (64, 64), .125), ("bq", (64,), 1),
          ("wk", (32, 64), .125), ("bk", (32,), 1), ("wv", (32, 64), .125),
          ("bv", (32,), 1), ("wg", (128, 64), .125), ("wu", (128, 64), .125),
          ("wd", (64, 128), .09)]
for name, shape, scale in shapes:
    np.save("%s/%s.npy" % (d, name),
            (rng.standard_normal(shape) * scale).astype(np.float32))
PYEOF
INPUTS=()
for n in x wq bq wk bk wv bv wg wu wd; do INPUTS+=("--input=@$WORK/$n.npy"); done
run() {  # run LABEL [flags...]: one checked call, then 200 timed calls
  local label="$1"; shift
  "$BUILD/bin/linfuse-run" "$EXAMPLE" "${INPUTS[@]}" --runtime-stats \
    --benchmark=200 "$@" \
    --output="@$WORK/$label.q.npy" --output="@$WORK/$label.k.npy" \
    --output="@$WORK/$label.v.npy" --output="@$WORK/$label.o.npy" \
    > "$WORK/$label.txt"
}
echo "== linfuse-run on the CPU, M = $ROWS: --no-optimize (reference) and optimized"
run ref --no-optimize
run opt
"$PY" - "$WORK" <<'PYEOF'
import re, sys, numpy as np
d = sys.argv[1]
def stats(label):
    text = open("%s/%s.txt" % (d, label)).read()
    calls = int(re.search(r"gemm_calls: (\d+)", text).group(1))
    median = float(re.search(r"median ([\d.]+) ms", text).group(1))
    return calls, median
(rc, rt), (oc, ot) = stats("ref"), stats("opt")
diff = max(float(np.max(np.abs(np.load("%s/ref.%s.npy" % (d, r)) -
                                np.load("%s/opt.%s.npy" % (d, r)))))
           for r in "qkvo")
print("GEMM calls per run: %d -> %d" % (rc, oc))
print("median time per call: %.4f ms -> %.4f ms (%.2fx)" % (rt, ot, rt / ot))
ok = diff <= 1e-4
print("results (q, k, v, mlp): max |optimized - reference| = %.3g: %s" %
      (diff, "match" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
PYEOF
