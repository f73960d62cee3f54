// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls -canonicalize -cse | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls | %mlir-opt -split-input-file --verify-each -o /dev/null

// The element-wise epilogues of a merge's members: when every column slice
// of the merged result feeds the same linalg.generic, differing only in
// per-column vectors, one generic runs over the merged result with the
// vectors concatenated, and the slices come after it.

// Quantized Q/K: i8 x i8 -> i32, an i32 bias, then dequantization by a
// per-channel scale and a per-tensor activation scale. The merged GEMM is
// followed by ONE bias-add (biases concatenated) and ONE dequantization
// (scales concatenated): the chain merges step by step.
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG:   #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @int8_dequant
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xi8>, %[[WQ:.*]]: tensor<16x32xi8> {linfuse.weight}, %[[BQ:.*]]: tensor<16xi32> {linfuse.weight}, %[[SQ:.*]]: tensor<16xf32> {linfuse.weight}, %[[WK:.*]]: tensor<8x32xi8> {linfuse.weight}, %[[BK:.*]]: tensor<8xi32> {linfuse.weight}, %[[SK:.*]]: tensor<8xf32> {linfuse.weight})
// CHECK-DAG:     %[[XS:.*]] = arith.constant 1.250000e-02 : f32
// CHECK:         %[[M:.*]] = tensor.dim %[[X]]
// CHECK:         %[[MM:.*]] = linalg.matmul {{.*}} -> tensor<?x24xi32>
// CHECK-NEXT:    %[[B:.*]] = tensor.concat dim(0) %[[BQ]], %[[BK]] : (tensor<16xi32>, tensor<8xi32>) -> tensor<24xi32>
// CHECK-NEXT:    %[[ADD:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[MM]], %[[B]] : tensor<?x24xi32>, tensor<24xi32>) outs(%{{.*}} : tensor<?x24xi32>)
// CHECK-NEXT:    ^bb0(%[[A0:.*]]: i32, %[[A1:.*]]: i32, %{{.*}}: i32):
// CHECK-NEXT:      %[[S:.*]] = arith.addi %[[A0]], %[[A1]] : i32
// CHECK-NEXT:      linalg.yield %[[S]] : i32
// CHECK-NEXT:    } -> tensor<?x24xi32>
// CHECK-NEXT:    %[[SC:.*]] = tensor.concat dim(0) %[[SQ]], %[[SK]] : (tensor<16xf32>, tensor<8xf32>) -> tensor<24xf32>
// CHECK-NEXT:    %[[DE:.*]] = tensor.empty(%[[M]]) : tensor<?x24xf32>
// CHECK-NEXT:    %[[DQ:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[ADD]], %[[SC]] : tensor<?x24xi32>, tensor<24xf32>) outs(%[[DE]] : tensor<?x24xf32>)
// CHECK-NEXT:    ^bb0(%[[D0:.*]]: i32, %[[D1:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[F:.*]] = arith.sitofp %[[D0]] : i32 to f32
// CHECK-NEXT:      %[[T:.*]] = arith.mulf %[[F]], %[[D1]] : f32
// CHECK-NEXT:      %[[U:.*]] = arith.mulf %[[T]], %[[XS]] : f32
// CHECK-NEXT:      linalg.yield %[[U]] : f32
// CHECK-NEXT:    } -> tensor<?x24xf32>
// CHECK-NEXT:    %[[Q:.*]] = tensor.extract_slice %[[DQ]][0, 0] [%[[M]], 16] [1, 1] : tensor<?x24xf32> to tensor<?x16xf32>
// CHECK-NEXT:    %[[K:.*]] = tensor.extract_slice %[[DQ]][0, 16] [%[[M]], 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
// CHECK-NEXT:    return %[[Q]], %[[K]] : tensor<?x16xf32>, tensor<?x8xf32>
// REMARK: remark: merged 2 matmuls sharing %arg0 into one ?x24 GEMM
// REMARK: remark: merged 2 element-wise epilogues of slices into one over the ?x24 result
// REMARK: remark: merged 2 element-wise epilogues of slices into one over the ?x24 result
func.func @int8_dequant(%x: tensor<?x32xi8>,
    %wq: tensor<16x32xi8> {linfuse.weight}, %bq: tensor<16xi32> {linfuse.weight}, %sq: tensor<16xf32> {linfuse.weight},
    %wk: tensor<8x32xi8> {linfuse.weight}, %bk: tensor<8xi32> {linfuse.weight}, %sk: tensor<8xf32> {linfuse.weight})
    -> (tensor<?x16xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %xs = arith.constant 0.0125 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xi8>
  %eq = tensor.empty(%m) : tensor<?x16xi32>
  %fq = linalg.fill ins(%zero : i32) outs(%eq : tensor<?x16xi32>) -> tensor<?x16xi32>
  %q = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wq : tensor<?x32xi8>, tensor<16x32xi8>) outs(%fq : tensor<?x16xi32>) -> tensor<?x16xi32>
  %qb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q, %bq : tensor<?x16xi32>, tensor<16xi32>) outs(%eq : tensor<?x16xi32>) {
  ^bb0(%a: i32, %b: i32, %o: i32):
    %s = arith.addi %a, %b : i32
    linalg.yield %s : i32
  } -> tensor<?x16xi32>
  %eqf = tensor.empty(%m) : tensor<?x16xf32>
  %qf = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%qb, %sq : tensor<?x16xi32>, tensor<16xf32>) outs(%eqf : tensor<?x16xf32>) {
  ^bb0(%a: i32, %s: f32, %o: f32):
    %f = arith.sitofp %a : i32 to f32
    %t = arith.mulf %f, %s : f32
    %u = arith.mulf %t, %xs : f32
    linalg.yield %u : f32
  } -> tensor<?x16xf32>
  %ek = tensor.empty(%m) : tensor<?x8xi32>
  %fk = linalg.fill ins(%zero : i32) outs(%ek : tensor<?x8xi32>) -> tensor<?x8xi32>
  %k = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wk : tensor<?x32xi8>, tensor<8x32xi8>) outs(%fk : tensor<?x8xi32>) -> tensor<?x8xi32>
  %kb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%k, %bk : tensor<?x8xi32>, tensor<8xi32>) outs(%ek : tensor<?x8xi32>) {
  ^bb0(%a: i32, %b: i32, %o: i32):
    %s = arith.addi %a, %b : i32
    linalg.yield %s : i32
  } -> tensor<?x8xi32>
  %ekf = tensor.empty(%m) : tensor<?x8xf32>
  %kf = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%kb, %sk : tensor<?x8xi32>, tensor<8xf32>) outs(%ekf : tensor<?x8xf32>) {
  ^bb0(%a: i32, %s: f32, %o: f32):
    %f = arith.sitofp %a : i32 to f32
    %t = arith.mulf %f, %s : f32
    %u = arith.mulf %t, %xs : f32
    linalg.yield %u : f32
  } -> tensor<?x8xf32>
  return %qf, %kf : tensor<?x16xf32>, tensor<?x8xf32>
}

// -----

// Any tiling of a tensor's columns, not only a merge's: an activation
// without per-column operands, and a per-row operand (a per-token scale,
// map (d0)) that is the same value for every slice, stays as it is.
#id = affine_map<(d0, d1) -> (d0, d1)>
#rowv = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @shared_row_scale
// CHECK-SAME:    (%[[Y:.*]]: tensor<4x12xf32>, %[[R:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<4x12xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[R]] : tensor<4x12xf32>, tensor<4xf32>) outs(%[[E]] : tensor<4x12xf32>)
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %[[W:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[V]], %[[W]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[T]] : f32
// CHECK:         %[[A:.*]] = tensor.extract_slice %[[G]][0, 0] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.extract_slice %[[G]][0, 4] [4, 8] [1, 1] : tensor<4x12xf32> to tensor<4x8xf32>
// CHECK-NEXT:    return %[[A]], %[[B]]
// REMARK: remark: merged 2 element-wise epilogues of slices into one over the 4x12 result
func.func @shared_row_scale(%y: tensor<4x12xf32>, %r: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x8xf32>) {
  %s1 = tensor.extract_slice %y[0, 4] [4, 8] [1, 1] : tensor<4x12xf32> to tensor<4x8xf32>
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
  %e0 = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #rowv, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %r : tensor<4x4xf32>, tensor<4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.mulf %v, %w : f32
    %n = math.tanh %m : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #rowv, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %r : tensor<4x8xf32>, tensor<4xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.mulf %v, %w : f32
    %n = math.tanh %m : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x8xf32>
}

// -----

// Not merged: the bodies differ (one multiplies by 2, the other by 3).
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @different_bodies
// CHECK-COUNT-2: tensor.extract_slice %arg0
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:     linalg.generic
// REMARK-NOT: remark: merged {{.*}} epilogues
func.func @different_bodies(%y: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %three : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Not merged: the body reads its column index (linalg.index), which the
// merged op would see shifted; a slice read twice; slices that leave a
// gap; a slice with another user; and a per-row operand that differs
// between the slices.
#id = affine_map<(d0, d1) -> (d0, d1)>
#rowv = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @index_in_body
// CHECK-COUNT-2: linalg.index 1
func.func @index_in_body(%y: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %j = linalg.index 1 : index
    %i = arith.index_cast %j : index to i32
    %f = arith.sitofp %i : i32 to f32
    %m = arith.addf %v, %f : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %j = linalg.index 1 : index
    %i = arith.index_cast %j : index to i32
    %f = arith.sitofp %i : i32 to f32
    %m = arith.addf %v, %f : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @gap
// CHECK-COUNT-2: math.exp
func.func @gap(%y: tensor<4x9xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x9xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 5] [4, 4] [1, 1] : tensor<4x9xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @slice_with_another_user
// CHECK-COUNT-2: math.exp
func.func @slice_with_another_user(%y: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b, %s1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @different_row_scales
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:     linalg.generic
func.func @different_row_scales(%y: tensor<4x8xf32>, %r0: tensor<4xf32>, %r1: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #rowv, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %r0 : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.mulf %v, %w : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #rowv, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %r1 : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.mulf %v, %w : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @reads_its_destination
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:     linalg.generic
func.func @reads_its_destination(%y: tensor<4x8xf32>, %acc: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%acc : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.addf %v, %o : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%acc : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.addf %v, %o : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Not merged: the second member's vector is defined between the two epilogues.
// CHECK-LABEL: func.func @vector_between
// CHECK-COUNT-2: arith.mulf
func.func @vector_between(%y: tensor<4x8xf32>, %va: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %va : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %x: f32, %o: f32):
    %m = arith.mulf %v, %x : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %vb = tensor.extract_slice %a[0, 0] [1, 4] [1, 1] : tensor<4x4xf32> to tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %vb : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %x: f32, %o: f32):
    %m = arith.mulf %v, %x : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not merged: stride-2 columns.
// CHECK-LABEL: func.func @strided
// CHECK-COUNT-2: math.exp
func.func @strided(%y: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 2] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not merged: only rows 0..2 of 4.
// CHECK-LABEL: func.func @partial_rows
// CHECK-COUNT-2: math.exp
func.func @partial_rows(%y: tensor<4x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [2, 4] [1, 1] : tensor<4x8xf32> to tensor<2x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [2, 4] [1, 1] : tensor<4x8xf32> to tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<2x4xf32>
  return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not merged: the second epilogue in an scf.if region.
// CHECK-LABEL: func.func @other_block
// CHECK-COUNT-2: math.exp
func.func @other_block(%y: tensor<4x8xf32>, %p: i1) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %r = scf.if %p -> tensor<4x4xf32> {
    %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%v: f32, %o: f32):
      %m = math.exp %v : f32
      linalg.yield %m : f32
    } -> tensor<4x4xf32>
    scf.yield %b : tensor<4x4xf32>
  } else {
    scf.yield %e : tensor<4x4xf32>
  }
  return %a, %r : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not merged: the slice also returned, used before its epilogue.
// CHECK-LABEL: func.func @other_user
// CHECK-COUNT-2: math.exp
func.func @other_user(%y: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %c = tensor.cast %s1 : tensor<4x4xf32> to tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b, %c : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Not merged: the slices leave the last column out (a trailing gap), so
// the merged op would compute a column no member asked for.
// CHECK-LABEL: func.func @trailing_gap
// CHECK-COUNT-2: arith.addf
func.func @trailing_gap(%y: tensor<4x9xf32>, %v0: tensor<4xf32>, %v1: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %s0 = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x9xf32> to tensor<4x4xf32>
  %s1 = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x9xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %v0 : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.addf %v, %w : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %v1 : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %m = arith.addf %v, %w : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Rank 0: nothing to tile (and no crash).
#m = affine_map<() -> ()>
// CHECK-LABEL: func.func @rank0
// CHECK:         math.tanh
func.func @rank0(%y: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %s0 = tensor.extract_slice %y[] [] [] : tensor<f32> to tensor<f32>
  %s1 = tensor.extract_slice %y[] [] [] : tensor<f32> to tensor<f32>
  %e = tensor.empty() : tensor<f32>
  %a = linalg.generic {indexing_maps = [#m, #m], iterator_types = []}
      ins(%s0 : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%v: f32, %o: f32):
    %n = math.tanh %v : f32
    linalg.yield %n : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [#m, #m], iterator_types = []}
      ins(%s1 : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%v: f32, %o: f32):
    %n = math.tanh %v : f32
    linalg.yield %n : f32
  } -> tensor<f32>
  return %a, %b : tensor<f32>, tensor<f32>
}
