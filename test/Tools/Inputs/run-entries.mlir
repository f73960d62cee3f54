func.func @first(%x: tensor<2xf32>) -> tensor<2xf32> { return %x : tensor<2xf32> }
func.func @second(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
  %e = tensor.empty() : tensor<2xf32>
  %r = linalg.add ins(%x, %y : tensor<2xf32>, tensor<2xf32>) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32> }
func.func private @priv(%x: tensor<2xf32>) -> tensor<2xf32> { return %x : tensor<2xf32> }
func.func private @ext(%x: tensor<2xf32>) -> tensor<2xf32>
