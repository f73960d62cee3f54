#!/usr/bin/env bash
# Sets up, builds and runs linfuse on the bundled example: a transformer
# block's attention projections and MLP (examples/transformer_block.mlir).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LINFUSE_BUILD_DIR:-$ROOT/build}"
EXAMPLE="${1:-$ROOT/examples/transformer_block.mlir}"

"$ROOT/scripts/setup.sh" >/dev/null
"$ROOT/scripts/build.sh" linfuse-opt >/dev/null

echo "== linfuse-opt --linfuse-optimize $(basename "$EXAMPLE")"
"$BUILD/bin/linfuse-opt" --linfuse-optimize \
  --mlir-pass-statistics "$EXAMPLE"
