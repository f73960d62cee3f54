// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains="policy=always" | FileCheck %s --check-prefix=ALWAYS
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains | %mlir-opt -split-input-file --verify-each -o /dev/null

// LayerNorm's affine part, `(x * g + v)·W + c`, feeding two constant
// linears (one with a bias, one [N, K] without): the shift goes into the
// biases, v·W + c = [1·1 - 1·3 + 0.5, 1·2 - 1·4 + 0.5] = [-1.5, -1.5] and
// v·W1ᵀ = [0]; the scale then goes into the weights' rows. Both matmuls read
// the normalized x.
// CHECK-LABEL: func.func @layer_norm_affine
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[W0:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 4.000000e+00], [3.000000e+01, 4.000000e+01]]> : tensor<2x2xf32>
// CHECK-DAG:     %[[W1:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 1.000000e+01]]> : tensor<1x2xf32>
// CHECK-DAG:     %[[C0:.*]] = arith.constant dense<-1.500000e+00> : tensor<2xf32>
// CHECK-DAG:     %[[C1:.*]] = arith.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK-NOT:     arith.mulf
// CHECK:         %[[Y0:.*]] = linalg.matmul ins(%[[X]], %[[W0]] : tensor<?x2xf32>, tensor<2x2xf32>)
// CHECK:         %[[B0:.*]] = linalg.generic {{.*}} ins(%[[Y0]], %[[C0]] : tensor<?x2xf32>, tensor<2xf32>)
// CHECK:         %[[Y1:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W1]] : tensor<?x2xf32>, tensor<1x2xf32>)
// CHECK:         %[[B1:.*]] = linalg.generic {{.*}} ins(%[[Y1]], %[[C1]] : tensor<?x1xf32>, tensor<1xf32>)
// CHECK:         return %[[B0]], %[[B1]]
// REMARK-COUNT-2: remark: folded an input shift into the bias
// REMARK-COUNT-2: remark: folded an input scale into the weight
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @layer_norm_affine(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %g = arith.constant dense<[2.0, 10.0]> : tensor<2xf32>
  %v = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %xs = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<?x2xf32>, tensor<2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %xv = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%xs, %v : tensor<?x2xf32>, tensor<2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %w0 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %c = arith.constant dense<0.5> : tensor<2xf32>
  %w1 = arith.constant dense<[[1.0, 1.0]]> : tensor<1x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y0 = linalg.matmul ins(%xv, %w0 : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %b0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y0, %c : tensor<?x2xf32>, tensor<2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %e1 = tensor.empty(%m) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %y1 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xv, %w1 : tensor<?x2xf32>, tensor<1x2xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  return %b0, %y1 : tensor<?x2xf32>, tensor<?x1xf32>
}

// -----

// The shift as a named `linalg.add` of a broadcast `linfuse.weight` vector,
// in front of a `linfuse.weight` linear with a bias: v·W + c is emitted as
// load-time IR (f64), rounded once, and replaces the bias.
// CHECK-LABEL: func.func @weight_args_shift
// CHECK-SAME:    (%[[X:.*]]: tensor<3x4xf32>, %[[V:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<4x6xf32> {linfuse.weight}, %[[C:.*]]: tensor<6xf32> {linfuse.weight})
// CHECK:         %[[VW:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<1x4xf64>, tensor<4x6xf64>)
// CHECK:         %[[C32:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x6xf32>)
// CHECK:           arith.truncf %{{.*}} : f64 to f32
// CHECK:         %[[C2:.*]] = tensor.collapse_shape %[[C32]] {{\[\[}}0, 1]] : tensor<1x6xf32> into tensor<6xf32>
// CHECK:         %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<3x4xf32>, tensor<4x6xf32>)
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[C2]] : tensor<3x6xf32>, tensor<6xf32>)
// CHECK-NOT:     linalg.add
// CHECK:         return %[[R]]
// REMARK: fold-input-shift.mlir:[[@LINE+8]]:{{.*}} remark: folded an input shift into the bias
func.func @weight_args_shift(%x: tensor<3x4xf32>, %v: tensor<4xf32> {linfuse.weight}, %w: tensor<4x6xf32> {linfuse.weight}, %c: tensor<6xf32> {linfuse.weight}) -> tensor<3x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %vb = linalg.broadcast ins(%v : tensor<4xf32>) outs(%e : tensor<3x4xf32>) dimensions = [0]
  %xv = linalg.add ins(%x, %vb : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %e6 = tensor.empty() : tensor<3x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<3x6xf32>) -> tensor<3x6xf32>
  %y = linalg.matmul ins(%xv, %w : tensor<3x4xf32>, tensor<4x6xf32>) outs(%f6 : tensor<3x6xf32>) -> tensor<3x6xf32>
  %cb = linalg.broadcast ins(%c : tensor<6xf32>) outs(%e6 : tensor<3x6xf32>) dimensions = [0]
  %r = linalg.add ins(%y, %cb : tensor<3x6xf32>, tensor<3x6xf32>) outs(%e6 : tensor<3x6xf32>) -> tensor<3x6xf32>
  return %r : tensor<3x6xf32>
}

// -----

// The shifted value is also returned (BERT's post-norm feeds the residual):
// the shift stays, and so does the matmul's input.
// CHECK-LABEL: func.func @shift_with_other_user
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK:           arith.addf
// CHECK:         linalg.matmul ins(%[[S]], %{{.*}} : tensor<4x2xf32>, tensor<2x2xf32>)
// REMARK-NOT: remark: folded an input shift
func.func @shift_with_other_user(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %v = arith.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %v : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %0 = linalg.matmul ins(%s, %w : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0, %s : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// A shift by a plain argument (not known at load time) and a shift by a
// scalar constant: neither is folded.
// CHECK-LABEL: func.func @shift_not_foldable
// CHECK-SAME:    (%[[X:.*]]: tensor<4x2xf32>, %[[V:.*]]: tensor<2xf32>)
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[V]]
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[X]] :
// CHECK:         linalg.matmul ins(%[[S]], %{{.*}} : tensor<4x2xf32>, tensor<2x2xf32>)
// CHECK:         linalg.matmul ins(%[[T]], %{{.*}} : tensor<4x2xf32>, tensor<2x2xf32>)
// REMARK-NOT: remark: folded an input shift
func.func @shift_not_foldable(%x: tensor<4x2xf32>, %v: tensor<2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %v : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x2xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.addf %p, %one : f32
    linalg.yield %r : f32
  } -> tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %0 = linalg.matmul ins(%s, %w : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %1 = linalg.matmul ins(%t, %w : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0, %1 : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// A norm over ?x?x4 activations (the rows cannot be collapsed first because
// of a broadcast before it): the scale and shift are rank 3 and the linear
// reads them through a collapse of the leading dims. The shift goes into a
// bias either way; the scale, a weight argument in front of a weight
// argument, stays by default (the collapse reads the scaled input), and
// with policy=always moves into the weight (the collapse reads the
// unscaled input). The shape query follows the collapse.
// CHECK-LABEL: func.func @rank3_through_collapse
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?x4xf32>, %[[G:.*]]: tensor<4xf32> {linfuse.weight}, %[[V:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<4x6xf32> {linfuse.weight})
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[G]] : tensor<?x?x4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.mulf
// CHECK-NOT:     arith.addf
// CHECK:         %[[N:.*]] = tensor.dim %[[S]], %c1 : tensor<?x?x4xf32>
// CHECK:         %[[ROWS:.*]] = tensor.collapse_shape %[[S]] {{\[\[}}0, 1], [2]] : tensor<?x?x4xf32> into tensor<?x4xf32>
// CHECK:         %[[Y:.*]] = linalg.matmul ins(%[[ROWS]], %[[W]] : tensor<?x4xf32>, tensor<4x6xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[Y]], %{{.*}} : tensor<?x6xf32>, tensor<6xf32>)
// CHECK:           arith.addf
// CHECK:         return %{{.*}}, %[[N]]
// REMARK: remark: folded an input shift into the bias
// REMARK: remark: input scale not folded into weight arguments: the scaled weights would be a second copy of 96 bytes of weights (policy=always folds it)
// ALWAYS-LABEL: func.func @rank3_through_collapse
// ALWAYS-SAME:    (%[[X:.*]]: tensor<?x?x4xf32>, %[[G:.*]]: tensor<4xf32> {linfuse.weight}, %[[V:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<4x6xf32> {linfuse.weight})
// ALWAYS-NOT:     arith.addf %{{.*}} : f32
// ALWAYS:         %[[N:.*]] = tensor.dim %[[X]], %c1 : tensor<?x?x4xf32>
// ALWAYS:         %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<?x?x4xf32> into tensor<?x4xf32>
// ALWAYS:         %[[Y:.*]] = linalg.matmul ins(%[[ROWS]], %{{.*}} : tensor<?x4xf32>, tensor<4x6xf32>)
// ALWAYS:         %[[M:.*]] = tensor.dim %[[ROWS]], %{{.*}} : tensor<?x4xf32>
// ALWAYS:         linalg.generic {{.*}} ins(%[[Y]], %{{.*}} : tensor<?x6xf32>, tensor<6xf32>)
// ALWAYS:           arith.addf
// ALWAYS:         return %{{.*}}, %[[N]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
func.func @rank3_through_collapse(%x: tensor<?x?x4xf32>, %g: tensor<4xf32> {linfuse.weight}, %v: tensor<4xf32> {linfuse.weight}, %w: tensor<4x6xf32> {linfuse.weight}) -> (tensor<?x6xf32>, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x?x4xf32>
  %s = tensor.dim %x, %c1 : tensor<?x?x4xf32>
  %e = tensor.empty(%b, %s) : tensor<?x?x4xf32>
  %xs = linalg.generic {indexing_maps = [#id3, #last3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %g : tensor<?x?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x?x4xf32>
  %xv = linalg.generic {indexing_maps = [#id3, #last3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%xs, %v : tensor<?x?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x?x4xf32>
  %n = tensor.dim %xv, %c1 : tensor<?x?x4xf32>
  %rows = tensor.collapse_shape %xv [[0, 1], [2]] : tensor<?x?x4xf32> into tensor<?x4xf32>
  %m = tensor.dim %rows, %c0 : tensor<?x4xf32>
  %e6 = tensor.empty(%m) : tensor<?x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %y = linalg.matmul ins(%rows, %w : tensor<?x4xf32>, tensor<4x6xf32>) outs(%f6 : tensor<?x6xf32>) -> tensor<?x6xf32>
  return %y, %n : tensor<?x6xf32>, index
}

// -----

// The collapsed rows also feed a non-linear op: nothing folds.
// CHECK-LABEL: func.func @collapse_with_other_user
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK:           arith.addf
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[S]]
// CHECK:         linalg.matmul ins(%[[R]], %{{.*}} : tensor<?x4xf32>, tensor<4x6xf32>)
// REMARK-NOT: remark: folded an input
func.func @collapse_with_other_user(%x: tensor<?x2x4xf32>) -> (tensor<?x6xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %v = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %w = arith.constant dense<1.0> : tensor<4x6xf32>
  %b = tensor.dim %x, %c0 : tensor<?x2x4xf32>
  %e = tensor.empty(%b) : tensor<?x2x4xf32>
  %xv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %v : tensor<?x2x4xf32>, tensor<4xf32>) outs(%e : tensor<?x2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2x4xf32>
  %rows = tensor.collapse_shape %xv [[0, 1], [2]] : tensor<?x2x4xf32> into tensor<?x4xf32>
  %m = tensor.dim %rows, %c0 : tensor<?x4xf32>
  %e6 = tensor.empty(%m) : tensor<?x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %y = linalg.matmul ins(%rows, %w : tensor<?x4xf32>, tensor<4x6xf32>) outs(%f6 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %e4 = tensor.empty(%m) : tensor<?x4xf32>
  %neg = linalg.negf ins(%rows : tensor<?x4xf32>) outs(%e4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y, %neg : tensor<?x6xf32>, tensor<?x4xf32>
}
