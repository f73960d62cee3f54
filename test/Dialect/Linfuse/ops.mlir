// RUN: linfuse-opt %s -split-input-file | FileCheck %s
// Round trip through the generic form must give the same custom form back.
// RUN: linfuse-opt %s -split-input-file -mlir-print-op-generic | linfuse-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func @plain_f32
// CHECK:         %[[R:.*]] = linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<32x128xf32>) outs(%{{.*}} : tensor<64x128xf32>) -> tensor<64x128xf32>
// CHECK:         return %[[R]]
func.func @plain_f32(%a: tensor<64x32xf32>, %b: tensor<32x128xf32>, %c: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %0 = linfuse.gemm ins(%a, %b : tensor<64x32xf32>, tensor<32x128xf32>) outs(%c : tensor<64x128xf32>) -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}

// -----

// nn.Linear layout: weights [out, in], dynamic M, bias, every epilogue.
// CHECK-LABEL: func @linear_dynamic_m
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%{{.*}} : tensor<2304xf32>) outs(%{{.*}} : tensor<?x2304xf32>) transpose_b -> tensor<?x2304xf32>
// CHECK:         linfuse.gemm {{.*}} transpose_b epilogue = <relu> -> tensor<?x2304xf32>
// CHECK:         linfuse.gemm {{.*}} transpose_b epilogue = <gelu_erf> -> tensor<?x2304xf32>
// CHECK:         linfuse.gemm {{.*}} transpose_b epilogue = <gelu_tanh> -> tensor<?x2304xf32>
// CHECK:         linfuse.gemm {{.*}} transpose_b epilogue = <silu> -> tensor<?x2304xf32>
func.func @linear_dynamic_m(%x: tensor<?x768xf32>, %w: tensor<2304x768xf32>, %bias: tensor<2304xf32>, %c: tensor<?x2304xf32>) -> tensor<?x2304xf32> {
  %0 = linfuse.gemm ins(%x, %w : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%bias : tensor<2304xf32>) outs(%c : tensor<?x2304xf32>) transpose_b epilogue = <none> -> tensor<?x2304xf32>
  %1 = linfuse.gemm ins(%x, %w : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%bias : tensor<2304xf32>) outs(%0 : tensor<?x2304xf32>) transpose_b epilogue = <relu> -> tensor<?x2304xf32>
  %2 = linfuse.gemm ins(%x, %w : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%bias : tensor<2304xf32>) outs(%1 : tensor<?x2304xf32>) transpose_b epilogue = <gelu_erf> -> tensor<?x2304xf32>
  %3 = linfuse.gemm ins(%x, %w : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%bias : tensor<2304xf32>) outs(%2 : tensor<?x2304xf32>) transpose_b epilogue = <gelu_tanh> -> tensor<?x2304xf32>
  %4 = linfuse.gemm ins(%x, %w : tensor<?x768xf32>, tensor<2304x768xf32>) bias(%bias : tensor<2304xf32>) outs(%3 : tensor<?x2304xf32>) transpose_b epilogue = <silu> -> tensor<?x2304xf32>
  return %4 : tensor<?x2304xf32>
}

// -----

// Batched (rank 3), transposed A, alpha/beta.
// CHECK-LABEL: func @batched_transposed_a
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<4x32x16xf32>, tensor<4x32x8xf32>) outs(%{{.*}} : tensor<4x16x8xf32>) transpose_a {alpha = 5.000000e-01 : f32, beta = 1.000000e+00 : f32} -> tensor<4x16x8xf32>
func.func @batched_transposed_a(%a: tensor<4x32x16xf32>, %b: tensor<4x32x8xf32>, %c: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %0 = linfuse.gemm ins(%a, %b : tensor<4x32x16xf32>, tensor<4x32x8xf32>) outs(%c : tensor<4x16x8xf32>) transpose_a {alpha = 0.5 : f32, beta = 1.0 : f32} -> tensor<4x16x8xf32>
  return %0 : tensor<4x16x8xf32>
}

// -----

// f16 and bf16 operands, with f32 or same-type outputs and biases.
// CHECK-LABEL: func @half_types
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xf16>, tensor<64x32xf16>) outs(%{{.*}} : tensor<?x32xf16>) -> tensor<?x32xf16>
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<32x64xbf16>) bias(%{{.*}} : tensor<32xf32>) outs(%{{.*}} : tensor<?x32xf32>) transpose_b epilogue = <silu> -> tensor<?x32xf32>
func.func @half_types(%a: tensor<?x64xf16>, %b: tensor<64x32xf16>, %c: tensor<?x32xf16>,
                      %a2: tensor<?x64xbf16>, %b2: tensor<32x64xbf16>, %bias: tensor<32xf32>, %c2: tensor<?x32xf32>) -> (tensor<?x32xf16>, tensor<?x32xf32>) {
  %0 = linfuse.gemm ins(%a, %b : tensor<?x64xf16>, tensor<64x32xf16>) outs(%c : tensor<?x32xf16>) -> tensor<?x32xf16>
  %1 = linfuse.gemm ins(%a2, %b2 : tensor<?x64xbf16>, tensor<32x64xbf16>) bias(%bias : tensor<32xf32>) outs(%c2 : tensor<?x32xf32>) transpose_b epilogue = <silu> -> tensor<?x32xf32>
  return %0, %1 : tensor<?x32xf16>, tensor<?x32xf32>
}

// -----

// Memref form: strided views (a column slice of a merged buffer), no result.
// CHECK-LABEL: func @memref_strided
// CHECK:         linfuse.gemm ins(%{{.*}}, %{{.*}} : memref<?x64xbf16>, memref<64x32xbf16, strided<[96, 1], offset: 32>>) bias(%{{.*}} : memref<32xbf16>) outs(%{{.*}} : memref<?x32xbf16, strided<[96, 1], offset: 32>>) epilogue = <relu>{{$}}
func.func @memref_strided(%a: memref<?x64xbf16>, %b: memref<64x32xbf16, strided<[96, 1], offset: 32>>, %bias: memref<32xbf16>, %c: memref<?x32xbf16, strided<[96, 1], offset: 32>>) {
  linfuse.gemm ins(%a, %b : memref<?x64xbf16>, memref<64x32xbf16, strided<[96, 1], offset: 32>>) bias(%bias : memref<32xbf16>) outs(%c : memref<?x32xbf16, strided<[96, 1], offset: 32>>) epilogue = <relu>
  return
}

// -----

// The epilogue attribute on its own.
// CHECK-LABEL: func @epilogue_attr
// CHECK-SAME:    attributes {act = #linfuse.epilogue<gelu_erf>}
func.func @epilogue_attr() attributes {act = #linfuse.epilogue<gelu_erf>} {
  return
}

// Integer GEMM: i8 A and B, i32 C and bias.
// CHECK-LABEL: func.func @int8
// CHECK: linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xi8>, tensor<96x64xi8>) bias(%{{.*}} : tensor<96xi32>) outs(%{{.*}} : tensor<?x96xi32>) transpose_b -> tensor<?x96xi32>
func.func @int8(%a: tensor<?x64xi8>, %b: tensor<96x64xi8>, %bias: tensor<96xi32>, %c: tensor<?x96xi32>) -> tensor<?x96xi32> {
  %r = linfuse.gemm ins(%a, %b : tensor<?x64xi8>, tensor<96x64xi8>) bias(%bias : tensor<96xi32>) outs(%c : tensor<?x96xi32>) transpose_b -> tensor<?x96xi32>
  return %r : tensor<?x96xi32>
}
