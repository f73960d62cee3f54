// Zero-sized dims: the merge emits tensor.extract_slice with offset == dim size
// (size 0), which the upstream verifier rejects. Fails with --linfuse-optimize too.
// N = 0 member (last in the group):
func.func @zero_n(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x0xf32>, %i1: tensor<4x16xf32>, %i2: tensor<4x0xf32>) -> (tensor<4x16xf32>, tensor<4x0xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x0xf32>) outs(%i2 : tensor<4x0xf32>) -> tensor<4x0xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<4x0xf32>
}
// -----
// M = 0 shared LHS:
func.func @zero_m(%x: tensor<0x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<8x16xf32>, %i1: tensor<0x16xf32>, %i2: tensor<0x16xf32>) -> (tensor<0x16xf32>, tensor<0x16xf32>) {
  %m1 = linalg.matmul ins(%x, %w1 : tensor<0x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<0x16xf32>) -> tensor<0x16xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<0x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<0x16xf32>) -> tensor<0x16xf32>
  return %m1, %m2 : tensor<0x16xf32>, tensor<0x16xf32>
}
// -----
// shared RHS, last member has M = 0:
func.func @zero_m_rhs(%x1: tensor<4x8xf32>, %x2: tensor<0x8xf32>, %w: tensor<8x16xf32>, %i1: tensor<4x16xf32>, %i2: tensor<0x16xf32>) -> (tensor<4x16xf32>, tensor<0x16xf32>) {
  %m1 = linalg.matmul ins(%x1, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%i1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x2, %w : tensor<0x8xf32>, tensor<8x16xf32>) outs(%i2 : tensor<0x16xf32>) -> tensor<0x16xf32>
  return %m1, %m2 : tensor<4x16xf32>, tensor<0x16xf32>
}
