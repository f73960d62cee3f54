// chain-bug-2: --linfuse-fold-matmul-chains emits invalid IR (type mismatch)
// when a folded matmul's LHS has a dynamic row dim but the value it replaces
// is statically shaped. linalg allows such mixed operands (the verifier and
// mlir-opt accept this file); the pass builds the folded matmul's result type
// from the chain input x (tensor<?xNxf32>) and RAUWs a tensor<MxNxf32> value
// with it.
//
// RUN: linfuse-opt --linfuse-fold-matmul-chains /tmp/chain-bug-2.mlir
//
// Expected: valid IR, e.g. the folded matmul with outs/result tensor<2x4xf32>
// (or a tensor.cast back to the original type); result = 2 * row sums of x.
// Actual (all three functions):
//   error: type of return operand 0 ('tensor<?x4xf32>') doesn't match
//   function result type ('tensor<2x4xf32>')
// Affected paths: FoldLinearChain (@chain, via buildLinear(steps[i].input()))
// FoldLinearSum (@lora, via lhs->x), and the input scale absorbed by a chain
// (@scale_chain: chainInput = scale->input, whose type differs from the
// scale's result). FoldInputScale alone is fine (it only rewires operands).
// Not reached via --linfuse-optimize: the canonicalizer first makes the
// operand static with a tensor.cast. Found by random_matmul_graphs.py with
// --opt-flags='--linfuse-fold-matmul-chains --linfuse-optimize' (seed 6032:
// a norm scale with a dynamic input and a static result between two steps).
// Suggested fix: build the folded op's init from the replaced value's type
// (or insert a tensor.cast to it) rather than deriving the type from x.
func.func @chain(%x: tensor<?x4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<4x4xf32>
  %b = arith.constant dense<0.5> : tensor<4x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul ins(%x, %a : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.matmul ins(%y, %b : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

func.func @lora(%x: tensor<?x4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<4x4xf32>
  %a = arith.constant dense<0.5> : tensor<4x1xf32>
  %b = arith.constant dense<2.0> : tensor<1x4xf32>
  %s = arith.constant dense<0.5> : tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %e1 = tensor.empty() : tensor<2x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %xa = linalg.matmul ins(%x, %a : tensor<?x4xf32>, tensor<4x1xf32>) outs(%f1 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %xab = linalg.matmul ins(%xa, %b : tensor<2x1xf32>, tensor<1x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sc = linalg.mul ins(%xab, %s : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.add ins(%xw, %sc : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @scale_chain(%x: tensor<?x4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %g = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = arith.constant dense<1.0> : tensor<4x4xf32>
  %b = arith.constant dense<0.5> : tensor<4x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<?x4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul ins(%s, %a : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.matmul ins(%y, %b : tensor<2x4xf32>, tensor<4x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}
