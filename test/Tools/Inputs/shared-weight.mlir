// Two matmuls of one weight whose outputs are both sized by %x1's rows: the
// program says x1 and x2 have as many rows. Merged, they are one GEMM over
// concat(x1, x2), which would run with any row counts.
func.func @main(%x1: tensor<?x4xf32>, %x2: tensor<?x4xf32>, %w: tensor<4x3xf32>) -> (tensor<?x3xf32>, tensor<?x3xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %m = tensor.dim %x1, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x3xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %a = linalg.matmul ins(%x1, %w : tensor<?x4xf32>, tensor<4x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32>
  %b = linalg.matmul ins(%x2, %w : tensor<?x4xf32>, tensor<4x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %a, %b : tensor<?x3xf32>, tensor<?x3xf32>
}
