// f16 linear + relu + clamp to the f16 maximum (65504), the T5-style guard
// against overflow to inf. Once raised as a plain ReLU (constants above 1e4
// were not sampled), so inf stayed inf.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x2xf16>, %w: tensor<2x2xf16>) -> tensor<2x2xf16> {
  %z = arith.constant 0.0 : f16
  %cap = arith.constant 65504.0 : f16
  %e = tensor.empty() : tensor<2x2xf16>
  %f = linalg.fill ins(%z : f16) outs(%e : tensor<2x2xf16>) -> tensor<2x2xf16>
  %y = linalg.matmul ins(%x, %w : tensor<2x2xf16>, tensor<2x2xf16>) outs(%f : tensor<2x2xf16>) -> tensor<2x2xf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x2xf16>) outs(%e : tensor<2x2xf16>) {
  ^bb0(%in: f16, %o: f16):
    %a = arith.maximumf %in, %z : f16
    %b = arith.minimumf %a, %cap : f16
    linalg.yield %b : f16
  } -> tensor<2x2xf16>
  return %r : tensor<2x2xf16>
}
