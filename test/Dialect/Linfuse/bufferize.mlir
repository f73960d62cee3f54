// RUN: linfuse-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries" -cse -canonicalize | FileCheck %s

// The GEMM writes straight into its destination: a column slice of a wider
// buffer stays a strided subview (no copy), and with beta = 0 the old
// contents of C are not read, so no copy of the init is made either.
// CHECK-LABEL: func.func @into_slice
// CHECK-SAME:    (%[[A:.*]]: memref<8x16xf32{{.*}}>, %[[B:.*]]: memref<16x4xf32{{.*}}>, %[[C:.*]]: memref<8x12xf32{{.*}}>)
// CHECK-NOT:     memref.copy
// CHECK:         %[[SUB:.*]] = memref.subview %[[C]][0, 4] [8, 4] [1, 1]
// CHECK-NOT:     memref.copy
// CHECK:         linfuse.gemm ins(%[[A]], %[[B]] : {{.*}}) outs(%[[SUB]] : memref<8x4xf32, strided<[?, ?], offset: ?>>) epilogue = <relu>{{$}}
// CHECK-NOT:     memref.copy
// CHECK:         return %[[C]]
func.func @into_slice(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %s = tensor.extract_slice %c[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
  %g = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%s : tensor<8x4xf32>) epilogue = <relu> -> tensor<8x4xf32>
  %r = tensor.insert_slice %g into %c[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x12xf32>
  return %r : tensor<8x12xf32>
}

// -----

// With beta != 0, C is read: writing into a buffer whose old value is still
// needed later forces a copy.
// CHECK-LABEL: func.func @accumulate_needs_copy
// CHECK:         %[[ALLOC:.*]] = memref.alloc
// CHECK:         memref.copy %{{.*}}, %[[ALLOC]]
// CHECK:         linfuse.gemm {{.*}} outs(%[[ALLOC]] : {{.*}}) {beta = 1.000000e+00 : f32}
func.func @accumulate_needs_copy(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %g = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>) {beta = 1.0 : f32} -> tensor<8x4xf32>
  return %g, %c : tensor<8x4xf32>, tensor<8x4xf32>
}
