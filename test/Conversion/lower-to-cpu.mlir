// RUN: linfuse-opt %s --linfuse-raise-to-gemm --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF
// RUN: linfuse-opt %s --linfuse-lower-to-cpu | FileCheck %s
// RUN: linfuse-opt %s --linfuse-lower-to-cpu | %mlir-opt --verify-each -o /dev/null

// A merged Q/K projection (bias along the merged N) whose K slice feeds
// another matmul and whose Q slice an add. After bufferization both slices
// are strided views of the merged GEMM's buffer (leading dimension 24), the
// GEMMs read and write them in place, and nothing is copied.
// BUF-LABEL: func.func @qk
// BUF-SAME:    (%[[X:.*]]: memref<?x8xf32>, %[[W:.*]]: memref<8x24xf32>, %[[B:.*]]: memref<24xf32>, %[[V:.*]]: memref<8x8xf32>) -> memref<?x8xf32>
// BUF:         %[[M:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x24xf32>
// BUF-NEXT:    linfuse.gemm ins(%[[X]], %[[W]] : memref<?x8xf32>, memref<8x24xf32>) bias(%[[B]] : memref<24xf32>) outs(%[[M]] : memref<?x24xf32>)
// BUF-NEXT:    %[[Q:.*]] = memref.subview %[[M]][0, 0] [%{{.*}}, 8] [1, 1] : memref<?x24xf32> to memref<?x8xf32, strided<[24, 1]>>
// BUF-NEXT:    %[[K:.*]] = memref.subview %[[M]][0, 8] [%{{.*}}, 8] [1, 1] : memref<?x24xf32> to memref<?x8xf32, strided<[24, 1], offset: 8>>
// BUF-NEXT:    %[[O:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x8xf32>
// BUF-NEXT:    linfuse.gemm ins(%[[K]], %[[V]] : memref<?x8xf32, strided<[24, 1], offset: 8>>, memref<8x8xf32>) outs(%[[O]] : memref<?x8xf32>)
// BUF-NEXT:    linalg.add ins(%[[O]], %[[Q]] : memref<?x8xf32>, memref<?x8xf32, strided<[24, 1]>>) outs(%[[O]] : memref<?x8xf32>)
// BUF-NEXT:    return %[[O]]
// BUF-NOT:     memref.copy

// The full pipeline: two runtime calls, the merged buffer freed, and a C
// entry point.
// CHECK:       llvm.func @linfuse_cpu_gemm_f32_f32(i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i32, i32, f32, f32) -> i32
// CHECK-LABEL: llvm.func @qk(
// CHECK:         llvm.call @malloc
// CHECK:         llvm.call @linfuse_cpu_gemm_f32_f32(
// CHECK:         llvm.call @malloc
// CHECK:         llvm.call @linfuse_cpu_gemm_f32_f32(
// CHECK:         llvm.call @free
// CHECK:       llvm.func @_mlir_ciface_qk(
// CHECK-NOT:   linfuse.gemm
// CHECK-NOT:   linalg.
func.func @qk(%x: tensor<?x8xf32>, %w: tensor<8x24xf32>, %b: tensor<24xf32>, %v: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x24xf32>) -> tensor<?x24xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x24xf32>) outs(%f : tensor<?x24xf32>) -> tensor<?x24xf32>
  %yb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<?x24xf32>, tensor<24xf32>) outs(%e : tensor<?x24xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x24xf32>
  %q = tensor.extract_slice %yb[0, 0] [%m, 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
  %k = tensor.extract_slice %yb[0, 8] [%m, 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %o = linalg.matmul ins(%k, %v : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = linalg.add ins(%o, %q : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}
