// RUN: linfuse-opt %s --linfuse-reassociate-reductions --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A row sum (a norm's mean): its combiner may be reassociated; the square
// before it keeps its flags.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK:         ^bb0(%[[I:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[I]], %[[I]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[SQ]], %[[O]] fastmath<reassoc> : f32
// CHECK-NEXT:      linalg.yield %[[S]]
func.func @sum_of_squares(%x: tensor<?x64xf32>, %acc: tensor<?xf32>) -> tensor<?xf32> {
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x64xf32>) outs(%acc : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %r = arith.addf %sq, %out : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  return %sum : tensor<?xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Flags already there are kept; products too.
// CHECK-LABEL: func.func @product(
// CHECK:         arith.mulf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
func.func @product(%x: tensor<4x64xf32>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %p = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %out fastmath<contract> : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %p : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Negative: element-wise ops (no reduction iterator), a max reduction and an
// integer sum are left as they are.
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT:     fastmath
// CHECK:         return
func.func @untouched(%x: tensor<4x64xf32>, %i: tensor<4x64xi32>, %e: tensor<4x64xf32>,
                     %m: tensor<4xf32>, %s: tensor<4xi32>) -> (tensor<4x64xf32>, tensor<4xf32>, tensor<4xi32>) {
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x64xf32>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>
  %b = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf32>) outs(%m : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %c = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%i : tensor<4x64xi32>) outs(%s : tensor<4xi32>) {
  ^bb0(%in: i32, %out: i32):
    %r = arith.addi %in, %out : i32
    linalg.yield %r : i32
  } -> tensor<4xi32>
  return %a, %b, %c : tensor<4x64xf32>, tensor<4xf32>, tensor<4xi32>
}
