// RUN: linfuse-opt %s --linfuse-fuse-elementwise --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// SwiGLU after a merged gate/up GEMM: SiLU (one user) goes into the multiply;
// one loop nest, no intermediate tensor.
// CHECK-LABEL: func.func @swiglu(
// CHECK-SAME:      %[[G:.*]]: tensor<?x64xf32>, %[[U:.*]]: tensor<?x64xf32>)
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[G]], %[[U]] : tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK-NEXT:    ^bb0(%[[IG:.*]]: f32, %[[IU:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[IG]]
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[N]]
// CHECK-NEXT:      %[[D:.*]] = arith.addf %[[E]], %{{.*}}
// CHECK-NEXT:      %[[S:.*]] = arith.divf %[[IG]], %[[D]]
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[S]], %[[IU]]
// CHECK-NEXT:      linalg.yield %[[P]] : f32
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @swiglu(%g: tensor<?x64xf32>, %u: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %m = tensor.dim %g, %c0 : tensor<?x64xf32>
  %e0 = tensor.empty(%m) : tensor<?x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<?x64xf32>) outs(%e0 : tensor<?x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    %e = math.exp %n : f32
    %d = arith.addf %e, %one : f32
    %r = arith.divf %in, %d : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%m) : tensor<?x64xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s, %u : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e1 : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  return %p : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// RMSNorm's square goes into the sum that reduces it.
// CHECK-LABEL: func.func @square_into_sum(
// CHECK-SAME:      %[[X:.*]]: tensor<?x64xf32>
// CHECK:         %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME:        ins(%[[X]] : tensor<?x64xf32>)
// CHECK-NEXT:    ^bb0(%[[I:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[I]], %[[I]]
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[SQ]], %[[O]]
// CHECK-NEXT:      linalg.yield %[[S]]
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @square_into_sum(%x: tensor<?x64xf32>, %acc: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<?x64xf32>) outs(%acc : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  return %sum : tensor<?xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Negative: a producer with two users stays (fusing would compute it twice),
// and so do both consumers.
// CHECK-LABEL: func.func @shared_producer(
// CHECK:         %[[T:.*]] = linalg.generic
// CHECK:           math.tanh
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} ins(%[[T]]
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[T]]
// CHECK:         return %[[A]], %[[B]]
func.func @shared_producer(%x: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %e = tensor.empty() : tensor<8x64xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.tanh %in : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<8x64xf32>
  return %a, %b : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Negative: a matmul is no element-wise producer or consumer; the bias-add
// after it stays a separate op (linfuse-raise-to-gemm's to take).
// CHECK-LABEL: func.func @matmul_consumer(
// CHECK:         %[[MM:.*]] = linalg.matmul
// CHECK:         %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[MM]]
// CHECK:         return %[[ADD]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @matmul_consumer(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %y: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %add = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %y : tensor<8x32xf32>, tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  return %add : tensor<8x32xf32>
}
