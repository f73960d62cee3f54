// RUN: linfuse-opt %s -split-input-file --linfuse-concat-in-place | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-concat-in-place --eliminate-empty-tensors | FileCheck %s --check-prefix=ELIM

// A concat of two scaled weights (what a packing function builds): insert
// slices into one tensor.empty, and after empty-tensor elimination each
// scale writes its rows of the result.
// CHECK-LABEL: func.func @packed(
// CHECK-SAME:      %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<2x8xf32>
// CHECK:         %[[SA:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4x8xf32>)
// CHECK:         %[[SB:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<2x8xf32>)
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// CHECK:         %[[I0:.*]] = tensor.insert_slice %[[SA]] into %[[E]][0, 0] [4, 8] [1, 1]
// CHECK:         %[[I1:.*]] = tensor.insert_slice %[[SB]] into %[[I0]][4, 0] [2, 8] [1, 1]
// CHECK:         return %[[I1]]
// CHECK-NOT:     tensor.concat
// ELIM-LABEL: func.func @packed(
// ELIM:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// ELIM:         %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0] [4, 8] [1, 1]
// ELIM:         %[[G0:.*]] = linalg.generic {{.*}} outs(%[[S0]] : tensor<4x8xf32>)
// ELIM:         tensor.insert_slice %[[G0]] into %[[E]][0, 0] [4, 8] [1, 1]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @packed(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) -> tensor<6x8xf32> {
  %two = arith.constant 2.0 : f32
  %ea = tensor.empty() : tensor<4x8xf32>
  %sa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%ea : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %r = arith.mulf %i, %two : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %eb = tensor.empty() : tensor<2x8xf32>
  %sb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<2x8xf32>) outs(%eb : tensor<2x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %r = arith.mulf %i, %two : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %c = tensor.concat dim(0) %sa, %sb : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<6x8xf32>
  return %c : tensor<6x8xf32>
}

// -----

// Without a concat nothing changes.
// CHECK-LABEL: func.func @no_concat(
// CHECK-NEXT:    %[[R:.*]] = tensor.extract_slice
// CHECK-NEXT:    return %[[R]]
func.func @no_concat(%a: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %r = tensor.extract_slice %a[0, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
