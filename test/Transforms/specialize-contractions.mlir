// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// The result verifies, and upstream's mlir-opt reads it (upstream ops only).
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions | %mlir-opt -split-input-file --verify-each -o /dev/null
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// STATS: 14 contractions-specialized

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>

// A generic whose body is the f32 multiply-add: a plain linalg.matmul.
// CHECK-LABEL: func.func @generic_f32
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[ACC:.*]]: tensor<?x32xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x64xf32>, tensor<64x32xf32>) outs(%[[ACC]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    return %[[R]]
// REMARK: remark: specialized linalg.generic to linalg.matmul (f32 x f32 -> f32)
func.func @generic_f32(%x: tensor<?x64xf32>, %w: tensor<64x32xf32>, %acc: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// IREE style: f16 inputs extended to f32 in the body, accumulated in f32,
// then a separate truncf generic. The contraction becomes a linalg.matmul
// with f16 inputs and an f32 result (its implicit cast is the extf), the
// transposed weight stays in the maps, and the truncf stays as it is. The
// loops are in another order (k first): the maps say which is which.
// CHECK-DAG:   #[[MK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @iree_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf16>, %[[W:.*]]: tensor<32x64xf16>)
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#[[MK]], #[[NK]], #[[MN]]] ins(%[[X]], %[[W]] : tensor<?x64xf16>, tensor<32x64xf16>) outs(%[[F]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<?x32xf32>) outs(%{{.*}} : tensor<?x32xf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to f16
// CHECK:         return %[[T]]
// REMARK: remark: specialized linalg.generic to linalg.matmul (f16 x f16 -> f32, transposed B)
#kmN = affine_map<(k, m, n) -> (m, k)>
#kmNw = affine_map<(k, m, n) -> (n, k)>
#kmNo = affine_map<(k, m, n) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @iree_f16(%x: tensor<?x64xf16>, %w: tensor<32x64xf16>) -> tensor<?x32xf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf16>
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %r = linalg.generic {indexing_maps = [#kmN, #kmNw, #kmNo], iterator_types = ["reduction", "parallel", "parallel"]}
    ins(%x, %w : tensor<?x64xf16>, tensor<32x64xf16>) outs(%f : tensor<?x32xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  %e16 = tensor.empty(%m) : tensor<?x32xf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
    ins(%r : tensor<?x32xf32>) outs(%e16 : tensor<?x32xf16>) {
  ^bb0(%a: f32, %o: f16):
    %n = arith.truncf %a : f32 to f16
    linalg.yield %n : f16
  } -> tensor<?x32xf16>
  return %t : tensor<?x32xf16>
}

// -----

// linalg.contract, plain and with a transposed (nn.Linear) weight.
// CHECK-DAG:   #[[MK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @contract
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xbf16>, %[[W1:.*]]: tensor<64x32xbf16>, %[[W2:.*]]: tensor<16x64xbf16>, %[[A1:.*]]: tensor<?x32xf32>, %[[A2:.*]]: tensor<?x16xf32>)
// CHECK-NEXT:    %[[R1:.*]] = linalg.matmul ins(%[[X]], %[[W1]] : tensor<?x64xbf16>, tensor<64x32xbf16>) outs(%[[A1]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    %[[R2:.*]] = linalg.matmul indexing_maps = [#[[MK]], #[[NK]], #[[MN]]] ins(%[[X]], %[[W2]] : tensor<?x64xbf16>, tensor<16x64xbf16>) outs(%[[A2]] : tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT:    return %[[R1]], %[[R2]]
// REMARK-DAG: remark: specialized linalg.contract to linalg.matmul (bf16 x bf16 -> f32)
// REMARK-DAG: remark: specialized linalg.contract to linalg.matmul (bf16 x bf16 -> f32, transposed B)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @contract(%x: tensor<?x64xbf16>, %w1: tensor<64x32xbf16>, %w2: tensor<16x64xbf16>,
                    %a1: tensor<?x32xf32>, %a2: tensor<?x16xf32>) -> (tensor<?x32xf32>, tensor<?x16xf32>) {
  %r1 = linalg.contract indexing_maps = [#mk, #kn, #mn] ins(%x, %w1 : tensor<?x64xbf16>, tensor<64x32xbf16>) outs(%a1 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %r2 = linalg.contract indexing_maps = [#mk, #nk, #mn] ins(%x, %w2 : tensor<?x64xbf16>, tensor<16x64xbf16>) outs(%a2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %r1, %r2 : tensor<?x32xf32>, tensor<?x16xf32>
}

// -----

// A contraction producing the transposed result (C[n, m]): the operands
// swap roles, so the output keeps the default map.
// CHECK-DAG:   #[[KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @transposed_result
// CHECK-SAME:    (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[ACC:.*]]: tensor<32x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul indexing_maps = [#[[KM]], #[[NK]], #[[MN]]] ins(%[[W]], %[[X]] : tensor<64x32xf32>, tensor<8x64xf32>) outs(%[[ACC]] : tensor<32x8xf32>) -> tensor<32x8xf32>
// CHECK-NEXT:    return %[[R]]
// REMARK: remark: specialized linalg.contract to linalg.matmul (f32 x f32 -> f32, transposed A, transposed B)
func.func @transposed_result(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %acc: tensor<32x8xf32>) -> tensor<32x8xf32> {
  %r = linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (n, m)>]
    ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<32x8xf32>) -> tensor<32x8xf32>
  return %r : tensor<32x8xf32>
}

// -----

// matvec y[m] = A[m, k] x[k]: a one-row matmul over x (x on the left, A as
// an [N, K] weight); the zero-filled accumulator is re-created 1xN (the
// old one, now unused, goes away).
// CHECK-DAG:   #[[MK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matvec
// CHECK-SAME:    (%[[A:.*]]: tensor<32x64xf32>, %[[X:.*]]: tensor<64xf32>)
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[XR:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1]] output_shape [1, 64] : tensor<64xf32> into tensor<1x64xf32>
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<1x32xf32>
// CHECK-NEXT:    %[[F1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] : tensor<1x32xf32>) -> tensor<1x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#[[MK]], #[[NK]], #[[MN]]] ins(%[[XR]], %[[A]] : tensor<1x64xf32>, tensor<32x64xf32>) outs(%[[F1]] : tensor<1x32xf32>) -> tensor<1x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.collapse_shape %[[MM]] {{\[}}[0, 1]] : tensor<1x32xf32> into tensor<32xf32>
// CHECK-NEXT:    return %[[Y]]
// REMARK: remark: specialized linalg.matvec to linalg.matmul (f32 x f32 -> f32, transposed B, %arg1 as one row)
func.func @matvec(%a: tensor<32x64xf32>, %x: tensor<64xf32>) -> tensor<32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32xf32>) -> tensor<32xf32>
  %r = linalg.matvec ins(%a, %x : tensor<32x64xf32>, tensor<64xf32>) outs(%f : tensor<32xf32>) -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// A decode chain W2·(W1·x): the second matvec reads the first one's row
// (no collapse/expand between them), so the chain stays a matmul chain.
// CHECK-LABEL: func.func @matvec_chain
// CHECK-SAME:    (%[[W1:.*]]: tensor<32x64xf32>, %[[W2:.*]]: tensor<8x32xf32>, %[[X:.*]]: tensor<64xf32>, %[[A1:.*]]: tensor<1x32xf32>, %[[A2:.*]]: tensor<1x8xf32>)
// CHECK-NEXT:    %[[XR:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1]] output_shape [1, 64] : tensor<64xf32> into tensor<1x64xf32>
// CHECK-NEXT:    %[[H:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[XR]], %[[W1]] : tensor<1x64xf32>, tensor<32x64xf32>) outs(%[[A1]] : tensor<1x32xf32>) -> tensor<1x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[H]], %[[W2]] : tensor<1x32xf32>, tensor<8x32xf32>) outs(%[[A2]] : tensor<1x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %[[YC:.*]] = tensor.collapse_shape %[[Y]] {{\[}}[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
// CHECK-NEXT:    return %[[YC]]
func.func @matvec_chain(%w1: tensor<32x64xf32>, %w2: tensor<8x32xf32>, %x: tensor<64xf32>, %a1: tensor<1x32xf32>, %a2: tensor<1x8xf32>) -> tensor<8xf32> {
  %i1 = tensor.collapse_shape %a1 [[0, 1]] : tensor<1x32xf32> into tensor<32xf32>
  %h = linalg.matvec ins(%w1, %x : tensor<32x64xf32>, tensor<64xf32>) outs(%i1 : tensor<32xf32>) -> tensor<32xf32>
  %i2 = tensor.collapse_shape %a2 [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %y = linalg.matvec ins(%w2, %h : tensor<8x32xf32>, tensor<32xf32>) outs(%i2 : tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// vecmat y[n] = x[k] A[k, n]: x is already the left operand; an
// accumulator that is not a fill is expanded like the vector.
// CHECK-LABEL: func.func @vecmat
// CHECK-SAME:    (%[[X:.*]]: tensor<64xf16>, %[[A:.*]]: tensor<64x32xf16>, %[[ACC:.*]]: tensor<32xf32>)
// CHECK-NEXT:    %[[XR:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1]] output_shape [1, 64] : tensor<64xf16> into tensor<1x64xf16>
// CHECK-NEXT:    %[[AR:.*]] = tensor.expand_shape %[[ACC]] {{\[}}[0, 1]] output_shape [1, 32] : tensor<32xf32> into tensor<1x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[XR]], %[[A]] : tensor<1x64xf16>, tensor<64x32xf16>) outs(%[[AR]] : tensor<1x32xf32>) -> tensor<1x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.collapse_shape %[[MM]] {{\[}}[0, 1]] : tensor<1x32xf32> into tensor<32xf32>
// CHECK-NEXT:    return %[[Y]]
// REMARK: remark: specialized linalg.vecmat to linalg.matmul (f16 x f16 -> f32, %arg0 as one row)
func.func @vecmat(%x: tensor<64xf16>, %a: tensor<64x32xf16>, %acc: tensor<32xf32>) -> tensor<32xf32> {
  %r = linalg.vecmat ins(%x, %a : tensor<64xf16>, tensor<64x32xf16>) outs(%acc : tensor<32xf32>) -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// Batch variants: a generic batch matmul with a K-major left operand, and
// a batch matvec of dynamic batch (its vector becomes one row per batch).
// CHECK-DAG:   #[[BKM:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-DAG:   #[[BKN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG:   #[[BMN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG:   #[[BMK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG:   #[[BNK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func.func @batch
// CHECK-SAME:    (%[[X:.*]]: tensor<4x64x8xf32>, %[[W:.*]]: tensor<4x64x32xf32>, %[[ACC:.*]]: tensor<4x8x32xf32>, %[[A:.*]]: tensor<?x32x64xf16>, %[[V:.*]]: tensor<?x64xf16>, %[[ACC2:.*]]: tensor<?x32xf32>)
// CHECK:         %[[R:.*]] = linalg.batch_matmul indexing_maps = [#[[BKM]], #[[BKN]], #[[BMN]]] ins(%[[X]], %[[W]] : tensor<4x64x8xf32>, tensor<4x64x32xf32>) outs(%[[ACC]] : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
// CHECK:         %[[VR:.*]] = tensor.expand_shape %[[V]] {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 1, 64] : tensor<?x64xf16> into tensor<?x1x64xf16>
// CHECK:         %[[AR:.*]] = tensor.expand_shape %[[ACC2]] {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 1, 32] : tensor<?x32xf32> into tensor<?x1x32xf32>
// CHECK-NEXT:    %[[MV:.*]] = linalg.batch_matmul indexing_maps = [#[[BMK]], #[[BNK]], #[[BMN]]] ins(%[[VR]], %[[A]] : tensor<?x1x64xf16>, tensor<?x32x64xf16>) outs(%[[AR]] : tensor<?x1x32xf32>) -> tensor<?x1x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.collapse_shape %[[MV]] {{\[}}[0], [1, 2]] : tensor<?x1x32xf32> into tensor<?x32xf32>
// CHECK-NEXT:    return %[[R]], %[[Y]]
// REMARK-DAG: remark: specialized linalg.generic to linalg.batch_matmul (f32 x f32 -> f32, transposed A)
// REMARK-DAG: remark: specialized linalg.batch_matvec to linalg.batch_matmul (f16 x f16 -> f32, transposed B, %arg4 as one row)
func.func @batch(%x: tensor<4x64x8xf32>, %w: tensor<4x64x32xf32>, %acc: tensor<4x8x32xf32>,
                 %a: tensor<?x32x64xf16>, %v: tensor<?x64xf16>, %acc2: tensor<?x32xf32>) -> (tensor<4x8x32xf32>, tensor<?x32xf32>) {
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, k, m)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<4x64x8xf32>, tensor<4x64x32xf32>) outs(%acc : tensor<4x8x32xf32>) {
  ^bb0(%p: f32, %q: f32, %c: f32):
    %m = arith.mulf %q, %p : f32
    %s = arith.addf %m, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8x32xf32>
  %y = linalg.batch_matvec ins(%a, %v : tensor<?x32x64xf16>, tensor<?x64xf16>) outs(%acc2 : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %r, %y : tensor<4x8x32xf32>, tensor<?x32xf32>
}

// -----

// Canonical matmuls are left as they are (no remark either).
// CHECK-LABEL: func.func @already_matmul
// CHECK-NEXT:    linalg.matmul ins
// CHECK-NEXT:    return
func.func @already_matmul(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %acc: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Not matmuls, left alone, each with a remark saying why.
// CHECK-LABEL: func.func @scaled_product
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.generic
// REMARK: specialize-contractions.mlir:[[# @LINE + 5]]:8: remark: not specialized to a matmul: a factor of the product is computed by arith.mulf (only an input or its arith.extf keeps it a matmul)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @scaled_product(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %acc: tensor<8x32xf32>, %s: f32) -> tensor<8x32xf32> {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.mulf %p, %s : f32
    %t = arith.addf %c, %q : f32
    linalg.yield %t : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A unary op other than extf on an operand (upstream's contraction matcher
// skips any pure unary op: this would become a plain matmul there).
// CHECK-LABEL: func.func @exp_operand
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.generic
// REMARK: remark: not specialized to a matmul: a factor of the product is computed by math.exp (only an input or its arith.extf keeps it a matmul)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @exp_operand(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %acc: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%acc : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %e = math.exp %a : f32
    %p = arith.mulf %e, %b : f32
    %t = arith.addf %c, %p : f32
    linalg.yield %t : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// f16 accumulation (truncated every step) is not a GEMM's f32 accumulation.
// CHECK-LABEL: func.func @f16_accumulator
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.generic
// REMARK: remark: not specialized to a matmul: the sum is truncated (arith.truncf) every step: it accumulates in the narrow type, a GEMM in f32
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @f16_accumulator(%x: tensor<8x64xf16>, %w: tensor<64x32xf16>, %acc: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xf16>, tensor<64x32xf16>) outs(%acc : tensor<8x32xf16>) {
  ^bb0(%a: f16, %b: f16, %o: f16):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %eo = arith.extf %o : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %eo, %p : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<8x32xf16>
  return %r : tensor<8x32xf16>
}

// -----

// A map that is not a projected permutation (a sliding window).
// CHECK-LABEL: func.func @window
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.generic
// REMARK: remark: not specialized to a matmul: an indexing map is not a projected permutation (a convolution or a strided access)
func.func @window(%x: tensor<8x64xf32>, %w: tensor<96x32xf32>, %acc: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k + m, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xf32>, tensor<96x32xf32>) outs(%acc : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %c, %p : f32
    linalg.yield %t : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// Two batch dimensions (attention's [batch, heads, ...] scores): they
// collapse into one batch (no copies: leading dims of dense tensors).
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x8x16xf32>, %[[ACC:.*]]: tensor<2x4x8x8xf32>)
// CHECK-NEXT:    %[[QC:.*]] = tensor.collapse_shape %[[Q]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// CHECK-NEXT:    %[[KC:.*]] = tensor.collapse_shape %[[K]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// CHECK-NEXT:    %[[AC:.*]] = tensor.collapse_shape %[[ACC]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// CHECK-NEXT:    %[[S:.*]] = linalg.batch_matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[QC]], %[[KC]] : tensor<8x8x16xf32>, tensor<8x8x16xf32>) outs(%[[AC]] : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[S]] {{\[}}[0, 1], [2], [3]] output_shape [2, 4, 8, 8] : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
// CHECK-NEXT:    return %[[R]]
// REMARK: remark: specialized linalg.contract to linalg.batch_matmul (f32 x f32 -> f32, transposed B, 4-D result as 3-D)
func.func @attention_scores(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %acc: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %r = linalg.contract indexing_maps = [affine_map<(b, h, m, n, d) -> (b, h, m, d)>, affine_map<(b, h, m, n, d) -> (b, h, n, d)>, affine_map<(b, h, m, n, d) -> (b, h, m, n)>]
    ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%acc : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// -----

// IREE's linear layer on [batch, seq, hidden] activations: two M loops,
// collapsed into one M (dynamic), the weight [N, K] as it is; the zero
// fill is re-created for the collapsed shape, the result expanded back.
// CHECK-LABEL: func.func @linear_3d
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?x64xf16>, %[[W:.*]]: tensor<32x64xf16>)
// CHECK:         %[[B:.*]] = tensor.dim %[[X]], %c0
// CHECK-NEXT:    %[[S:.*]] = tensor.dim %[[X]], %c1
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[B]], %[[S]]) : tensor<?x?x32xf32>
// CHECK-NEXT:    %[[XC:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<?x?x64xf16> into tensor<?x64xf16>
// CHECK-NEXT:    %[[EC:.*]] = tensor.collapse_shape %[[E]] {{\[}}[0, 1], [2]] : tensor<?x?x32xf32> into tensor<?x32xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[EC]], %c0
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty(%[[M]]) : tensor<?x32xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[XC]], %[[W]] : tensor<?x64xf16>, tensor<32x64xf16>) outs(%[[F]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [%[[B]], %[[S]], 32] : tensor<?x32xf32> into tensor<?x?x32xf32>
// CHECK-NEXT:    return %[[R]]
// REMARK: remark: specialized linalg.generic to linalg.matmul (f16 x f16 -> f32, transposed B, 3-D result as 2-D)
func.func @linear_3d(%x: tensor<?x?x64xf16>, %w: tensor<32x64xf16>) -> tensor<?x?x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x?x64xf16>
  %s = tensor.dim %x, %c1 : tensor<?x?x64xf16>
  %e = tensor.empty(%b, %s) : tensor<?x?x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<?x?x64xf16>, tensor<32x64xf16>) outs(%f : tensor<?x?x32xf32>) {
  ^bb0(%a: f16, %bb: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %bb : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %t = arith.addf %c, %p : f32
    linalg.yield %t : f32
  } -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}

// -----

// Two reduction dimensions (a contraction over heads and head_dim): not a
// matmul without reshaping K, left alone.
// CHECK-LABEL: func.func @two_k_dims
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.contract
// REMARK: remark: not specialized to a matmul: 2 reduction dimensions read by both inputs (a matmul has one)
func.func @two_k_dims(%x: tensor<8x4x16xf32>, %w: tensor<4x16x32xf32>, %acc: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.contract indexing_maps = [affine_map<(m, n, h, d) -> (m, h, d)>, affine_map<(m, n, h, d) -> (h, d, n)>, affine_map<(m, n, h, d) -> (m, n)>]
    ins(%x, %w : tensor<8x4x16xf32>, tensor<4x16x32xf32>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A batch dimension that is not leading.
// CHECK-LABEL: func.func @inner_batch
// CHECK-NOT:     linalg.batch_matmul
// CHECK:         linalg.contract
// REMARK: remark: not specialized to a matmul: the batch dimensions do not lead every operand in one order
func.func @inner_batch(%x: tensor<8x4x16xf32>, %w: tensor<4x16x32xf32>, %acc: tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
  %r = linalg.contract indexing_maps = [affine_map<(b, m, n, k) -> (m, b, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>]
    ins(%x, %w : tensor<8x4x16xf32>, tensor<4x16x32xf32>) outs(%acc : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  return %r : tensor<4x8x32xf32>
}

// -----

// Integer contractions: i8 x i8 -> i32 with sign extensions is a
// linalg.matmul (its default cast_signed); with unsigned extensions
// (arith.extui) no library GEMM reads it and it stays, said so. A dot
// product has no M or N.
// CHECK-LABEL: func.func @int8_and_dot
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x64xi8>, tensor<64x32xi8>) outs(%{{.*}} : tensor<8x32xi32>) -> tensor<8x32xi32>
// CHECK:         linalg.generic
// CHECK:           arith.extui
// CHECK:         linalg.dot
// REMARK: remark: not specialized to a matmul: a factor is extended unsigned (arith.extui): no library GEMM reads unsigned i8
// REMARK: remark: not specialized to a matmul: a dot product (no M or N dimension)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @int8_and_dot(%x: tensor<8x64xi8>, %w: tensor<64x32xi8>, %acc: tensor<8x32xi32>,
                        %u: tensor<64xf32>, %v: tensor<64xf32>, %d: tensor<f32>) -> (tensor<8x32xi32>, tensor<8x32xi32>, tensor<f32>) {
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xi8>, tensor<64x32xi8>) outs(%acc : tensor<8x32xi32>) {
  ^bb0(%a: i8, %b: i8, %o: i32):
    %ea = arith.extsi %a : i8 to i32
    %eb = arith.extsi %b : i8 to i32
    %p = arith.muli %ea, %eb : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<8x32xi32>
  %ru = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<8x64xi8>, tensor<64x32xi8>) outs(%acc : tensor<8x32xi32>) {
  ^bb0(%a: i8, %b: i8, %o: i32):
    %ea = arith.extui %a : i8 to i32
    %eb = arith.extui %b : i8 to i32
    %p = arith.muli %ea, %eb : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<8x32xi32>
  %dot = linalg.dot ins(%u, %v : tensor<64xf32>, tensor<64xf32>) outs(%d : tensor<f32>) -> tensor<f32>
  return %r, %ru, %dot : tensor<8x32xi32>, tensor<8x32xi32>, tensor<f32>
}
