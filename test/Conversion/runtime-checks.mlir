// RUN: linfuse-opt %s -split-input-file --linfuse-runtime-checks | FileCheck %s

// A linalg op on function arguments: its size checks come before it, and a
// message names the function argument an operand is.
// CHECK-LABEL: func.func @add
// CHECK:         cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ dimension #0 of input/output operand #1 (argument 1 of @add) is incompatible with inferred dimension size\0ALocation: loc({{.*}}runtime-checks.mlir\22:[[# @LINE + 6]]:8)"
// CHECK:         linalg.add
func.func @add(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %r = linalg.add ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// An operand that is not a function argument keeps upstream's wording.
// CHECK-LABEL: func.func @computed
// CHECK:         cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ dimension #0 of input/output operand #0 is incompatible
// CHECK-NOT:     argument 0 of @computed
func.func @computed(%a: tensor<?xf32>, %n: index) -> tensor<?xf32> {
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.negf ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %e2 = tensor.empty(%n) : tensor<?xf32>
  %s = linalg.negf ins(%r : tensor<?xf32>) outs(%e2 : tensor<?xf32>) -> tensor<?xf32>
  return %s : tensor<?xf32>
}

// -----

// Nothing to check: no op implements the interface.
// CHECK-LABEL: func.func @scalars
// CHECK-NOT:     cf.assert
func.func @scalars(%x: f32) -> f32 {
  %y = arith.addf %x, %x : f32
  return %y : f32
}
