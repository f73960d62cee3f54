// Quantized Q/K/V: i8 x i8 -> i32 matmuls sharing x, K = 2048 (sums up to
// 2048 * 128 * 128 = 2^25: beyond f32's exact integers, so only integer
// arithmetic gets them right). Optimized: one GEMM (oneDNN's s8 matmul);
// --no-optimize: three. A fourth matmul, of another input, accumulates
// into an i32 input (beta = 1, which the runtime computes with its exact
// integer loop). All
// compared with numpy exactly (tolerance 0).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 5 x:9x2048:i8 wq:64x2048:i8 wk:32x2048:i8 wv:32x2048:i8 acc:9x32:i32 x2:9x2048:i8
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --input=@%t/in/acc.npy --input=@%t/in/x2.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy --output=@%t/a.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --input=@%t/in/acc.npy --input=@%t/in/x2.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy --output=@%t/a0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 0 --expect "x @ wq.T" --expect "x @ wk.T" --expect "x @ wv.T" --expect "acc + x2 @ wk.T" %t/q.npy %t/k.npy %t/v.npy %t/a.npy %t/q0.npy %t/k0.npy %t/v0.npy %t/a0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 2
// OPT-NEXT: kernel_launches: 2
// OPT-NEXT: fallback_gemm_calls: 1
// REF: gemm_calls: 4
// REF-NEXT: kernel_launches: 4
// REF-NEXT: fallback_gemm_calls: 1
// NUM-COUNT-8: OK

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%x: tensor<?x2048xi8>, %wq: tensor<64x2048xi8>, %wk: tensor<32x2048xi8>,
                %wv: tensor<32x2048xi8>, %acc: tensor<?x32xi32>, %x2: tensor<?x2048xi8>)
    -> (tensor<?x64xi32>, tensor<?x32xi32>, tensor<?x32xi32>, tensor<?x32xi32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = tensor.dim %x, %c0 : tensor<?x2048xi8>
  %e = tensor.empty(%m) : tensor<?x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x64xi32>) -> tensor<?x64xi32>
  %e2 = tensor.empty(%m) : tensor<?x32xi32>
  %f2 = linalg.fill ins(%zero : i32) outs(%e2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %q = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wq : tensor<?x2048xi8>, tensor<64x2048xi8>) outs(%f : tensor<?x64xi32>) -> tensor<?x64xi32>
  %k = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wk : tensor<?x2048xi8>, tensor<32x2048xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %v = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wv : tensor<?x2048xi8>, tensor<32x2048xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %a = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x2, %wk : tensor<?x2048xi8>, tensor<32x2048xi8>) outs(%acc : tensor<?x32xi32>) -> tensor<?x32xi32>
  return %q, %k, %v, %a : tensor<?x64xi32>, tensor<?x32xi32>, tensor<?x32xi32>, tensor<?x32xi32>
}
