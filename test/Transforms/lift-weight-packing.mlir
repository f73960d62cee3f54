// RUN: linfuse-opt %s -split-input-file --linfuse-lift-weight-packing | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-lift-weight-packing | %mlir-opt -split-input-file --verify-each -o /dev/null
// The whole flow on run-time weights: optimize (merge -> tensor.concat of
// weight arguments), then lift the concat into the packing function.
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --linfuse-lift-weight-packing | FileCheck %s --check-prefix=FLOW
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize=lift-weights=true | FileCheck %s --check-prefix=PIPE
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize=lift-weights=true | %mlir-opt -split-input-file --verify-each -o /dev/null

// CHECK-LABEL: func.func @qkv__pack
// CHECK-SAME:    (%[[WQ:.*]]: tensor<8x8xf32> {linfuse.weight}, %[[WK:.*]]: tensor<4x8xf32> {linfuse.weight}, %[[WO:.*]]: tensor<8x8xf32> {linfuse.weight}) -> (tensor<12x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]] : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<12x8xf32>
// CHECK-NEXT:    return %[[W]], %[[WO]] : tensor<12x8xf32>, tensor<8x8xf32>
// CHECK-LABEL: func.func @qkv
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[P0:.*]]: tensor<12x8xf32> {linfuse.packed = 0 : i64}, %[[P1:.*]]: tensor<8x8xf32> {linfuse.packed = 1 : i64}) -> (tensor<?x12xf32>, tensor<?x8xf32>)
// CHECK-SAME:    attributes {linfuse.pack_function = @qkv__pack}
// CHECK-NOT:     tensor.concat
// CHECK:         linalg.matmul {{.*}} ins(%[[X]], %[[P0]] : tensor<?x8xf32>, tensor<12x8xf32>)
// CHECK:         linalg.matmul {{.*}} ins(%{{.*}}, %[[P1]] : tensor<?x12xf32>, tensor<8x8xf32>)
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @qkv(%x: tensor<?x8xf32>, %wq: tensor<8x8xf32> {linfuse.weight}, %wk: tensor<4x8xf32> {linfuse.weight}, %wo: tensor<8x8xf32> {linfuse.weight}) -> (tensor<?x12xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %w = tensor.concat dim(0) %wq, %wk : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<12x8xf32>
  %e = tensor.empty(%m) : tensor<?x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %y = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %w : tensor<?x8xf32>, tensor<12x8xf32>) outs(%f : tensor<?x12xf32>) -> tensor<?x12xf32>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %o = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%y, %wo : tensor<?x12xf32>, tensor<8x8xf32>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y, %o : tensor<?x12xf32>, tensor<?x8xf32>
}
// FLOW-LABEL: func.func @qkv__pack
// FLOW:         tensor.concat
// FLOW-LABEL: func.func @qkv(
// FLOW-NOT:     tensor.concat
// FLOW:         return

// -----

// A transpose of a weight and a scaled weight (with constants and a
// tensor.empty they read) are lifted; copies of the constant and the empty go
// into the packing function, the originals stay for the other users.
// CHECK-LABEL: func.func @transpose_and_scale__pack
// CHECK-SAME:    (%[[W:.*]]: tensor<4x8xf32> {linfuse.weight}) -> (tensor<8x4xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x4xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<4x8xf32>) outs(%[[E]] : tensor<8x4xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<4x8xf32>) outs(%[[E2]] : tensor<4x8xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[TWO]]
// CHECK:         return %[[T]], %[[S]]
// CHECK-LABEL: func.func @transpose_and_scale
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[T:.*]]: tensor<8x4xf32> {linfuse.packed = 0 : i64}, %[[S:.*]]: tensor<4x8xf32> {linfuse.packed = 1 : i64})
// CHECK-NEXT:    %[[TWO2:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[E3:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK-NEXT:    %[[XS:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>) outs(%[[E3]] : tensor<2x4xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[TWO2]]
// CHECK:         return %[[T]], %[[S]], %[[XS]]
func.func @transpose_and_scale(%x: tensor<2x4xf32>, %w: tensor<4x8xf32> {linfuse.weight}) -> (tensor<8x4xf32>, tensor<4x8xf32>, tensor<2x4xf32>) {
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %two : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  // Reads the activation: stays.
  %e3 = tensor.empty() : tensor<2x4xf32>
  %xs = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x4xf32>) outs(%e3 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %two : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  return %t, %s, %xs : tensor<8x4xf32>, tensor<4x8xf32>, tensor<2x4xf32>
}

// -----

// Negative: no linfuse.weight arguments.
// CHECK-LABEL: func.func @no_weights
// CHECK-SAME:    (%{{.*}}: tensor<8x8xf32>, %{{.*}}: tensor<4x8xf32>)
// CHECK-NEXT:    tensor.concat
// CHECK-NOT:     func.func @no_weights__pack
func.func @no_weights(%a: tensor<8x8xf32>, %b: tensor<4x8xf32>) -> tensor<12x8xf32> {
  %w = tensor.concat dim(0) %a, %b : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<12x8xf32>
  return %w : tensor<12x8xf32>
}

// -----

// Negative: weights only read directly, nothing to pack; and weight work
// inside a loop body (runs per iteration by definition) stays there.
// CHECK-LABEL: func.func @nothing_to_lift
// CHECK-SAME:    (%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32> {linfuse.weight})
// CHECK-NOT:     linfuse.pack_function
// CHECK:         scf.for
// CHECK:           tensor.concat
// CHECK-NOT:   func.func @nothing_to_lift__pack
func.func @nothing_to_lift(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {linfuse.weight}) -> tensor<2x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %x) -> tensor<2x4xf32> {
    %ww = tensor.concat dim(0) %w : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = linalg.matmul ins(%acc, %ww : tensor<2x4xf32>, tensor<4x4xf32>) outs(%acc : tensor<2x4xf32>) -> tensor<2x4xf32>
    scf.yield %y : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// The whole flow with `--linfuse-optimize=lift-weights=true` on run-time
// weights: the K projection's chain k·A·B is pre-multiplied (as IR, in f64),
// Q and K merge into one GEMM over a concat, and all of that weight work
// ends up in @block__pack; @block keeps the norm gamma's multiply (a scale
// is not folded into weight arguments by default: that would copy them),
// one matmul on the packed weight, and zero-copy slices. The gamma is a
// packed result that is the weight itself.
// PIPE-LABEL: func.func @block__pack
// PIPE-SAME:    (%[[G:.*]]: tensor<8xf32> {linfuse.weight}, %[[WQ:.*]]: tensor<8x8xf32> {linfuse.weight}, %{{.*}}: tensor<8x8xf32> {linfuse.weight}, %{{.*}}: tensor<8x8xf32> {linfuse.weight}, %{{.*}}: tensor<8x8xf32> {linfuse.weight}) -> (tensor<8x16xf32>, tensor<8xf32>)
// PIPE-COUNT-2: linalg.matmul {{.*}} tensor<8x8xf64>
// PIPE:         %[[CAT:.*]] = tensor.concat dim(1) %[[WQ]], %{{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
// PIPE-NEXT:    return %[[CAT]], %[[G]] : tensor<8x16xf32>, tensor<8xf32>
// PIPE-LABEL: func.func @block
// PIPE-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[P:.*]]: tensor<8x16xf32> {linfuse.packed = 0 : i64}, %[[PG:.*]]: tensor<8xf32> {linfuse.packed = 1 : i64}) -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {linfuse.pack_function = @block__pack}
// PIPE:         %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[PG]] : tensor<?x8xf32>, tensor<8xf32>)
// PIPE:         %[[R:.*]] = linalg.matmul ins(%[[Y]], %[[P]] : tensor<?x8xf32>, tensor<8x16xf32>)
// PIPE-NOT:     linalg.matmul
// PIPE:         %[[Q:.*]] = tensor.extract_slice %[[R]][0, 0] [%{{.*}}, 8] [1, 1]
// PIPE:         %[[K:.*]] = tensor.extract_slice %[[R]][0, 8] [%{{.*}}, 8] [1, 1]
// PIPE:         return %[[Q]], %[[K]]
func.func @block(%x: tensor<?x8xf32>, %gamma: tensor<8xf32> {linfuse.weight}, %wq: tensor<8x8xf32> {linfuse.weight}, %wk: tensor<8x8xf32> {linfuse.weight}, %a: tensor<8x8xf32> {linfuse.weight}, %b: tensor<8x8xf32> {linfuse.weight}) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %gamma : tensor<?x8xf32>, tensor<8xf32>) outs(%e : tensor<?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %q = linalg.matmul ins(%y, %wq : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %k = linalg.matmul ins(%y, %wk : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %ka = linalg.matmul ins(%k, %a : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %kab = linalg.matmul ins(%ka, %b : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %q, %kab : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// A weight with a dynamic dimension: its size is not packed as an `index`
// (linfuse-run refused "packed weight 0 has type index"), it is read in @f
// from the packed tensor's descriptor.
// CHECK-LABEL: func.func @dyn_weight__pack
// CHECK-SAME:    (%[[W:.*]]: tensor<32x?xf32> {linfuse.weight}) -> tensor<32x?xf32>
// CHECK:         return %[[W]] : tensor<32x?xf32>
// CHECK-LABEL: func.func @dyn_weight
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xf32>, %[[P:.*]]: tensor<32x?xf32> {linfuse.packed = 0 : i64})
// CHECK:         %[[N:.*]] = tensor.dim %[[P]], %{{.*}} : tensor<32x?xf32>
// CHECK:         tensor.empty(%{{.*}}, %[[N]]) : tensor<?x?xf32>
// CHECK:         linalg.matmul ins(%[[X]], %[[P]] : tensor<?x32xf32>, tensor<32x?xf32>)
func.func @dyn_weight(%x: tensor<?x32xf32>, %w: tensor<32x?xf32> {linfuse.weight}) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %n = tensor.dim %w, %c1 : tensor<32x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x32xf32>, tensor<32x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// The same with a transpose lifted into the packing function. The size is
// the weight's own: the weight is packed too (returned as it is, no copy)
// and the size read from it.
// CHECK-LABEL: func.func @dyn_weight_transposed__pack
// CHECK-SAME:    (%[[W:.*]]: tensor<?x32xf32> {linfuse.weight})
// CHECK:         %[[T:.*]] = linalg.transpose
// CHECK:         return %[[T]], %[[W]] : tensor<32x?xf32>, tensor<?x32xf32>
// CHECK-LABEL: func.func @dyn_weight_transposed
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xf32>, %[[P:.*]]: tensor<32x?xf32> {linfuse.packed = 0 : i64}, %[[S:.*]]: tensor<?x32xf32> {linfuse.packed = 1 : i64})
// CHECK:         %[[N:.*]] = tensor.dim %[[S]], %{{.*}} : tensor<?x32xf32>
// CHECK:         tensor.empty(%{{.*}}, %[[N]]) : tensor<?x?xf32>
// CHECK:         linalg.matmul ins(%[[X]], %[[P]] : tensor<?x32xf32>, tensor<32x?xf32>)
func.func @dyn_weight_transposed(%x: tensor<?x32xf32>, %w: tensor<?x32xf32> {linfuse.weight}) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %n = tensor.dim %w, %c0 : tensor<?x32xf32>
  %et = tensor.empty(%n) : tensor<32x?xf32>
  %t = linalg.transpose ins(%w : tensor<?x32xf32>) outs(%et : tensor<32x?xf32>) permutation = [1, 0]
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%x, %t : tensor<?x32xf32>, tensor<32x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// A norm scale folded into a weight (as --linfuse-fold-matmul-chains leaves
// it: widen, transpose, scale, transpose back, narrow) becomes one loop per
// packed weight in the packing function: read W once, write once, no f64
// temporaries. A product of two weights (a folded LoRA) stays a matmul for
// the GEMM library.
// CHECK-LABEL: func.func @scaled_weight__pack
// CHECK-SAME:    (%[[G:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<8x4xf32> {linfuse.weight}, %[[A:.*]]: tensor<8x2xf32> {linfuse.weight}, %[[B:.*]]: tensor<2x4xf32> {linfuse.weight})
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[W]], %{{.*}} : tensor<8x4xf32>, tensor<1x4xf32>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK-NEXT:    ^bb0(%[[IW:.*]]: f32, %[[IG:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[EW:.*]] = arith.extf %[[IW]] : f32 to f64
// CHECK-NEXT:      %[[EG:.*]] = arith.extf %[[IG]] : f32 to f64
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[EW]], %[[EG]] : f64
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[P]] : f64 to f32
// CHECK-NEXT:      linalg.yield %[[T]] : f32
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[AB:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<8x2xf32>, tensor<2x4xf32>)
// CHECK:         return %[[S]], %[[AB]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (0, d1)>
func.func @scaled_weight(%x: tensor<?x8xf32>, %g: tensor<4xf32> {linfuse.weight}, %w: tensor<8x4xf32> {linfuse.weight},
                         %a: tensor<8x2xf32> {linfuse.weight}, %b: tensor<2x4xf32> {linfuse.weight}) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e84d = tensor.empty() : tensor<8x4xf64>
  %wd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x4xf32>) outs(%e84d : tensor<8x4xf64>) {
  ^bb0(%i: f32, %o: f64):
    %r = arith.extf %i : f32 to f64
    linalg.yield %r : f64
  } -> tensor<8x4xf64>
  %e48d = tensor.empty() : tensor<4x8xf64>
  %wt = linalg.transpose ins(%wd : tensor<8x4xf64>) outs(%e48d : tensor<4x8xf64>) permutation = [1, 0]
  %g2 = tensor.expand_shape %g [[0, 1]] output_shape [1, 4] : tensor<4xf32> into tensor<1x4xf32>
  %e14d = tensor.empty() : tensor<1x4xf64>
  %gd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%g2 : tensor<1x4xf32>) outs(%e14d : tensor<1x4xf64>) {
  ^bb0(%i: f32, %o: f64):
    %r = arith.extf %i : f32 to f64
    linalg.yield %r : f64
  } -> tensor<1x4xf64>
  %st = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (0, d0)>, #id], iterator_types = ["parallel", "parallel"]} ins(%wt, %gd : tensor<4x8xf64>, tensor<1x4xf64>) outs(%e48d : tensor<4x8xf64>) {
  ^bb0(%i: f64, %s: f64, %o: f64):
    %r = arith.mulf %i, %s : f64
    linalg.yield %r : f64
  } -> tensor<4x8xf64>
  %sd = linalg.transpose ins(%st : tensor<4x8xf64>) outs(%e84d : tensor<8x4xf64>) permutation = [1, 0]
  %e84 = tensor.empty() : tensor<8x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sd : tensor<8x4xf64>) outs(%e84 : tensor<8x4xf32>) {
  ^bb0(%i: f64, %o: f32):
    %r = arith.truncf %i : f64 to f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = linalg.matmul ins(%x, %s : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %ab = linalg.matmul ins(%a, %b : tensor<8x2xf32>, tensor<2x4xf32>) outs(%e84 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %z = linalg.matmul ins(%x, %ab : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// A packed value that widens narrower weights (torch-mlir's bf16 biases,
// cast to f32 and concatenated by a merge) says so on @f's argument:
// `linfuse.exact_in = bf16`, so that a GEMM writing bf16 can read it back
// in bf16 exactly. A packed value computed otherwise carries no such claim.
#id1 = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @widened_biases(
// CHECK-SAME:    %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<6xf32> {linfuse.exact_in = bf16, linfuse.packed = 0 : i64}, %{{.*}}: tensor<2xf32> {linfuse.packed = 1 : i64})
func.func @widened_biases(%x: tensor<4xf32>, %b0: tensor<4xbf16> {linfuse.weight}, %b1: tensor<2xbf16> {linfuse.weight}, %s: tensor<2xf32> {linfuse.weight}) -> (tensor<6xf32>, tensor<2xf32>) {
  %e0 = tensor.empty() : tensor<4xf32>
  %w0 = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b0 : tensor<4xbf16>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<2xf32>
  %w1 = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b1 : tensor<2xbf16>) outs(%e1 : tensor<2xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2xf32>
  %c = tensor.concat dim(0) %w0, %w1 : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
  %d = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%w1, %s : tensor<2xf32>, tensor<2xf32>) outs(%e1 : tensor<2xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<2xf32>
  return %c, %d : tensor<6xf32>, tensor<2xf32>
}
