#!/usr/bin/env bash
# Sets up, builds and runs linfuse on the bundled example: a transformer
# block's attention projections and gated MLP (examples/transformer_block.mlir).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
EXAMPLE="${1:-$ROOT/examples/transformer_block.mlir}"

"$ROOT/scripts/setup.sh" >/dev/null
echo "== building linfuse-opt (first run: about a minute)"
"$ROOT/scripts/build.sh" linfuse-opt >/dev/null

OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
echo "== linfuse-opt --linfuse-optimize --linfuse-remarks -mlir-pass-statistics $(basename "$EXAMPLE")"
"$BUILD/bin/linfuse-opt" --linfuse-optimize --linfuse-remarks \
  -mlir-pass-statistics "$EXAMPLE" -o "$OUT"
echo "== optimized IR"
cat "$OUT"
count() { grep -cE "linalg\.(batch_)?matmul" "$1" || true; }
echo "== matmuls: $(count "$EXAMPLE") -> $(count "$OUT")"
