// RUN: linfuse-opt %s -split-input-file --linfuse-dynamic-expand-shape | FileCheck %s
// The crash it avoids (llvm/llvm-project#186830): the rows of a GEMM
// restored to [batch, seq, N] with both dynamic now lower and run.
// RUN: linfuse-opt %s -split-input-file --linfuse-lower-to-cpu -o /dev/null
// RUN: linfuse-run %s --entry=rows_to_batch_seq --input=6x2xf32=1.5 --input=2x3xf32=0 2>&1 | FileCheck %s --check-prefix=EXEC

// Two dynamic sizes in one group: a tensor.reshape to the same shape.
// CHECK-LABEL: func.func @rows_to_batch_seq
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>, %[[LIKE:.*]]: tensor<?x?xf32>)
// CHECK:         %[[B:.*]] = tensor.dim %[[LIKE]], %{{.*}}
// CHECK-NEXT:    %[[S:.*]] = tensor.dim %[[LIKE]], %{{.*}}
// CHECK-NEXT:    %[[SHAPE:.*]] = tensor.from_elements %[[B]], %[[S]], %{{.*}} : tensor<3xindex>
// CHECK-NEXT:    %[[R:.*]] = tensor.reshape %[[X]](%[[SHAPE]]) : (tensor<?x2xf32>, tensor<3xindex>) -> tensor<?x?x2xf32>
// CHECK-NEXT:    return %[[R]]
// EXEC: 2x3x2xf32={{\[\[\[}}1.5 1.5][1.5 1.5][1.5 1.5]]{{\[\[}}1.5 1.5][1.5 1.5][1.5 1.5]]]
func.func @rows_to_batch_seq(%x: tensor<?x2xf32>, %like: tensor<?x?xf32>) -> tensor<?x?x2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %like, %c0 : tensor<?x?xf32>
  %s = tensor.dim %like, %c1 : tensor<?x?xf32>
  %r = tensor.expand_shape %x [[0, 1], [2]] output_shape [%b, %s, 2] : tensor<?x2xf32> into tensor<?x?x2xf32>
  return %r : tensor<?x?x2xf32>
}

// -----

// One dynamic size per group (a dynamic batch only): left alone, it stays
// a view.
// CHECK-LABEL: func.func @one_dynamic_per_group
// CHECK-NEXT:    tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [%{{.*}}, 5, 2] : tensor<?x2xf32> into tensor<?x5x2xf32>
// CHECK-NOT:     tensor.reshape
func.func @one_dynamic_per_group(%x: tensor<?x2xf32>, %b: index) -> tensor<?x5x2xf32> {
  %r = tensor.expand_shape %x [[0, 1], [2]] output_shape [%b, 5, 2] : tensor<?x2xf32> into tensor<?x5x2xf32>
  return %r : tensor<?x5x2xf32>
}

// -----

// Dynamic sizes in different groups: left alone too.
// CHECK-LABEL: func.func @dynamic_in_two_groups
// CHECK-NEXT:    tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [%{{.*}}, 4, %{{.*}}, 2] : tensor<?x?xf32> into tensor<?x4x?x2xf32>
// CHECK-NOT:     tensor.reshape
func.func @dynamic_in_two_groups(%x: tensor<?x?xf32>, %b: index, %h: index) -> tensor<?x4x?x2xf32> {
  %r = tensor.expand_shape %x [[0, 1], [2, 3]] output_shape [%b, 4, %h, 2] : tensor<?x?xf32> into tensor<?x4x?x2xf32>
  return %r : tensor<?x4x?x2xf32>
}
