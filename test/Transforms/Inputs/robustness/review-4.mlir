// Shared-LHS members whose results differ in static/dynamic leading dims (all
// valid IR). The merged type is taken from the first member only.
// (a) first dynamic, second static: merged matmul init (concat) is 4x32, result ?x32.
func.func @first_dyn(%x: tensor<?x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %i1: tensor<?x16xf32>, %i2: tensor<4x16xf32>) -> (tensor<?x16xf32>, tensor<4x16xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m1, %m2 : tensor<?x16xf32>, tensor<4x16xf32>
}
// -----
// (b) first static, second dynamic: extract_slice with static size 4 typed tensor<?x16xf32>.
func.func @first_static(%x: tensor<?x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %i1: tensor<4x16xf32>, %i2: tensor<?x16xf32>) -> (tensor<4x16xf32>, tensor<?x16xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<?x16xf32>
}
// -----
// (c) different static M (UB at run time, but valid IR): invalid tensor.concat.
func.func @diff_m(%x: tensor<?x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %i1: tensor<4x16xf32>, %i2: tensor<5x16xf32>) -> (tensor<4x16xf32>, tensor<5x16xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<?x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<5x16xf32>) -> tensor<5x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<5x16xf32>
}
