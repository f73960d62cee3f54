// relu followed by a clamp at 1.0e5 (clamp(relu(x), max=1e5)): not a plain
// ReLU. Once raised as one, because the matcher sampled only near constants
// up to 1e4 (found by random testing).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x2xf32>, %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %z = arith.constant 0.0 : f32
  %cap = arith.constant 1.0e5 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%in: f32, %o: f32):
    %a = arith.maximumf %in, %z : f32
    %b = arith.minimumf %a, %cap : f32
    linalg.yield %b : f32
  } -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
