// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime | %mlir-opt -split-input-file --verify-each -o /dev/null

// Operands become unranked memrefs (a column slice of a wider buffer keeps
// its strides: the runtime reads them); flags = transpose_b (2) | bias (4)
// = 6, epilogue relu = 1, alpha 1, beta 0. One declaration per signature.
// CHECK-LABEL: func.func private @linfuse_cpu_gemm_f32_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME:    (%[[A:.*]]: memref<?x32xf32>, %[[B:.*]]: memref<64x32xf32>, %[[BIAS:.*]]: memref<64xf32>, %[[C:.*]]: memref<?x64xf32, strided<[192, 1], offset: ?>>)
// CHECK-DAG:     %[[UA:.*]] = memref.cast %[[A]] : memref<?x32xf32> to memref<*xf32>
// CHECK-DAG:     %[[UB:.*]] = memref.cast %[[B]] : memref<64x32xf32> to memref<*xf32>
// CHECK-DAG:     %[[UC:.*]] = memref.cast %[[C]] : memref<?x64xf32, strided<[192, 1], offset: ?>> to memref<*xf32>
// CHECK-DAG:     %[[UBIAS:.*]] = memref.cast %[[BIAS]] : memref<64xf32> to memref<*xf32>
// CHECK-DAG:     %[[FLAGS:.*]] = arith.constant 6 : i32
// CHECK-DAG:     %[[EPI:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %{{.*}} = call @linfuse_cpu_gemm_f32_f32(%[[UA]], %[[UB]], %[[UBIAS]], %[[UC]], %[[FLAGS]], %[[EPI]], %[[ONE]], %[[ZERO]])
// CHECK-NOT:     linfuse.gemm
// CHECK-LABEL: func.func @second_call
// CHECK:         call @linfuse_cpu_gemm_f32_f32
// CUDA-LABEL: func.func private @linfuse_cuda_gemm_f32_f32(
// CUDA:         call @linfuse_cuda_gemm_f32_f32
func.func @linear_relu(%a: memref<?x32xf32>, %b: memref<64x32xf32>, %bias: memref<64xf32>, %c: memref<?x64xf32, strided<[192, 1], offset: ?>>) {
  linfuse.gemm ins(%a, %b : memref<?x32xf32>, memref<64x32xf32>) bias(%bias : memref<64xf32>) outs(%c : memref<?x64xf32, strided<[192, 1], offset: ?>>) transpose_b epilogue = <relu>
  return
}
func.func @second_call(%a: memref<4x8xf32>, %b: memref<8x8xf32>, %c: memref<4x8xf32>) {
  linfuse.gemm ins(%a, %b : memref<4x8xf32>, memref<8x8xf32>) outs(%c : memref<4x8xf32>)
  return
}

// -----

// f16 operands into f32 C; no bias, so C is passed in its place (flags =
// transpose_a = 1); gelu_tanh = 3; alpha and beta as given.
// CHECK-LABEL: func.func private @linfuse_cpu_gemm_f16_f32(memref<*xf16>, memref<*xf16>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
// CHECK-LABEL: func.func @mixed
// CHECK:         %[[UC:.*]] = memref.cast %{{.*}} : memref<4x16xf32> to memref<*xf32>
// CHECK-DAG:     %[[FLAGS:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[EPI:.*]] = arith.constant 3 : i32
// CHECK-DAG:     %[[ALPHA:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG:     %[[BETA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         call @linfuse_cpu_gemm_f16_f32(%{{.*}}, %{{.*}}, %[[UC]], %[[UC]], %[[FLAGS]], %[[EPI]], %[[ALPHA]], %[[BETA]])
func.func @mixed(%a: memref<8x4xf16>, %b: memref<8x16xf16>, %c: memref<4x16xf32>) {
  linfuse.gemm ins(%a, %b : memref<8x4xf16>, memref<8x16xf16>) outs(%c : memref<4x16xf32>) transpose_a epilogue = <gelu_tanh> {alpha = 0.25 : f32, beta = 1.0 : f32}
  return
}

// -----

// Batched bf16 with silu (4).
// CHECK-LABEL: func.func @batched_bf16
// CHECK:         call @linfuse_cpu_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i32, i32, f32, f32) -> i32
func.func @batched_bf16(%a: memref<2x4x8xbf16>, %b: memref<2x8x16xbf16>, %c: memref<2x4x16xbf16>) {
  linfuse.gemm ins(%a, %b : memref<2x4x8xbf16>, memref<2x8x16xbf16>) outs(%c : memref<2x4x16xbf16>) epilogue = <silu>
  return
}
