// RUN: linfuse-opt %s --linfuse-cuda-graph --split-input-file -verify-diagnostics | FileCheck %s

// Each public function with a body gets a slot (a private global) and a key
// of its arguments: a memref's aligned address, offset, sizes and strides,
// a scalar's bits zero-extended to i64. begin at entry, end before every
// return. The packing function (named by linfuse.pack_function), private
// functions and declarations are left alone.
// CHECK-DAG:   func.func private @linfuse_cuda_function_begin(index, index, index) -> i32
// CHECK-DAG:   func.func private @linfuse_cuda_function_end(index) -> i32
// CHECK-DAG:   memref.global "private" @__linfuse_graph_slot_f : memref<1xi64> = dense<0>
// CHECK-NOT:   @__linfuse_graph_slot_f__pack
// CHECK-NOT:   @__linfuse_graph_slot_helper
// CHECK-LABEL: func.func @f(
// CHECK-SAME:      %[[X:.*]]: memref<?x4xf32>, %[[S:.*]]: f32, %[[N:.*]]: index, %[[B:.*]]: i1, %[[P:.*]]: memref<8xf32>)
// CHECK:         %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK-NEXT:    %[[W0:.*]] = arith.index_cast %[[XP]] : index to i64
// CHECK-NEXT:    %{{.*}}, %[[XO:.*]], %[[XS:.*]]:2, %[[XT:.*]]:2 = memref.extract_strided_metadata %[[X]]
// CHECK-NEXT:    %[[W1:.*]] = arith.index_cast %[[XO]] : index to i64
// CHECK-NEXT:    %[[W2:.*]] = arith.index_cast %[[XS]]#0 : index to i64
// CHECK-NEXT:    %[[W3:.*]] = arith.index_cast %[[XS]]#1 : index to i64
// CHECK-NEXT:    %[[W4:.*]] = arith.index_cast %[[XT]]#0 : index to i64
// CHECK-NEXT:    %[[W5:.*]] = arith.index_cast %[[XT]]#1 : index to i64
// CHECK-NEXT:    %[[SB:.*]] = arith.bitcast %[[S]] : f32 to i32
// CHECK-NEXT:    %[[W6:.*]] = arith.extui %[[SB]] : i32 to i64
// CHECK-NEXT:    %[[W7:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK-NEXT:    %[[W8:.*]] = arith.extui %[[B]] : i1 to i64
// CHECK-NEXT:    %[[PP:.*]] = memref.extract_aligned_pointer_as_index %[[P]]
// CHECK-NEXT:    arith.index_cast %[[PP]] : index to i64
// CHECK-NEXT:    memref.extract_strided_metadata %[[P]]
// CHECK-NEXT:    arith.index_cast
// CHECK-NEXT:    arith.index_cast
// CHECK-NEXT:    %[[W12:.*]] = arith.index_cast
// CHECK-NEXT:    %[[KEY:.*]] = memref.alloca() : memref<13xi64>
// CHECK:         memref.store %[[W0]], %[[KEY]][%{{.*}}] : memref<13xi64>
// CHECK:         memref.store %[[W6]], %[[KEY]]
// CHECK:         memref.store %[[W12]], %[[KEY]]
// CHECK-NEXT:    %[[SLOT:.*]] = memref.get_global @__linfuse_graph_slot_f : memref<1xi64>
// CHECK-NEXT:    %[[SA:.*]] = memref.extract_aligned_pointer_as_index %[[SLOT]]
// CHECK-NEXT:    %[[KA:.*]] = memref.extract_aligned_pointer_as_index %[[KEY]]
// CHECK-NEXT:    %[[LEN:.*]] = arith.constant 13 : index
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_function_begin(%[[SA]], %[[KA]], %[[LEN]]) : (index, index, index) -> i32
// CHECK:         cf.cond_br
// CHECK:       ^bb1:
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_function_end(%[[SA]]) : (index) -> i32
// CHECK-NEXT:    return
// CHECK:       ^bb2:
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_function_end(%[[SA]]) : (index) -> i32
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @f__pack(
// CHECK-NOT:     linfuse_cuda_function
// CHECK:         return
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT:     linfuse_cuda_function
// CHECK:         return

func.func @f(%x: memref<?x4xf32>, %s: f32, %n: index, %b: i1, %p: memref<8xf32>) -> memref<?x4xf32> attributes {linfuse.pack_function = @f__pack} {
  cf.cond_br %b, ^bb1, ^bb2
^bb1:
  return %x : memref<?x4xf32>
^bb2:
  return %x : memref<?x4xf32>
}

func.func @f__pack(%w: memref<8xf32>) -> memref<8xf32> {
  return %w : memref<8xf32>
}

func.func private @helper(%x: memref<4xf32>) -> memref<4xf32> {
  return %x : memref<4xf32>
}

func.func private @external(%x: memref<4xf32>)

// -----

// A function without arguments has an empty key.
// CHECK-LABEL: func.func @constant_result
// CHECK:         %[[KEY:.*]] = memref.alloca() : memref<0xi64>
// CHECK:         call @linfuse_cuda_function_begin(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK:         call @linfuse_cuda_function_end
func.func @constant_result() -> f32 {
  %c = arith.constant 1.0 : f32
  return %c : f32
}

// -----

// What cannot be read into a key is an error at the function.
// expected-error @+1 {{linfuse-cuda-graph: argument #1 of type 'memref<*xf32>' cannot be part of a CUDA graph's key}}
func.func @unranked(%x: memref<4xf32>, %u: memref<*xf32>) {
  return
}

// -----

// expected-error @+1 {{linfuse-cuda-graph: argument #0 of type 'i128' cannot be part of a CUDA graph's key}}
func.func @wide(%x: i128) {
  return
}

// -----

// expected-error @+1 {{linfuse-cuda-graph: the module declares linfuse_cuda_function_begin or linfuse_cuda_function_end with another type}}
module {
  // expected-error @+1 {{matched function 'linfuse_cuda_function_begin' but with different type}}
  func.func private @linfuse_cuda_function_begin(i64) -> i32
  func.func @f(%x: memref<4xf32>) {
    return
  }
}
