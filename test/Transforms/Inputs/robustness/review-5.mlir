// Shared-RHS members with a dynamic-M LHS but a static-M result (valid IR).
// (a) accumulators concatenated: concat is 8x16, merged result type ?x16.
func.func @rhs_concat_init(%x1: tensor<?x8xf32>, %x2: tensor<4x8xf32>, %w: tensor<8x16xf32>, %i1: tensor<4x16xf32>, %i2: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m1 = linalg.matmul ins(%x1, %w : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x2, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<4x16xf32>
}
// -----
// (b) zero fills: slice with dynamic row count typed tensor<4x16xf32>.
func.func @rhs_fill(%x1: tensor<?x8xf32>, %x2: tensor<?x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %d = tensor.dim %x2, %c0 : tensor<?x8xf32>
  %e2 = tensor.empty(%d) : tensor<?x16xf32>
  %f2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %m1 = linalg.matmul ins(%x1, %w : tensor<?x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x2, %w : tensor<?x8xf32>, tensor<8x16xf32>) outs(%f2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<?x16xf32>
}
