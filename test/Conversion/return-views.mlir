// RUN: linfuse-opt %s --linfuse-return-views --split-input-file | FileCheck %s

// The three slices of a merged GEMM are returned in place: their copies and
// allocations go, the merged buffer's dealloc goes (the caller owns it
// through the views), and the result types become the slices' strided types.
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME:      -> (memref<?x64xf32, strided<[128, 1]>>, memref<?x32xf32, strided<[128, 1], offset: 64>>, memref<?x32xf32, strided<[128, 1], offset: 96>>)
// CHECK:         %[[M:.*]] = memref.alloc(%{{.*}}) : memref<?x128xf32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[M]] : memref<?x128xf32>)
// CHECK-NEXT:    %[[Q:.*]] = memref.subview %[[M]][0, 0] [%{{.*}}, 64] [1, 1]
// CHECK-NEXT:    %[[K:.*]] = memref.subview %[[M]][0, 64] [%{{.*}}, 32] [1, 1]
// CHECK-NEXT:    %[[V:.*]] = memref.subview %[[M]][0, 96] [%{{.*}}, 32] [1, 1]
// CHECK-NEXT:    return %[[Q]], %[[K]], %[[V]] :
func.func @qkv(%x: memref<?x64xf32>) -> (memref<?x64xf32>, memref<?x32xf32>, memref<?x32xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %m = memref.dim %x, %c0 : memref<?x64xf32>
  %merged = memref.alloc(%m) : memref<?x128xf32>
  linalg.fill ins(%one : f32) outs(%merged : memref<?x128xf32>)
  %q = memref.subview %merged[0, 0] [%m, 64] [1, 1] : memref<?x128xf32> to memref<?x64xf32, strided<[128, 1]>>
  %k = memref.subview %merged[0, 64] [%m, 32] [1, 1] : memref<?x128xf32> to memref<?x32xf32, strided<[128, 1], offset: 64>>
  %v = memref.subview %merged[0, 96] [%m, 32] [1, 1] : memref<?x128xf32> to memref<?x32xf32, strided<[128, 1], offset: 96>>
  %rq = memref.alloc(%m) : memref<?x64xf32>
  memref.copy %q, %rq : memref<?x64xf32, strided<[128, 1]>> to memref<?x64xf32>
  %rk = memref.alloc(%m) : memref<?x32xf32>
  memref.copy %k, %rk : memref<?x32xf32, strided<[128, 1], offset: 64>> to memref<?x32xf32>
  %rv = memref.alloc(%m) : memref<?x32xf32>
  memref.copy %v, %rv : memref<?x32xf32, strided<[128, 1], offset: 96>> to memref<?x32xf32>
  memref.dealloc %merged : memref<?x128xf32>
  return %rq, %rk, %rv : memref<?x64xf32>, memref<?x32xf32>, memref<?x32xf32>
}

// -----

// Left alone: a copy of an argument's slice (the caller's memory); a base
// written after the copy (through a reshape of it); a result copied into
// and then also written; a weight-packing function; a function called in
// the module.
// CHECK-LABEL: func.func @argument_slice(
// CHECK-SAME:      -> memref<4xf32>
// CHECK:         memref.copy
// CHECK-LABEL: func.func @written_after(
// CHECK-SAME:      -> memref<4xf32>
// CHECK:         memref.copy
// CHECK:         linalg.fill
// CHECK:         memref.dealloc
// CHECK-LABEL: func.func @result_written(
// CHECK-SAME:      -> memref<4xf32>
// CHECK:         memref.copy
// CHECK:         linalg.fill
// CHECK-LABEL: func.func @f__pack(
// CHECK-SAME:      -> memref<4xf32>
// CHECK:         memref.copy
// CHECK-LABEL: func.func @callee(
// CHECK-SAME:      -> memref<4xf32>
// CHECK:         memref.copy
func.func @argument_slice(%a: memref<8xf32>) -> memref<4xf32> {
  %s = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %s, %r : memref<4xf32, strided<[1]>> to memref<4xf32>
  return %r : memref<4xf32>
}

func.func @written_after() -> memref<4xf32> {
  %zero = arith.constant 0.0 : f32
  %b = memref.alloc() : memref<2x4xf32>
  %s = memref.subview %b[0, 0] [1, 4] [1, 1] : memref<2x4xf32> to memref<4xf32, strided<[1]>>
  %flat = memref.collapse_shape %b [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %s, %r : memref<4xf32, strided<[1]>> to memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%flat : memref<8xf32>)
  memref.dealloc %b : memref<2x4xf32>
  return %r : memref<4xf32>
}

func.func @result_written() -> memref<4xf32> {
  %zero = arith.constant 0.0 : f32
  %b = memref.alloc() : memref<8xf32>
  %s = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %s, %r : memref<4xf32, strided<[1]>> to memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<4xf32>)
  memref.dealloc %b : memref<8xf32>
  return %r : memref<4xf32>
}

func.func @f(%x: memref<4xf32>) -> memref<4xf32> attributes {linfuse.pack_function = @f__pack} {
  return %x : memref<4xf32>
}

func.func @f__pack() -> memref<4xf32> {
  %b = memref.alloc() : memref<8xf32>
  %s = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %s, %r : memref<4xf32, strided<[1]>> to memref<4xf32>
  memref.dealloc %b : memref<8xf32>
  return %r : memref<4xf32>
}

func.func @callee() -> memref<4xf32> {
  %b = memref.alloc() : memref<8xf32>
  %s = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %s, %r : memref<4xf32, strided<[1]>> to memref<4xf32>
  memref.dealloc %b : memref<8xf32>
  return %r : memref<4xf32>
}

func.func @caller() -> memref<4xf32> {
  %r = call @callee() : () -> memref<4xf32>
  return %r : memref<4xf32>
}

// -----

// A packing function returns a weight @g reads unchanged as the weight
// itself, not as a copy (the caller holds it). A copy that is written
// afterwards (not the weight any more) stays.
// CHECK-LABEL: func.func @g__pack(
// CHECK-SAME:      %[[W:.*]]: memref<4xf32>, %[[V:.*]]: memref<4xf32>
// CHECK-NOT:     memref.copy %[[W]]
// CHECK:         %[[R:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[V]], %[[R]]
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[R]] : memref<4xf32>)
// CHECK-NEXT:    return %[[W]], %[[R]] : memref<4xf32>, memref<4xf32>
func.func @g(%x: memref<4xf32>, %p: memref<4xf32>, %q: memref<4xf32>) -> memref<4xf32> attributes {linfuse.pack_function = @g__pack} {
  return %x : memref<4xf32>
}

func.func @g__pack(%w: memref<4xf32>, %v: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4xf32>
  memref.copy %w, %a : memref<4xf32> to memref<4xf32>
  %r = memref.alloc() : memref<4xf32>
  memref.copy %v, %r : memref<4xf32> to memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<4xf32>)
  return %a, %r : memref<4xf32>, memref<4xf32>
}
