// RUN: linfuse-opt %s --linfuse-fold-constant-weights="resource-threshold=64" | FileCheck %s
// Below the default threshold (4096 bytes) every result stays dense<...>.
// RUN: linfuse-opt %s --linfuse-fold-constant-weights | FileCheck %s --check-prefix=DEFAULT
// The folded module re-parses with upstream mlir-opt (blob included).
// RUN: linfuse-opt %s --linfuse-fold-constant-weights="resource-threshold=64" | %mlir-opt | FileCheck %s --check-prefix=BLOB

// Constant concatenations and transposes are computed at compile time,
// through the constants' raw buffers. Every value is checked.

// Rows interleave: each output row is a's row then b's row.
// CHECK-LABEL: func.func @concat_dim1
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00], [3.000000e+00, 4.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01]]> : tensor<2x5xf32>
// CHECK-NEXT:    return %[[C]]
func.func @concat_dim1() -> tensor<2x5xf32> {
  %a = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = arith.constant dense<[[5.0, 6.0, 7.0], [8.0, 9.0, 10.0]]> : tensor<2x3xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return %c : tensor<2x5xf32>
}

// A splat input is expanded; bf16 bits move unchanged.
// CHECK-LABEL: func.func @concat_dim0_splat_bf16
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.500000e+00, 1.500000e+00], [2.000000e+00, -3.000000e+00], [2.500000e-01, 8.000000e+00]]> : tensor<3x2xbf16>
// CHECK-NEXT:    return %[[C]]
func.func @concat_dim0_splat_bf16() -> tensor<3x2xbf16> {
  %a = arith.constant dense<1.5> : tensor<1x2xbf16>
  %b = arith.constant dense<[[2.0, -3.0], [0.25, 8.0]]> : tensor<2x2xbf16>
  %c = tensor.concat dim(0) %a, %b : (tensor<1x2xbf16>, tensor<2x2xbf16>) -> tensor<3x2xbf16>
  return %c : tensor<3x2xbf16>
}

// Concat along a middle dim of a rank-3 f16 tensor.
// CHECK-LABEL: func.func @concat_middle_dim_f16
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}{{\[}}[1.000000e+00, 2.000000e+00], [5.000000e+00, 6.000000e+00], [7.000000e+00, 8.000000e+00]], {{\[}}[3.000000e+00, 4.000000e+00], [9.000000e+00, 1.000000e+01], [1.100000e+01, 1.200000e+01]]]> : tensor<2x3x2xf16>
// CHECK-NEXT:    return %[[C]]
func.func @concat_middle_dim_f16() -> tensor<2x3x2xf16> {
  %a = arith.constant dense<[[[1.0, 2.0]], [[3.0, 4.0]]]> : tensor<2x1x2xf16>
  %b = arith.constant dense<[[[5.0, 6.0], [7.0, 8.0]], [[9.0, 10.0], [11.0, 12.0]]]> : tensor<2x2x2xf16>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x1x2xf16>, tensor<2x2x2xf16>) -> tensor<2x3x2xf16>
  return %c : tensor<2x3x2xf16>
}

// CHECK-LABEL: func.func @transpose_2d
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// CHECK-NEXT:    return %[[C]]
func.func @transpose_2d() -> tensor<3x2xf32> {
  %a = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %e = tensor.empty() : tensor<3x2xf32>
  %t = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%e : tensor<3x2xf32>) permutation = [1, 0]
  return %t : tensor<3x2xf32>
}

// Batched weights: transpose of the last two dims.
// CHECK-LABEL: func.func @transpose_3d
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}{{\[}}[1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]], {{\[}}[7.000000e+00, 9.000000e+00, 1.100000e+01], [8.000000e+00, 1.000000e+01, 1.200000e+01]]]> : tensor<2x2x3xf32>
// CHECK-NEXT:    return %[[C]]
func.func @transpose_3d() -> tensor<2x2x3xf32> {
  %a = arith.constant dense<[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]]> : tensor<2x3x2xf32>
  %e = tensor.empty() : tensor<2x2x3xf32>
  %t = linalg.transpose ins(%a : tensor<2x3x2xf32>) outs(%e : tensor<2x2x3xf32>) permutation = [0, 2, 1]
  return %t : tensor<2x2x3xf32>
}

// 64 bytes reach the threshold: the result is a dense_resource blob whose
// bytes (after the 4-byte alignment header) are 1..4, 9..12, 5..8, 13..16.
// CHECK-LABEL: func.func @large_becomes_resource
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense_resource<linfuse_weight_{{[0-9]+}}> : tensor<2x8xf32>
// CHECK-NEXT:    return %[[C]]
func.func @large_becomes_resource() -> tensor<2x8xf32> {
  %a = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %b = arith.constant dense<[[9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<2x4xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}

// dense_resource inputs are read through their blob.
// CHECK-LABEL: func.func @resource_input
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 5.000000e+00], [3.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT:    return %[[C]]
func.func @resource_input() -> tensor<2x3xf32> {
  %a = arith.constant dense_resource<w> : tensor<2x2xf32>
  %b = arith.constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}

// Negative: a runtime operand keeps the concat.
// CHECK-LABEL: func.func @runtime_input
// CHECK-SAME:    (%[[X:.*]]: tensor<2x2xf32>)
// CHECK-NEXT:    %[[B:.*]] = arith.constant dense<{{\[}}[5.000000e+00], [6.000000e+00]]> : tensor<2x1xf32>
// CHECK-NEXT:    %[[C:.*]] = tensor.concat dim(1) %[[X]], %[[B]] : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    return %[[C]]
func.func @runtime_input(%x: tensor<2x2xf32>) -> tensor<2x3xf32> {
  %b = arith.constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %c = tensor.concat dim(1) %x, %b : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}

// Reshapes keep the row-major bytes: a collapse of a blob-backed weight
// and an expand of a dense one fold (the collapsed one here feeds a concat,
// which folds in turn).
// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 5.000000e+00], [3.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT:    %[[E:.*]] = arith.constant dense<{{\[}}{{\[}}[1.000000e+00, 2.000000e+00]], {{\[}}[3.000000e+00, 4.000000e+00]]]> : tensor<2x1x2xf32>
// CHECK-NEXT:    return %[[C]], %[[E]]
func.func @reshapes() -> (tensor<2x3xf32>, tensor<2x1x2xf32>) {
  %a = arith.constant dense_resource<w> : tensor<1x2x2xf32>
  %ac = tensor.collapse_shape %a [[0, 1], [2]] : tensor<1x2x2xf32> into tensor<2x2xf32>
  %b = arith.constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %c = tensor.concat dim(1) %ac, %b : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %d = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %e = tensor.expand_shape %d [[0, 1], [2]] output_shape [2, 1, 2] : tensor<2x2xf32> into tensor<2x1x2xf32>
  return %c, %e : tensor<2x3xf32>, tensor<2x1x2xf32>
}

// torch-mlir casts bf16/f16 weights to f32 with an element-wise generic:
// a constant too (rounded to nearest even when narrowing; 65504 is 65536
// in bf16, 1e6 overflows f16 to inf). With a transpose underneath, both
// fold.
// CHECK-LABEL: func.func @extf_of_transposed_bf16
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<{{\[}}[1.500000e+00, -3.000000e+00], [2.000000e+00, 2.500000e-01], [-0.000000e+00, 6.553600e+04]]> : tensor<3x2xf32>
// CHECK-NEXT:    return %[[C]]
func.func @extf_of_transposed_bf16() -> tensor<3x2xf32> {
  %a = arith.constant dense<[[1.5, 2.0, -0.0], [-3.0, 0.25, 65504.0]]> : tensor<2x3xbf16>
  %e = tensor.empty() : tensor<3x2xbf16>
  %t = linalg.transpose ins(%a : tensor<2x3xbf16>) outs(%e : tensor<3x2xbf16>) permutation = [1, 0]
  %f = tensor.empty() : tensor<3x2xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<3x2xbf16>) outs(%f : tensor<3x2xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<3x2xf32>
  return %c : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @truncf_f32_to_f16
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<[1.000000e+00, 3.332520e-01, 6.550400e+04, 0x7C00]> : tensor<4xf16>
// CHECK-NEXT:    return %[[C]]
func.func @truncf_f32_to_f16() -> tensor<4xf16> {
  %a = arith.constant dense<[1.0, 0.33333334, 65504.0, 1.0e6]> : tensor<4xf32>
  %f = tensor.empty() : tensor<4xf16>
  %c = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%f : tensor<4xf16>) {
  ^bb0(%in: f32, %out: f16):
    %v = arith.truncf %in : f32 to f16
    linalg.yield %v : f16
  } -> tensor<4xf16>
  return %c : tensor<4xf16>
}

// Negative: anything else in the body (here a scale), or a broadcasting
// map, is not a cast of the constant and stays.
// CHECK-LABEL: func.func @not_a_plain_cast
// CHECK-COUNT-2: linalg.generic
// CHECK:         return
func.func @not_a_plain_cast() -> (tensor<2xf32>, tensor<2x2xf32>) {
  %a = arith.constant dense<[1.0, 2.0]> : tensor<2xf16>
  %two = arith.constant 2.0 : f32
  %f = tensor.empty() : tensor<2xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : tensor<2xf16>) outs(%f : tensor<2xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    %s = arith.mulf %v, %two : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  %g = tensor.empty() : tensor<2x2xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<2xf16>) outs(%g : tensor<2x2xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<2x2xf32>
  return %c, %d : tensor<2xf32>, tensor<2x2xf32>
}

// DEFAULT-LABEL: func.func @large_becomes_resource
// DEFAULT-NEXT:    arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01, 1.200000e+01], [5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, 1.300000e+01, 1.400000e+01, 1.500000e+01, 1.600000e+01]]> : tensor<2x8xf32>

// BLOB: linfuse_weight_{{[0-9]+}}: "0x080000000000803F000000400000404000008040000010410000204100003041000040410000A0400000C0400000E0400000004100005041000060410000704100008041"

{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
