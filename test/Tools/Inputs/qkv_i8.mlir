// Quantized Q/K/V (i8 x i8 -> i32, weights N x K as linfuse.weight
// arguments): test/Tools/linfuse-compile-cuda-int8.test.
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @qkv8(%x: tensor<?x64xi8>, %wq: tensor<96x64xi8> {linfuse.weight}, %wk: tensor<32x64xi8> {linfuse.weight}, %wv: tensor<32x64xi8> {linfuse.weight}) -> (tensor<?x96xi32>, tensor<?x32xi32>, tensor<?x32xi32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = tensor.dim %x, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%m) : tensor<?x96xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x96xi32>) -> tensor<?x96xi32>
  %e2 = tensor.empty(%m) : tensor<?x32xi32>
  %f2 = linalg.fill ins(%zero : i32) outs(%e2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %q = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wq : tensor<?x64xi8>, tensor<96x64xi8>) outs(%f : tensor<?x96xi32>) -> tensor<?x96xi32>
  %k = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wk : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %v = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wv : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  return %q, %k, %v : tensor<?x96xi32>, tensor<?x32xi32>, tensor<?x32xi32>
}
