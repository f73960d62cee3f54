// Decode (M = 1): Q/K/V as three linalg.matvec on the same token vector x
// (weights [out, in]) become one-row matmuls over x, merge into ONE GEMM
// (1x96) and run through the library; --no-optimize runs three GEMMs (no
// scalar loops). Both against numpy.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 23 x:128:f32 wq:64x128:f32:0.1 wk:16x128:f32:0.1 wv:16x128:f32:0.1
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "wq @ x" --expect "wk @ x" --expect "wv @ x" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 1
// REF: gemm_calls: 3
// NUM-COUNT-6: OK

func.func @main(%x: tensor<128xf32>, %wq: tensor<64x128xf32> {linfuse.weight},
                %wk: tensor<16x128xf32> {linfuse.weight}, %wv: tensor<16x128xf32> {linfuse.weight})
    -> (tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e64 = tensor.empty() : tensor<64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<64xf32>) -> tensor<64xf32>
  %e16 = tensor.empty() : tensor<16xf32>
  %f16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<16xf32>) -> tensor<16xf32>
  %q = linalg.matvec ins(%wq, %x : tensor<64x128xf32>, tensor<128xf32>) outs(%f64 : tensor<64xf32>) -> tensor<64xf32>
  %k = linalg.matvec ins(%wk, %x : tensor<16x128xf32>, tensor<128xf32>) outs(%f16 : tensor<16xf32>) -> tensor<16xf32>
  %v = linalg.matvec ins(%wv, %x : tensor<16x128xf32>, tensor<128xf32>) outs(%f16 : tensor<16xf32>) -> tensor<16xf32>
  return %q, %k, %v : tensor<64xf32>, tensor<16xf32>, tensor<16xf32>
}
