// RUN: linfuse-opt %s -split-input-file -verify-diagnostics --linfuse-reject-undefined-ops
// In-range ops pass through unchanged:
// RUN: not linfuse-opt %s -split-input-file --linfuse-reject-undefined-ops 2>/dev/null | FileCheck %s
// --linfuse-optimize and the lowering pipelines run it first: an error, not
// a crash (of upstream canonicalization on this file, or of the JIT).
// RUN: not linfuse-run %s --runtime-checks=false --entry=dim_rank --input=3x4xf32=1 2>&1 | FileCheck %s --check-prefix=JIT

func.func @dim_rank(%a: tensor<?x4xf32>) -> tensor<?xf32> {
  %c5 = arith.constant 5 : index
  // JIT: linfuse-run: error: {{.*}}reject-undefined-ops.mlir:[[@LINE+2]]:8: dimension index 5 is out of range for rank 2
  // expected-error @+1 {{dimension index 5 is out of range for rank 2 (the result would be undefined)}}
  %d = tensor.dim %a, %c5 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?xf32>
  return %e : tensor<?xf32>
}

// -----

func.func @negative_dim(%a: memref<?x4xf32>) -> index {
  %c = arith.constant -1 : index
  // expected-error @+1 {{dimension index -1 is out of range for rank 2}}
  %d = memref.dim %a, %c : memref<?x4xf32>
  return %d : index
}

// -----

func.func @extract_static(%a: tensor<?x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  // expected-error @+1 {{index 4 is out of bounds for dimension 1 of size 4 (the access would be undefined)}}
  %x = tensor.extract %a[%c0, %c4] : tensor<?x4xf32>
  return %x : f32
}

// -----

func.func @store_static(%a: memref<2xf32>, %v: f32) {
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{index 2 is out of bounds for dimension 0 of size 2}}
  memref.store %v, %a[%c2] : memref<2xf32>
  return
}

// -----

// In range, or indices known only at run time, or dynamic dimensions: kept.
// CHECK-LABEL: func.func @in_range
// CHECK:         tensor.dim %{{.*}}, %{{.*}} : tensor<?x4xf32>
// CHECK:         tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<?x4xf32>
// CHECK:         tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<?x4xf32>
func.func @in_range(%a: tensor<?x4xf32>, %i: index) -> (index, f32, f32) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c100 = arith.constant 100 : index
  %d = tensor.dim %a, %c1 : tensor<?x4xf32>
  %x = tensor.extract %a[%c100, %c3] : tensor<?x4xf32>
  %y = tensor.extract %a[%i, %i] : tensor<?x4xf32>
  return %d, %x, %y : index, f32, f32
}
