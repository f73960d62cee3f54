// Q/K/V projections with bias (nn.Linear layout), weights as `linfuse.weight`
// arguments: linfuse-compile merges them into one GEMM over packed weights
// (@main__pack concatenates them once). See main.cpp.
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<?x64xf32>,
                %wq: tensor<64x64xf32> {linfuse.weight}, %bq: tensor<64xf32> {linfuse.weight},
                %wk: tensor<32x64xf32> {linfuse.weight}, %bk: tensor<32xf32> {linfuse.weight},
                %wv: tensor<32x64xf32> {linfuse.weight}, %bv: tensor<32xf32> {linfuse.weight})
    -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e64 = tensor.empty(%m) : tensor<?x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %e32 = tensor.empty(%m) : tensor<?x32xf32>
  %f32 = linalg.fill ins(%zero : f32) outs(%e32 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %q0 = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wq : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%q0, %bq : tensor<?x64xf32>, tensor<64xf32>) outs(%e64 : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %k0 = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wk : tensor<?x64xf32>, tensor<32x64xf32>) outs(%f32 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %k = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%k0, %bk : tensor<?x32xf32>, tensor<32xf32>) outs(%e32 : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  %v0 = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wv : tensor<?x64xf32>, tensor<32x64xf32>) outs(%f32 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %v = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%v0, %bv : tensor<?x32xf32>, tensor<32xf32>) outs(%e32 : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}
