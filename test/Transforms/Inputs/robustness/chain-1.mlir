// chain-bug-1: --linfuse-fold-matmul-chains (policy=cost) crashes (SIGSEGV)
// when the cost DP cuts a chain right after a folded segment and the two
// steps at the cut are joined by a tensor.expand_shape + tensor.collapse_shape
// pair (3-D activations).
//
// RUN: linfuse-opt --linfuse-fold-matmul-chains /tmp/chain-bug-1.mlir
//
// Chain 16 -> 16 -> 2 -> 16: the DP folds steps 0-1 (x·(A·B), 16x2) and keeps
// step 2 (2·(16·2 + 2·16) = 128 per row instead of 2·16·16 = 512).
//
// Expected: valid IR computing the same values, e.g.
//   %w  = arith.constant dense<8.0> : tensor<16x2xf32>     // A·B
//   %y  = linalg.matmul ins(%x, %w ...) -> tensor<6x2xf32>
//   %z3 = tensor.expand_shape %y ...; %z2 = tensor.collapse_shape %z3 ...
//   %w2 = linalg.matmul ins(%z2, %c ...)  -> tensor<6x16xf32>
// with out[i, :] = 4 * sum_k x[i, k] (x·A = row sums, ·B = 8 * row sums,
// ·C = 2 * 0.25 * 8 * row sums).
//
// Actual: segmentation fault in the greedy driver
// (mlir::linalg::MatmulOp::getEffects <- wouldOpBeTriviallyDead), because
// FoldLinearChain erases steps[j-1].opsLastFirst() for the last step of the
// folded segment [0, 2), and that list includes steps[1].reshapes -- the
// expand/collapse pair *after* step 1, whose collapse_shape result %z2 is
// still the LHS of the kept step 2. (rewriter.eraseOp on an op with uses.)
// With policy=always (one segment) the same input folds fine; with
// --linfuse-optimize it is not reached because the canonicalizer removes
// collapse(expand(x)) pairs before the pass runs.
// Suggested fix: for the last step of a segment that is followed by another
// segment, do not erase its reshapes (the RAUW of last.output() already
// feeds them the folded value); or RAUW the collapse result instead.
func.func @f(%x: tensor<6x16xf32>) -> tensor<6x16xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<16x16xf32>
  %b = arith.constant dense<0.5> : tensor<16x2xf32>
  %c = arith.constant dense<0.25> : tensor<2x16xf32>
  %e = tensor.empty() : tensor<6x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x16xf32>) -> tensor<6x16xf32>
  %e2 = tensor.empty() : tensor<6x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<6x2xf32>) -> tensor<6x2xf32>
  %y = linalg.matmul ins(%x, %a : tensor<6x16xf32>, tensor<16x16xf32>) outs(%f : tensor<6x16xf32>) -> tensor<6x16xf32>
  %z = linalg.matmul ins(%y, %b : tensor<6x16xf32>, tensor<16x2xf32>) outs(%f2 : tensor<6x2xf32>) -> tensor<6x2xf32>
  %z3 = tensor.expand_shape %z [[0, 1], [2]] output_shape [2, 3, 2] : tensor<6x2xf32> into tensor<2x3x2xf32>
  %z2 = tensor.collapse_shape %z3 [[0, 1], [2]] : tensor<2x3x2xf32> into tensor<6x2xf32>
  %w = linalg.matmul ins(%z2, %c : tensor<6x2xf32>, tensor<2x16xf32>) outs(%f : tensor<6x16xf32>) -> tensor<6x16xf32>
  return %w : tensor<6x16xf32>
}
