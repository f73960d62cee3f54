// Missed-merge remarks (--linfuse-remarks): every matmul that reads the same
// input as an earlier one but was not merged with it says why, at its
// location. A remark is an optimization note, not an error: the pass still
// succeeds and the IR stays valid.
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls=max-merged-bytes=600 --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=CAP
// Without --linfuse-remarks: silent.
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls -o /dev/null 2>&1 | count 0

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// One has a bias-add, the other not: not a miss (the other gets -0.0).
// CHECK: missed.mlir:[[# @LINE + 5]]:8: remark: merged 2 matmuls sharing %arg0 (with their bias-adds) into one 4x32 GEMM
func.func @bias(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %b1: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ab = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %b1 : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %b = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %ab, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// The second reads the first's result.
// CHECK: missed.mlir:[[# @LINE + 6]]:8: remark: not merged with the matmul at {{.*}}missed.mlir:[[# @LINE + 5]]:8, both reading %arg0: one depends on the other
func.func @dependency(%x: tensor<4x4xf32>, %w1: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = linalg.matmul ins(%x, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// The first's result is used (%u) before the second's weight is computed
// (%w2s): no single place for the merged matmul.
// CHECK: missed.mlir:[[# @LINE + 17]]:8: remark: not merged with the matmul at {{.*}}missed.mlir:[[# @LINE + 5]]:8, both reading %arg0: no place for the merged matmul: linalg.generic at {{.*}}missed.mlir:[[# @LINE + 6]]:8 uses one before linalg.generic at {{.*}}missed.mlir:[[# @LINE + 12]]:10 defines what the other reads
func.func @placement(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.mulf %p, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %e8 = tensor.empty() : tensor<8x16xf32>
  %w2s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w2 : tensor<8x16xf32>) outs(%e8 : tensor<8x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %p, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %b = linalg.matmul ins(%x, %w2s : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %u, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// Mergeable, and merged, unless the size cap forbids it.
// CHECK: missed.mlir:[[# @LINE + 6]]:8: remark: merged 2 matmuls sharing %arg0 into one 4x32 GEMM
// CAP: missed.mlir:[[# @LINE + 6]]:8: remark: not merged with the matmul at {{.*}}missed.mlir:[[# @LINE + 5]]:8, both reading %arg0: the concatenated weights would be 1024 bytes, over max-merged-bytes=600
func.func @cap(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %b = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// The second weight is cast after the first result's use, but from a
// `linfuse.weight` argument alone: the cast is re-materialized at the merged
// matmul, so this is a merge, not a placement miss.
// CHECK: missed.mlir:[[# @LINE + 5]]:8: remark: merged 2 matmuls sharing %arg0 into one 4x32 GEMM
func.func @weight_cast_after_use(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf16> {linfuse.weight}) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.mulf %p, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %e8 = tensor.empty() : tensor<8x16xf32>
  %w2f = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w2 : tensor<8x16xf16>) outs(%e8 : tensor<8x16xf32>) {
  ^bb0(%p: f16, %o: f32):
    %s = arith.extf %p : f16 to f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %b = linalg.matmul ins(%x, %w2f : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %u, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// torch's add(y, b, alpha=1) through a broadcast is a bias-add; alpha=2
// is not: that add stays on its slice, and its matmul merges bias-free.
// CHECK: missed.mlir:[[# @LINE + 7]]:8: remark: merged 2 matmuls sharing %arg0 (with their bias-adds) into one 4x32 GEMM
func.func @alpha_one_and_two(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %bb = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  %ab = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %bb : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %q, %one : f32
    %t = arith.addf %p, %s : f32
    linalg.yield %t : f32
  } -> tensor<4x16xf32>
  %bb2 = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  %c = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %cb = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%c, %bb2 : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %q, %two : f32
    %t = arith.addf %p, %s : f32
    linalg.yield %t : f32
  } -> tensor<4x16xf32>
  return %ab, %cb : tensor<4x16xf32>, tensor<4x16xf32>
}
