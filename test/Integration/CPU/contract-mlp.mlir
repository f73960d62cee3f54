// LLaMA MLP written with linalg.contract (MLIR 22's contraction op):
// down(silu(gate(x)) * up(x)) with nn.Linear weights (transposed-B maps).
// The gate/up contract pair merges into one GEMM: 2 GEMMs in all, 3 with
// --no-optimize (every contract raised to the library, none as loops).
// Both against numpy.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 29 x:5x64:f32 wg:96x64:f32:0.125 wu:96x64:f32:0.125 wd:64x96:f32:0.1
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wg.npy --input=@%t/in/wu.npy --input=@%t/in/wd.npy --output=@%t/y.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wg.npy --input=@%t/in/wu.npy --input=@%t/in/wd.npy --output=@%t/y0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "(silu(x @ wg.T) * (x @ wu.T)) @ wd.T" %t/y.npy %t/y0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 2
// REF: gemm_calls: 3
// NUM-COUNT-2: OK

#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<?x64xf32>, %wg: tensor<96x64xf32> {linfuse.weight},
                %wu: tensor<96x64xf32> {linfuse.weight},
                %wd: tensor<64x96xf32> {linfuse.weight}) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e96 = tensor.empty(%m) : tensor<?x96xf32>
  %f96 = linalg.fill ins(%zero : f32) outs(%e96 : tensor<?x96xf32>) -> tensor<?x96xf32>
  %g = linalg.contract indexing_maps = [#x, #w, #y] ins(%x, %wg : tensor<?x64xf32>, tensor<96x64xf32>) outs(%f96 : tensor<?x96xf32>) -> tensor<?x96xf32>
  %u = linalg.contract indexing_maps = [#x, #w, #y] ins(%x, %wu : tensor<?x64xf32>, tensor<96x64xf32>) outs(%f96 : tensor<?x96xf32>) -> tensor<?x96xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%g, %u : tensor<?x96xf32>, tensor<?x96xf32>) outs(%e96 : tensor<?x96xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %n = arith.negf %a : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %s = arith.divf %a, %den : f32
    %p = arith.mulf %s, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x96xf32>
  %e64 = tensor.empty(%m) : tensor<?x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %d = linalg.contract indexing_maps = [#x, #w, #y] ins(%h, %wd : tensor<?x96xf32>, tensor<64x96xf32>) outs(%f64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  return %d : tensor<?x64xf32>
}
