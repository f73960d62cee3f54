// RUN: linfuse-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(linfuse-entry-checks))' | FileCheck %s
// The optimizer keeps the checks while it merges (the merged GEMM alone
// would run with any row counts).
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize=entry-checks=true | FileCheck %s --check-prefix=OPT

// Two matmuls of one weight whose rows the program ties together (the
// output of both is sized by %x1): the relation is asserted at entry, in
// the arguments' sizes, before the ops.
// CHECK-LABEL: func.func @shared_weight(
// CHECK-SAME:      %[[X1:.*]]: tensor<?x4xf32>, %[[X2:.*]]: tensor<?x4xf32>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D1:.*]] = tensor.dim %[[X2]], %[[C0]]
// CHECK-NEXT:    %[[C0B:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D0:.*]] = tensor.dim %[[X1]], %[[C0B]]
// CHECK-NEXT:    %[[EQ:.*]] = arith.cmpi eq, %[[D1]], %[[D0]] : index
// CHECK-NEXT:    cf.assert %[[EQ]], "ERROR: Runtime op verification failed\0A^ dimension #0 of operand #2 (dimension #0 of argument 0 of @shared_weight) differs from dimension #0 of operand #0 (dimension #0 of argument 1 of @shared_weight) of linalg.matmul, which iterate together\0ALocation: loc({{.*}}entry-checks.mlir\22:[[# @LINE + 13]]:8)"
// CHECK-NOT:     cf.assert
// CHECK:         return
// OPT-LABEL: func.func @shared_weight(
// OPT:         tensor.concat
// OPT:         cf.assert
func.func @shared_weight(%x1: tensor<?x4xf32>, %x2: tensor<?x4xf32>, %w: tensor<4x3xf32>) -> (tensor<?x3xf32>, tensor<?x3xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %m = tensor.dim %x1, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x3xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %a = linalg.matmul ins(%x1, %w : tensor<?x4xf32>, tensor<4x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32>
  %b = linalg.matmul ins(%x2, %w : tensor<?x4xf32>, tensor<4x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %a, %b : tensor<?x3xf32>, tensor<?x3xf32>
}

// -----

// A size that is an expression of argument sizes is materialized in arith;
// the same relation stated by two ops is asserted once.
// CHECK-LABEL: func.func @sum_of_rows(
// CHECK-SAME:      %[[A:.*]]: tensor<?x4xf32>, %[[B:.*]]: tensor<?x4xf32>, %[[C:.*]]: tensor<?x4xf32>
// CHECK:         %[[DC:.*]] = tensor.dim %[[C]]
// CHECK:         %[[DA:.*]] = tensor.dim %[[A]]
// CHECK:         %[[DB:.*]] = tensor.dim %[[B]]
// CHECK:         %[[SUM:.*]] = arith.addi %[[DA]], %[[DB]] : index
// CHECK:         %[[EQ:.*]] = arith.cmpi eq, %[[DC]], %[[SUM]] : index
// CHECK:         cf.assert %[[EQ]], "ERROR: Runtime op verification failed\0A^ dimension #0 of operand #2 differs from dimension #0 of operand #0 (dimension #0 of argument 2 of @sum_of_rows) of linalg.add
// CHECK-NOT:     cf.assert
// CHECK:         linalg.add
func.func @sum_of_rows(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>, %c: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %n = tensor.dim %b, %c0 : tensor<?x4xf32>
  %rows = arith.addi %m, %n : index
  %e = tensor.empty(%rows) : tensor<?x4xf32>
  %r = linalg.add ins(%c, %c : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %s = linalg.sub ins(%c, %c : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r, %s : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Static shapes: every relation holds by the types, nothing is added.
// CHECK-LABEL: func.func @static_shapes(
// CHECK-NOT:     cf.assert
// CHECK:         return
func.func @static_shapes(%a: tensor<8x4xf32>, %w: tensor<4x3xf32>) -> tensor<8x3xf32> {
  %e = tensor.empty() : tensor<8x3xf32>
  %r = linalg.matmul ins(%a, %w : tensor<8x4xf32>, tensor<4x3xf32>) outs(%e : tensor<8x3xf32>) -> tensor<8x3xf32>
  return %r : tensor<8x3xf32>
}

// -----

// Sizes provably equal (the output is sized by the operand it must match)
// need no check.
// CHECK-LABEL: func.func @sized_by_operand(
// CHECK-NOT:     cf.assert
// CHECK:         return
func.func @sized_by_operand(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %r = linalg.negf ins(%a : tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// An op that does not run on every call (in a branch) may relate sizes
// that differ when it does not run: no entry check for it.
// CHECK-LABEL: func.func @in_branch(
// CHECK-NOT:     cf.assert
// CHECK:         scf.if
func.func @in_branch(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>, %p: i1) -> tensor<?x4xf32> {
  %r = scf.if %p -> tensor<?x4xf32> {
    %s = linalg.add ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%a : tensor<?x4xf32>) -> tensor<?x4xf32>
    scf.yield %s : tensor<?x4xf32>
  } else {
    scf.yield %a : tensor<?x4xf32>
  }
  return %r : tensor<?x4xf32>
}

// -----

// A size read from data is not a function of argument sizes: left to the
// lowering's checks.
// CHECK-LABEL: func.func @data_dependent(
// CHECK-NOT:     cf.assert
// CHECK:         return
func.func @data_dependent(%a: tensor<?xf32>, %n: tensor<1xindex>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %size = tensor.extract %n[%c0] : tensor<1xindex>
  %e = tensor.empty(%size) : tensor<?xf32>
  %r = linalg.negf ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
