// RUN: linfuse-opt %s -split-input-file --linfuse-optimize | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// A norm scale over run-time weights folds into each projection, and the
// scaled weights are computed where the weights are available (not next to
// each matmul), so the three projections still merge into one GEMM.

// REMARK: :44:8: remark: folded an input scale into the weight
// REMARK: :43:8: remark: folded an input scale into the weight
// REMARK: :39:8: remark: folded an input scale into the weight
// REMARK: :39:8: remark: merged 3 matmuls sharing %arg0 into one ?x16 GEMM
// CHECK-LABEL: func.func @norm_scale_qkv
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[G:.*]]: tensor<8xf32> {linfuse.weight}, %[[WQ:.*]]: tensor<8x8xf32> {linfuse.weight}, %[[WK:.*]]: tensor<4x8xf32> {linfuse.weight}, %[[WV:.*]]: tensor<4x8xf32> {linfuse.weight})
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x8xf32>)
// CHECK:         %[[SK:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:         %[[SV:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[SQ]], %[[SK]], %[[SV]] : (tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul {{.*}} ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<16x8xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         tensor.extract_slice %[[MM]][0, 0] [%{{.*}}, 8]
// CHECK:         tensor.extract_slice %[[MM]][0, 8] [%{{.*}}, 4]
// CHECK:         tensor.extract_slice %[[MM]][0, 12] [%{{.*}}, 4]
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @norm_scale_qkv(%x: tensor<?x8xf32>, %g: tensor<8xf32> {linfuse.weight}, %wq: tensor<8x8xf32> {linfuse.weight}, %wk: tensor<4x8xf32> {linfuse.weight}, %wv: tensor<4x8xf32> {linfuse.weight}) -> (tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %es = tensor.empty(%m) : tensor<?x8xf32>
  %xs = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%g, %x : tensor<8xf32>, tensor<?x8xf32>) outs(%es : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x8xf32>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %q = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %wq : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %qr = tensor.expand_shape %q [[0, 1], [2]] output_shape [%m, 1, 8] : tensor<?x8xf32> into tensor<?x1x8xf32>
  %e4 = tensor.empty(%m) : tensor<?x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %wk : tensor<?x8xf32>, tensor<4x8xf32>) outs(%f4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %v = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %wv : tensor<?x8xf32>, tensor<4x8xf32>) outs(%f4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %q2 = tensor.collapse_shape %qr [[0, 1], [2]] : tensor<?x1x8xf32> into tensor<?x8xf32>
  return %q2, %k, %v : tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Negative: the scale reads a plain argument (it may change per call), so it
// stays a multiply; the projections still merge over the unscaled input.
// REMARK-NOT: folded an input scale
// REMARK: remark: merged 2 matmuls sharing %{{.*}} into one ?x12 GEMM
// REMARK-NOT: folded an input scale
// CHECK-LABEL: func.func @per_call_scale
// CHECK:         %[[XS:.*]] = linalg.generic
// CHECK:         %[[W:.*]] = tensor.concat dim(0)
// CHECK:         linalg.matmul {{.*}} ins(%[[XS]], %[[W]] : tensor<?x8xf32>, tensor<12x8xf32>)
// CHECK-NOT:     linalg.matmul
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @per_call_scale(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %wq: tensor<8x8xf32> {linfuse.weight}, %wk: tensor<4x8xf32> {linfuse.weight}) -> (tensor<?x8xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %es = tensor.empty(%m) : tensor<?x8xf32>
  %xs = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%g, %x : tensor<8xf32>, tensor<?x8xf32>) outs(%es : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x8xf32>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %q = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %wq : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %e4 = tensor.empty(%m) : tensor<?x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %k = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %wk : tensor<?x8xf32>, tensor<4x8xf32>) outs(%f4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %q, %k : tensor<?x8xf32>, tensor<?x4xf32>
}
