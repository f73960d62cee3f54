// Q/K/V projections with bias (nn.Linear layout, weights as `linfuse.weight`
// arguments, dynamic M): run through linfuse-run optimized (one merged GEMM
// over the packed concatenated weights) and with --no-optimize (three
// GEMMs), both compared with numpy.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 1 x:5x64:f32 wq:64x64:f32:0.125 bq:64:f32 wk:32x64:f32:0.125 bk:32:f32 wv:32x64:f32:0.125 bv:32:f32
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x @ wq.T + bq" --expect "x @ wk.T + bk" --expect "x @ wv.T + bv" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 1
// REF: gemm_calls: 3
// NUM-COUNT-6: OK
// NUM-NOT: FAIL

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
