// RUN: linfuse-opt %s -split-input-file --linfuse-optimize | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains="policy=always" --linfuse-merge-parallel-matmuls --linfuse-remarks 2>&1 | FileCheck %s --check-prefix=ALWAYS
// A norm scale over run-time weights, in front of three projections. By
// default the scale stays a multiply (folding it into weight arguments
// would copy them) and the projections merge over the scaled input: the
// merged weight is a plain row concat of the weights. With policy=always it
// folds into each projection, and the scaled weights are computed where the
// weights are available (not next to each matmul), so the three
// projections still merge into one GEMM.

// REMARK: :48:9: remark: input scale not folded into weight arguments: the scaled weights would be a second copy of 512 bytes of weights (policy=always folds it)
// REMARK: :55:8: remark: merged 3 matmuls sharing %{{.*}} into one ?x16 GEMM
// CHECK-LABEL: func.func @norm_scale_qkv
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[G:.*]]: tensor<8xf32> {linfuse.weight}, %[[WQ:.*]]: tensor<8x8xf32> {linfuse.weight}, %[[WK:.*]]: tensor<4x8xf32> {linfuse.weight}, %[[WV:.*]]: tensor<4x8xf32> {linfuse.weight})
// CHECK:         %[[XS:.*]] = linalg.generic {{.*}} ins(%[[G]], %[[X]] : tensor<8xf32>, tensor<?x8xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul {{.*}} ins(%[[XS]], %[[W]] : tensor<?x8xf32>, tensor<16x8xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         tensor.extract_slice %[[MM]][0, 0] [%{{.*}}, 8]
// CHECK:         tensor.extract_slice %[[MM]][0, 8] [%{{.*}}, 4]
// CHECK:         tensor.extract_slice %[[MM]][0, 12] [%{{.*}}, 4]
// ALWAYS: :60:8: remark: folded an input scale into the weight
// ALWAYS: :59:8: remark: folded an input scale into the weight
// ALWAYS: :55:8: remark: folded an input scale into the weight
// ALWAYS: :55:8: remark: merged 3 matmuls sharing %arg0 into one ?x16 GEMM
// ALWAYS-LABEL: func.func @norm_scale_qkv
// ALWAYS-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[G:.*]]: tensor<8xf32> {linfuse.weight}, %[[WQ:.*]]: tensor<8x8xf32> {linfuse.weight}, %[[WK:.*]]: tensor<4x8xf32> {linfuse.weight}, %[[WV:.*]]: tensor<4x8xf32> {linfuse.weight})
// ALWAYS:         %[[SQ:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x8xf32>)
// ALWAYS:         %[[SK:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xf32>)
// ALWAYS:         %[[SV:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xf32>)
// ALWAYS:         %[[W:.*]] = tensor.concat dim(0) %[[SQ]], %[[SK]], %[[SV]] : (tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// ALWAYS:         %[[MM:.*]] = linalg.matmul {{.*}} ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<16x8xf32>)
// ALWAYS-NOT:     linalg.matmul
// ALWAYS:         tensor.extract_slice %[[MM]][0, 0] [%{{.*}}, 8]
// ALWAYS:         tensor.extract_slice %[[MM]][0, 8] [%{{.*}}, 4]
// ALWAYS:         tensor.extract_slice %[[MM]][0, 12] [%{{.*}}, 4]
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

// -----

// LoRA on q and v (peft's default targets), not on k, whose result is used
// (negated) before v: the folded q and v weights, W + 2·A·B, are computed
// right after the weights they read, so the merged GEMM can go where k was
// and the three projections still merge.
// REMARK: remark: folded a sum of linear branches (LoRA) into one matmul, FLOPs per row 28 → 16
// REMARK: remark: folded a sum of linear branches (LoRA) into one matmul, FLOPs per row 28 → 16
// REMARK: remark: merged 3 matmuls sharing %arg0 into one ?x6 GEMM
// CHECK-LABEL: func.func @lora_qv_then_merge
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %{{.*}} : tensor<?x4xf32>, tensor<4x6xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         linalg.negf
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @lora_qv_then_merge(%x: tensor<?x4xf32>, %wq: tensor<2x4xf32> {linfuse.weight}, %aq: tensor<1x4xf32> {linfuse.weight}, %bq: tensor<2x1xf32> {linfuse.weight}, %wk: tensor<2x4xf32> {linfuse.weight}, %wv: tensor<2x4xf32> {linfuse.weight}, %av: tensor<1x4xf32> {linfuse.weight}, %bv: tensor<2x1xf32> {linfuse.weight}) -> (tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x2xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e2 = tensor.empty(%m) : tensor<?x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1 = tensor.empty(%m) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %two = arith.constant 2.0 : f32
  // q = x·Wqᵀ + 2·(x·Aqᵀ)·Bqᵀ
  %q0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wq : tensor<?x4xf32>, tensor<2x4xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %qa = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %aq : tensor<?x4xf32>, tensor<1x4xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %qb = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%qa, %bq : tensor<?x1xf32>, tensor<2x1xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %qs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%qb : tensor<?x2xf32>) outs(%e2 : tensor<?x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.mulf %p, %two : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %q = linalg.add ins(%q0, %qs : tensor<?x2xf32>, tensor<?x2xf32>) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  // k, used before v
  %k = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wk : tensor<?x4xf32>, tensor<2x4xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %kn = linalg.negf ins(%k : tensor<?x2xf32>) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  // v = x·Wvᵀ + 2·(x·Avᵀ)·Bvᵀ
  %v0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wv : tensor<?x4xf32>, tensor<2x4xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %va = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %av : tensor<?x4xf32>, tensor<1x4xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %vb = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%va, %bv : tensor<?x1xf32>, tensor<2x1xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %vs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%vb : tensor<?x2xf32>) outs(%e2 : tensor<?x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.mulf %p, %two : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %v = linalg.add ins(%v0, %vs : tensor<?x2xf32>, tensor<?x2xf32>) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  return %q, %kn, %v : tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x2xf32>
}
