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
