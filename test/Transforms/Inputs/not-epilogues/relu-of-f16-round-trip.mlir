// relu of the matmul result rounded through f16 (above 65504 it becomes
// inf): not a plain ReLU. The matcher rounds truncf to its type.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x1xf32>, %w: tensor<1x1xf32>) -> tensor<2x1xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x1xf32>) -> tensor<2x1xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x1xf32>, tensor<1x1xf32>) outs(%f : tensor<2x1xf32>) -> tensor<2x1xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x1xf32>) outs(%e : tensor<2x1xf32>) {
  ^bb0(%in: f32, %o: f32):
    %t = arith.truncf %in : f32 to f16
    %x2 = arith.extf %t : f16 to f32
    %a = arith.maximumf %x2, %z : f32
    linalg.yield %a : f32
  } -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}
