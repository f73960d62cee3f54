// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm=epilogues=false | FileCheck %s --check-prefix=NOEPI
// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm | linfuse-opt -split-input-file --verify-each -o /dev/null

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// A zero-filled accumulator becomes beta = 0 (the fill goes away), a
// bias-add generic the bias, and GELU (erf form) the epilogue.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xf32>, %[[W:.*]]: tensor<32x64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK:         %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x64xf32>
// CHECK-NEXT:    %[[G:.*]] = linfuse.gemm ins(%[[X]], %[[W]] : tensor<?x32xf32>, tensor<32x64xf32>) bias(%[[B]] : tensor<64xf32>) outs(%[[E]] : tensor<?x64xf32>) epilogue = <gelu_erf> -> tensor<?x64xf32>
// CHECK-NEXT:    return %[[G]]
// NOEPI-LABEL: func.func @bias_gelu
// NOEPI:         %[[G:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x32xf32>, tensor<32x64xf32>) outs(%{{.*}} : tensor<?x64xf32>) -> tensor<?x64xf32>
// NOEPI:         linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<?x64xf32>, tensor<64xf32>)
// REMARK: remark: raised to linfuse.gemm with bias and gelu_erf epilogue
func.func @bias_gelu(%x: tensor<?x32xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x32xf32>, tensor<32x64xf32>) outs(%f : tensor<?x64xf32>) -> tensor<?x64xf32>
  %z = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%z : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %rs2 = arith.constant 0.70710678 : f32
    %t = arith.mulf %in, %rs2 : f32
    %er = math.erf %t : f32
    %p1 = arith.addf %er, %one : f32
    %h = arith.mulf %in, %half : f32
    %r = arith.mulf %h, %p1 : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  return %g : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// nn.Linear layout ([out, in] weight read through a transposed-B map), a
// linalg.add + linalg.broadcast bias, and ReLU spelled cmpf + select.
// CHECK-LABEL: func.func @linear_relu
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<16x8xf32>) bias(%{{.*}} : tensor<16xf32>) outs(%{{.*}} : tensor<4x16xf32>) transpose_b epilogue = <relu> -> tensor<4x16xf32>
// CHECK-NOT:     linalg.
// REMARK: remark: raised to linfuse.gemm with bias and relu epilogue
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%x, %w : tensor<4x8xf32>, tensor<16x8xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %bb = linalg.broadcast ins(%b : tensor<16xf32>) outs(%e : tensor<4x16xf32>) dimensions = [0]
  %z = linalg.add ins(%y, %bb : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%z : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.cmpf ugt, %in, %zero : f32
    %s = arith.select %c, %in, %zero : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// GELU, tanh form (torch's approximate="tanh", x³ as powf), without a bias.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK:         linfuse.gemm ins({{.*}}) outs({{.*}}) epilogue = <gelu_tanh> -> tensor<4x16xf32>
// REMARK: remark: raised to linfuse.gemm with gelu_tanh epilogue
func.func @gelu_tanh(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %three = arith.constant 3.0 : f32
    %k = arith.constant 0.044715 : f32
    %s2pi = arith.constant 0.797884583 : f32
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %cube = math.powf %in, %three : f32
    %kc = arith.mulf %cube, %k : f32
    %inner = arith.addf %in, %kc : f32
    %arg = arith.mulf %inner, %s2pi : f32
    %t = math.tanh %arg : f32
    %tp = arith.addf %t, %one : f32
    %hx = arith.mulf %in, %half : f32
    %res = arith.mulf %hx, %tp : f32
    linalg.yield %res : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// SiLU as x / (1 + exp(-x)) on an f16 GEMM computing in f32 inside the
// body; A and B f16, C f16.
// CHECK-LABEL: func.func @silu_f16
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x16xf16>) outs(%{{.*}} : tensor<4x16xf16>) epilogue = <silu> -> tensor<4x16xf16>
func.func @silu_f16(%x: tensor<4x8xf16>, %w: tensor<8x16xf16>) -> tensor<4x16xf16> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<4x16xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<4x16xf16>) -> tensor<4x16xf16>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf16>, tensor<8x16xf16>) outs(%f : tensor<4x16xf16>) -> tensor<4x16xf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x16xf16>) outs(%e : tensor<4x16xf16>) {
  ^bb0(%in: f16, %o: f16):
    %one = arith.constant 1.0 : f32
    %x32 = arith.extf %in : f16 to f32
    %n = arith.negf %x32 : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %s = arith.divf %x32, %den : f32
    %s16 = arith.truncf %s : f32 to f16
    linalg.yield %s16 : f16
  } -> tensor<4x16xf16>
  return %r : tensor<4x16xf16>
}

// -----

// Transposed A, bf16 operands accumulating into f32; a non-zero
// accumulator stays C with beta = 1.
// CHECK-LABEL: func.func @transposed_a_accumulate
// CHECK-SAME:    (%[[A:.*]]: tensor<8x4xbf16>, %[[B:.*]]: tensor<8x16xbf16>, %[[C:.*]]: tensor<4x16xf32>)
// CHECK-NEXT:    %[[G:.*]] = linfuse.gemm ins(%[[A]], %[[B]] : tensor<8x4xbf16>, tensor<8x16xbf16>) outs(%[[C]] : tensor<4x16xf32>) transpose_a {beta = 1.000000e+00 : f32} -> tensor<4x16xf32>
// CHECK-NEXT:    return %[[G]]
func.func @transposed_a_accumulate(%a: tensor<8x4xbf16>, %b: tensor<8x16xbf16>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a, %b : tensor<8x4xbf16>, tensor<8x16xbf16>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Batched, with a bias along N (rank-3 bias-add).
// CHECK-LABEL: func.func @batched_bias
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x16xf32>) bias(%{{.*}} : tensor<16xf32>) outs(%{{.*}} : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
func.func @batched_bias(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>, %bias: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %y = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%f : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%y, %bias : tensor<2x4x16xf32>, tensor<16xf32>) outs(%e : tensor<2x4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  return %z : tensor<2x4x16xf32>
}

// -----

// A matmul reading a column slice of a merged result raises like any other
// (bufferization makes the slice a strided view).
// CHECK-LABEL: func.func @slice_of_merged
// CHECK:         %[[M:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x24xf32>) outs(%{{.*}} : tensor<4x24xf32>) -> tensor<4x24xf32>
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[M]][0, 8] [4, 8] [1, 1]
// CHECK:         linfuse.gemm ins(%[[S]], %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32>)
func.func @slice_of_merged(%x: tensor<4x8xf32>, %w: tensor<8x24xf32>, %v: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x24xf32>) -> tensor<4x24xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x24xf32>) outs(%f : tensor<4x24xf32>) -> tensor<4x24xf32>
  %k = tensor.extract_slice %y[0, 8] [4, 8] [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
  %e8 = tensor.empty() : tensor<4x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = linalg.matmul ins(%k, %v : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// Negative: the bias-add result has a second user, so the activation stays;
// an element-wise op that is no epilogue (x * x) stays; the bias-add after
// a matmul with another user stays.
// CHECK-LABEL: func.func @not_absorbed
// CHECK:         %[[G:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>) bias(%{{.*}} : tensor<16xf32>) outs(%{{.*}} : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[G]] : tensor<4x16xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[H:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>) outs(%{{.*}} : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[H]] : tensor<4x16xf32>)
// CHECK:           arith.mulf
func.func @not_absorbed(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %z = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%z : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  %y2 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y2 : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %m = arith.mulf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  return %z, %r, %sq : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: integer matmuls and generic contractions stay linalg.
// CHECK-LABEL: func.func @integer
// CHECK-NOT:     linfuse.gemm
// CHECK:         linalg.matmul
func.func @integer(%a: tensor<4x8xi32>, %b: tensor<8x16xi32>, %c: tensor<4x16xi32>) -> tensor<4x16xi32> {
  %y = linalg.matmul ins(%a, %b : tensor<4x8xi32>, tensor<8x16xi32>) outs(%c : tensor<4x16xi32>) -> tensor<4x16xi32>
  return %y : tensor<4x16xi32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Negative (found by the random lowering test): the matmul result is only
// the *destination* of a ReLU of another tensor, whose body ignores it;
// ReLU6 (clamped at 6) is not ReLU. Neither is absorbed.
// CHECK-LABEL: func.func @not_an_epilogue
// CHECK:         %[[G:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : tensor<2x2xf32>) outs(%[[G]] : tensor<2x2xf32>)
// CHECK:         %[[H:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[H]] : tensor<2x2xf32>)
// CHECK:           arith.minimumf
func.func @not_an_epilogue(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %other: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%other : tensor<2x2xf32>) outs(%mm : tensor<2x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %zero : f32
    linalg.yield %m : f32
  } -> tensor<2x2xf32>
  %mm2 = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r6 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm2 : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %zero : f32
    %c = arith.minimumf %m, %six : f32
    linalg.yield %c : f32
  } -> tensor<2x2xf32>
  return %r, %r6 : tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// A zero fill of something other than a tensor.empty (here the LHS itself)
// stays as the destination, beta = 0: bufferization then copies rather than
// letting the GEMM overwrite the LHS it reads.
// CHECK-LABEL: func.func @fill_of_lhs
// CHECK-SAME:    (%[[A:.*]]: tensor<2x2xf32>, %[[B:.*]]: tensor<2x2xf32>)
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[A]] : tensor<2x2xf32>)
// CHECK:         linfuse.gemm ins(%[[A]], %[[B]] : tensor<2x2xf32>, tensor<2x2xf32>) outs(%[[F]] : tensor<2x2xf32>) -> tensor<2x2xf32>
func.func @fill_of_lhs(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%a : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %mm : tensor<2x2xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// torch-mlir's bias-add: a linalg.generic broadcasts the bias to [M, N] and
// an element-wise add (here with torch's alpha multiply by 1) adds it. The
// bias vector becomes the GEMM's bias; the broadcast goes with the add.
// CHECK-LABEL: func.func @torch_broadcast_bias
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK:         %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT:    %[[G:.*]] = linfuse.gemm ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<8x4xf32>) bias(%[[B]] : tensor<4xf32>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    return %[[G]]
// REMARK: remark: raised to linfuse.gemm with bias
func.func @torch_broadcast_bias(%x: tensor<?x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %bb = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bb : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %q, %one : f32
    %r = arith.addf %p, %s : f32
    linalg.yield %r : f32
  } -> tensor<?x4xf32>
  return %z : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// Negative: alpha = 0.5 (y + 0.5·b) is not a bias of b; the add and its
// broadcast stay after the GEMM. So does a broadcast along the rows
// ((d0, d1) -> (d0): a per-row, not per-column, vector).
// CHECK-LABEL: func.func @torch_broadcast_not_bias
// CHECK:         %[[G:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:           arith.mulf
// CHECK:         %[[G2:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x4xf32>) outs(%{{.*}} : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[G2]], %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:         return
func.func @torch_broadcast_not_bias(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %bb = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bb : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %q, %half : f32
    %r = arith.addf %p, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %y2 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %cb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %z2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%y2, %cb : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  return %z, %z2 : tensor<4x4xf32>, tensor<4x4xf32>
}
