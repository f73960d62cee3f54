// Run-time checks (on by default): operands whose dynamic sizes do not fit
// the op are an error of the call naming the op's location, not a read past
// a buffer (this used to return rows of uninitialized memory and exit 0).
// The lowering's checks (what --no-optimize leaves to them):
// RUN: not linfuse-run %s --no-optimize --input=3x4xf32=1 --input=5x4xf32=1 2> %t.err
// RUN: FileCheck %s --check-prefix=FAIL < %t.err && count 1 < %t.err
// FAIL: linfuse-run: error: @main: run-time check failed at {{.*}}runtime-checks.mlir:[[# @LINE + 21]]:8: dimension #0 of input/output operand #1 (argument 1 of @main) is incompatible with inferred dimension size
// The other way round (the first operand decides the loop range).
// RUN: not linfuse-run %s --no-optimize --input=5x4xf32=1 --input=3x4xf32=1 2>&1 | FileCheck %s --check-prefix=FAIL
// Optimized, the same relation is checked at entry (--linfuse-entry-checks).
// RUN: not linfuse-run %s --input=3x4xf32=1 --input=5x4xf32=1 2>&1 | FileCheck %s --check-prefix=ENTRY
// ENTRY: linfuse-run: error: @main: run-time check failed at {{.*}}runtime-checks.mlir:[[# @LINE + 16]]:8: dimension #0 of operand #1 (dimension #0 of argument 1 of @main) differs from dimension #0 of operand #0 (dimension #0 of argument 0 of @main) of linalg.add, which iterate together
// Sizes that fit run as usual, with the checks and without them.
// RUN: linfuse-run %s --input=2x4xf32=1 --input=2x4xf32=2 | FileCheck %s --check-prefix=OK
// RUN: linfuse-run %s --runtime-checks=false --input=2x4xf32=1 --input=2x4xf32=2 | FileCheck %s --check-prefix=OK
// OK: result[0]: 2x4xf32={{\[\[}}3 3 3 3][3 3 3 3]]
// The lowering carries the check; runtime-checks=false leaves it out.
// RUN: linfuse-opt %s --linfuse-lower-to-cpu | FileCheck %s --check-prefix=IR
// RUN: linfuse-opt %s --linfuse-lower-to-cpu=runtime-checks=false | FileCheck %s --check-prefix=NOIR
// IR: llvm.mlir.global private constant @assert_msg
// IR: llvm.call @abort()
// NOIR-NOT: assert_msg
// NOIR-NOT: @abort
func.func @main(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %r = linalg.add ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
