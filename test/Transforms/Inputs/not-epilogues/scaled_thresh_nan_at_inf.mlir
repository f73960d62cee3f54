// A cutoff that depends on x through a scale (x * 1e-31 > 1, i.e. x > 1e31):
// not an epilogue. Found by random testing; caught by sampling out to the
// input type's largest value.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x1xf32>, %w: tensor<1x1xf32>) -> tensor<2x1xf32> {
  %z0 = arith.constant 0.0 : f32
  %eA = tensor.empty() : tensor<2x1xf32>
  %f = linalg.fill ins(%z0 : f32) outs(%eA : tensor<2x1xf32>) -> tensor<2x1xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x1xf32>, tensor<1x1xf32>) outs(%f : tensor<2x1xf32>) -> tensor<2x1xf32>
  %eB = tensor.empty() : tensor<2x1xf32>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x1xf32>) outs(%eB : tensor<2x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %z = arith.constant 0.00000000000000000e+00 : f32
    %s = arith.constant 1.00000000000000008e-31 : f32
    %o = arith.constant 1.00000000000000000e+00 : f32
    %xs = arith.mulf %in, %s : f32
    %c = arith.cmpf ogt, %xs, %o : f32
    %x0 = arith.mulf %in, %z : f32
    %a = arith.maximumf %in, %z : f32
    %r = arith.select %c, %x0, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x1xf32>
  return %o : tensor<2x1xf32>
}
