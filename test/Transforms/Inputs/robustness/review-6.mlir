// Sparse weights are merged: tensor.concat of #CSR tensors into a dense tensor. The input
// compiles with mlir-opt --sparsifier; the output does not. Results typed with an encoding
// (e.g. outs(%i : tensor<4x16xf32, #CSR>)) get slices from an un-encoded merged tensor too.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
func.func @sparse_w(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32, #CSR>, %w2: tensor<8x16xf32, #CSR>, %i: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32, #CSR>) outs(%i : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x16xf32, #CSR>) outs(%i : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<4x16xf32>
}
