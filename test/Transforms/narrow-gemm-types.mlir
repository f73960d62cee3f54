// f16/bf16 GEMMs that importers spell in f32: operands widened by an extf
// generic before an f32 matmul (torch-mlir's bf16 Linear), and an f32
// result truncated right after. --linfuse-specialize-contractions makes the
// matmul read the narrow operands (its own implicit cast is that extf);
// --linfuse-raise-to-gemm lets the GEMM write the narrow result itself
// (rounded once, to nearest even, as truncf does), taking the bias only when
// its values are exact in that type.
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions | FileCheck %s --check-prefix=SPEC
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --linfuse-raise-to-gemm | FileCheck %s --check-prefix=GEMM
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --linfuse-raise-to-gemm | linfuse-opt -split-input-file --verify-each -o /dev/null
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --linfuse-raise-to-gemm --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: linfuse-opt %s -split-input-file --linfuse-specialize-contractions --linfuse-raise-to-gemm --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// STATS:      linfuse-specialize-contractions
// STATS:        (S) 2 operands-narrowed
// STATS:      linfuse-raise-to-gemm
// STATS:        (S) 4 truncations-fused

#id = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>

// torch-mlir's bf16 Linear with bias: x and W widened, f32 matmul, the
// widened bias added, the result truncated. One bf16 GEMM with a bf16 bias
// writing bf16 remains.
// SPEC-LABEL: func.func @bf16_linear_bias
// SPEC:         linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%arg0, %arg1 : tensor<?x8xbf16>, tensor<4x8xbf16>) outs(%{{.*}} : tensor<?x4xf32>) -> tensor<?x4xf32>
// GEMM-LABEL: func.func @bf16_linear_bias
// GEMM-SAME:    (%[[X:.*]]: tensor<?x8xbf16>, %[[W:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4xbf16>)
// GEMM:         %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xbf16>
// GEMM-NEXT:    %[[G:.*]] = linfuse.gemm ins(%[[X]], %[[W]] : tensor<?x8xbf16>, tensor<4x8xbf16>) bias(%[[B]] : tensor<4xbf16>) outs(%[[E]] : tensor<?x4xbf16>) transpose_b -> tensor<?x4xbf16>
// GEMM-NEXT:    return %[[G]] : tensor<?x4xbf16>
// REMARK: remark: narrowed to bf16 operands (%arg0, %arg1 before their extf to f32): the product is the same, computed natively
// REMARK: remark: raised to linfuse.gemm with bias, writing its result rounded to bf16
func.func @bf16_linear_bias(%x: tensor<?x8xbf16>, %w: tensor<4x8xbf16>, %b: tensor<4xbf16>) -> tensor<?x4xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xbf16>
  %xe = tensor.empty(%m) : tensor<?x8xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x8xbf16>) outs(%xe : tensor<?x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<?x8xf32>
  %we = tensor.empty() : tensor<4x8xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xbf16>) outs(%we : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %be = tensor.empty() : tensor<4xf32>
  %bf = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b : tensor<4xbf16>) outs(%be : tensor<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xf, %wf : tensor<?x8xf32>, tensor<4x8xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bf : tensor<?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %s = arith.addf %a, %bb : f32
    linalg.yield %s : f32
  } -> tensor<?x4xf32>
  %he = tensor.empty(%m) : tensor<?x4xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<?x4xf32>) outs(%he : tensor<?x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x4xbf16>
  return %h : tensor<?x4xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// An f16 x f16 -> f32 matmul (IREE's contraction once specialized) with a
// constant bias whose values are all f16's (0.5, -2, 1024) and a relu,
// then truncated: one f16 GEMM with an f16 bias constant and the relu.
// GEMM-LABEL: func.func @f16_constant_bias_relu
// GEMM:         %[[B:.*]] = arith.constant dense<[5.000000e-01, -2.000000e+00, 1.024000e+03]> : tensor<3xf16>
// GEMM:         linfuse.gemm ins(%arg0, %arg1 : tensor<5x8xf16>, tensor<8x3xf16>) bias(%[[B]] : tensor<3xf16>) outs(%{{.*}} : tensor<5x3xf16>) epilogue = <relu> -> tensor<5x3xf16>
// GEMM-NOT:     linalg.generic
func.func @f16_constant_bias_relu(%x: tensor<5x8xf16>, %w: tensor<8x3xf16>) -> tensor<5x3xf16> {
  %zero = arith.constant 0.0 : f32
  %bias = arith.constant dense<[0.5, -2.0, 1024.0]> : tensor<3xf32>
  %e = tensor.empty() : tensor<5x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<5x3xf32>) -> tensor<5x3xf32>
  %y = linalg.matmul ins(%x, %w : tensor<5x8xf16>, tensor<8x3xf16>) outs(%f : tensor<5x3xf32>) -> tensor<5x3xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bias : tensor<5x3xf32>, tensor<3xf32>) outs(%e : tensor<5x3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<5x3xf32>
  %yr = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<5x3xf32>) outs(%e : tensor<5x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %z : f32
    linalg.yield %r : f32
  } -> tensor<5x3xf32>
  %he = tensor.empty() : tensor<5x3xf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yr : tensor<5x3xf32>) outs(%he : tensor<5x3xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<5x3xf16>
  return %h : tensor<5x3xf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Not narrowed: a constant bias with a value bf16 cannot hold (0.1), so
// the GEMM keeps its f32 bias and result, and the truncation stays.
// GEMM-LABEL: func.func @inexact_bias
// GEMM:         linfuse.gemm {{.*}} bias(%{{.*}} : tensor<2xf32>) outs(%{{.*}} : tensor<4x2xf32>) -> tensor<4x2xf32>
// GEMM:         arith.truncf
func.func @inexact_bias(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %zero = arith.constant 0.0 : f32
  %bias = arith.constant dense<[0.1, 1.0]> : tensor<2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bias : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<4x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not narrowed: accumulating into an input C (beta = 1: its f32 values
// are read); a truncation to another type than the operands' (bf16
// operands, f16 result); a truncation with a rounding mode of its own; a
// truncation that also scales.
// GEMM-LABEL: func.func @accumulates
// GEMM:         linfuse.gemm {{.*}} outs(%{{.*}} : tensor<4x2xf32>) {{.*}}-> tensor<4x2xf32>
// GEMM:         arith.truncf
func.func @accumulates(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>, %acc: tensor<4x2xf32>) -> tensor<4x2xbf16> {
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%acc : tensor<4x2xf32>) -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}

// GEMM-LABEL: func.func @other_type
// GEMM:         linfuse.gemm {{.*}} -> tensor<4x2xf32>
// GEMM:         arith.truncf %{{.*}} : f32 to f16
func.func @other_type(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x2xf32>) outs(%he : tensor<4x2xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<4x2xf16>
  return %h : tensor<4x2xf16>
}

// GEMM-LABEL: func.func @rounding_mode
// GEMM:         linfuse.gemm {{.*}} -> tensor<4x2xf32>
// GEMM:         arith.truncf %{{.*}} toward_zero : f32 to bf16
func.func @rounding_mode(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in toward_zero : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}

// GEMM-LABEL: func.func @scales_too
// GEMM:         linfuse.gemm {{.*}} -> tensor<4x2xf32>
// GEMM:         arith.mulf
// GEMM:         arith.truncf
func.func @scales_too(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %s = arith.mulf %in, %two : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// Batched: per-batch f16 operands widened, then truncated: one f16
// batched GEMM. Not narrowed: operands widened from different types (f16
// and bf16), or only one of them widened.
// SPEC-LABEL: func.func @batched_f16
// SPEC:         linalg.batch_matmul ins(%arg0, %arg1 : tensor<2x4x8xf16>, tensor<2x8x3xf16>) outs(%{{.*}} : tensor<2x4x3xf32>)
// GEMM-LABEL: func.func @batched_f16
// GEMM:         linfuse.gemm ins(%arg0, %arg1 : tensor<2x4x8xf16>, tensor<2x8x3xf16>) outs(%{{.*}} : tensor<2x4x3xf16>) -> tensor<2x4x3xf16>
func.func @batched_f16(%a: tensor<2x4x8xf16>, %b: tensor<2x8x3xf16>) -> tensor<2x4x3xf16> {
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<2x4x8xf32>
  %af = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<2x4x8xf16>) outs(%ae : tensor<2x4x8xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<2x4x8xf32>
  %be = tensor.empty() : tensor<2x8x3xf32>
  %bf = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%b : tensor<2x8x3xf16>) outs(%be : tensor<2x8x3xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<2x8x3xf32>
  %e = tensor.empty() : tensor<2x4x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %y = linalg.batch_matmul ins(%af, %bf : tensor<2x4x8xf32>, tensor<2x8x3xf32>) outs(%f : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %he = tensor.empty() : tensor<2x4x3xf16>
  %h = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%y : tensor<2x4x3xf32>) outs(%he : tensor<2x4x3xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x4x3xf16>
  return %h : tensor<2x4x3xf16>
}

// SPEC-LABEL: func.func @mixed_sources
// SPEC:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x2xf32>)
// SPEC-LABEL: func.func @one_side_widened
// SPEC:         linalg.matmul ins(%{{.*}}, %arg1 : tensor<4x8xf32>, tensor<8x2xf32>)
func.func @mixed_sources(%x: tensor<4x8xf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %xe = tensor.empty() : tensor<4x8xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf16>) outs(%xe : tensor<4x8xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %we = tensor.empty() : tensor<8x2xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x2xbf16>) outs(%we : tensor<8x2xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<8x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%xf, %wf : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

func.func @one_side_widened(%x: tensor<4x8xbf16>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %xe = tensor.empty() : tensor<4x8xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%xe : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%xf, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// The truncation spells the rows statically (4) where the matmul left them
// dynamic: the GEMM writes ?x2 and a tensor.cast gives the users the type
// they had (the IR stays valid).
// GEMM-LABEL: func.func @static_truncation_of_dynamic
// GEMM:         %[[G:.*]] = linfuse.gemm ins(%arg0, %arg1 : tensor<?x8xbf16>, tensor<8x2xbf16>) outs(%{{.*}} : tensor<?x2xbf16>) -> tensor<?x2xbf16>
// GEMM-NEXT:    %[[C:.*]] = tensor.cast %[[G]] : tensor<?x2xbf16> to tensor<4x2xbf16>
// GEMM-NEXT:    return %[[C]] : tensor<4x2xbf16>
func.func @static_truncation_of_dynamic(%x: tensor<?x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xbf16>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<?x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// Not narrowed: `linfuse.exact_in` on an argument the weight lifting did
// not make (no `linfuse.packed`, no packing function) is not trusted, so
// the bias stays f32 and so does the result.
// GEMM-LABEL: func.func @untrusted_exact_in
// GEMM:         linfuse.gemm {{.*}} bias(%arg2 : tensor<2xf32>) outs(%{{.*}} : tensor<4x2xf32>) -> tensor<4x2xf32>
// GEMM:         arith.truncf
func.func @untrusted_exact_in(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>, %b: tensor<2xf32> {linfuse.exact_in = bf16}) -> tensor<4x2xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x2xbf16>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %s = arith.addf %a, %bb : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %he = tensor.empty() : tensor<4x2xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<4x2xf32>) outs(%he : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x2xbf16>
  return %h : tensor<4x2xbf16>
}
