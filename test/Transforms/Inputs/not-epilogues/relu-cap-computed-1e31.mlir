// relu capped at 1e31, the cap computed in the body (1e16 * 1e15): not a
// ReLU. Caught by sampling around every value the body computes without x.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x1xf32>, %w: tensor<1x1xf32>) -> tensor<2x1xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x1xf32>) -> tensor<2x1xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x1xf32>, tensor<1x1xf32>) outs(%f : tensor<2x1xf32>) -> tensor<2x1xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x1xf32>) outs(%e : tensor<2x1xf32>) {
  ^bb0(%in: f32, %o: f32):
    %a1 = arith.constant 1.0e16 : f32
    %a2 = arith.constant 1.0e15 : f32
    %cap = arith.mulf %a1, %a2 : f32
    %a = arith.maximumf %in, %z : f32
    %b = arith.minimumf %a, %cap : f32
    linalg.yield %b : f32
  } -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}
