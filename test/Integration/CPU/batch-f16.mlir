// Two batch matmuls sharing their LHS (attention-style, f32) merge into one
// batched GEMM (2 -> 1 calls; one oneDNN matmul each, batch included); and f16 Q/K
// projections with f16 weights merge too (f32 accumulation in the runtime;
// compared with numpy at f16 tolerance).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 4 x:3x5x16:f32 b1:3x16x8:f32 b2:3x16x12:f32 h:4x32:f16 wq:32x32:f16:0.2 wk:32x16:f16:0.2
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/b1.npy --input=@%t/in/b2.npy --input=@%t/in/h.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --output=@%t/y1.npy --output=@%t/y2.npy --output=@%t/q.npy --output=@%t/k.npy | FileCheck %s --check-prefixes=OPT,OPT-%f16gemm
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/b1.npy --input=@%t/in/b2.npy --input=@%t/in/h.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --output=@%t/y10.npy --output=@%t/y20.npy --output=@%t/q0.npy --output=@%t/k0.npy | FileCheck %s --check-prefixes=REF,REF-%f16gemm
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x @ b1" --expect "x @ b2" %t/y1.npy %t/y2.npy %t/y10.npy %t/y20.npy | FileCheck %s --check-prefix=NUM
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 2e-3 --expect "h @ wq" --expect "h @ wk" %t/q.npy %t/k.npy %t/q0.npy %t/k0.npy | FileCheck %s --check-prefix=NUM16

// OPT: gemm_calls: 2
// OPT-NEXT: kernel_launches: 2
// The f16 GEMM runs on oneDNN 3 (the venv's, scripts/setup.sh --python)
// where the CPU has f16 kernels (AVX512-FP16, AMX-FP16), not widened to f32
// for OpenBLAS; elsewhere (AMD Zen 4) each f16 GEMM is a fallback call.
// OPT-F16NATIVE-NEXT: fallback_gemm_calls: 0
// OPT-F16WIDENED-NEXT: fallback_gemm_calls: 1
// REF: gemm_calls: 4
// REF-NEXT: kernel_launches: 4
// REF-F16NATIVE-NEXT: fallback_gemm_calls: 0
// REF-F16WIDENED-NEXT: fallback_gemm_calls: 2
// NUM-COUNT-4: OK
// NUM16-COUNT-4: OK

func.func @main(%x: tensor<3x5x16xf32>, %b1: tensor<3x16x8xf32>, %b2: tensor<3x16x12xf32>,
                %h: tensor<4x32xf16>, %wq: tensor<32x32xf16> {linfuse.weight}, %wk: tensor<32x16xf16> {linfuse.weight})
    -> (tensor<3x5x8xf32>, tensor<3x5x12xf32>, tensor<4x32xf16>, tensor<4x16xf16>) {
  %zero = arith.constant 0.0 : f32
  %e8 = tensor.empty() : tensor<3x5x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<3x5x8xf32>) -> tensor<3x5x8xf32>
  %y1 = linalg.batch_matmul ins(%x, %b1 : tensor<3x5x16xf32>, tensor<3x16x8xf32>) outs(%f8 : tensor<3x5x8xf32>) -> tensor<3x5x8xf32>
  %e12 = tensor.empty() : tensor<3x5x12xf32>
  %f12 = linalg.fill ins(%zero : f32) outs(%e12 : tensor<3x5x12xf32>) -> tensor<3x5x12xf32>
  %y2 = linalg.batch_matmul ins(%x, %b2 : tensor<3x5x16xf32>, tensor<3x16x12xf32>) outs(%f12 : tensor<3x5x12xf32>) -> tensor<3x5x12xf32>
  %zh = arith.constant 0.0 : f16
  %eq = tensor.empty() : tensor<4x32xf16>
  %fq = linalg.fill ins(%zh : f16) outs(%eq : tensor<4x32xf16>) -> tensor<4x32xf16>
  %q = linalg.matmul ins(%h, %wq : tensor<4x32xf16>, tensor<32x32xf16>) outs(%fq : tensor<4x32xf16>) -> tensor<4x32xf16>
  %ek = tensor.empty() : tensor<4x16xf16>
  %fk = linalg.fill ins(%zh : f16) outs(%ek : tensor<4x16xf16>) -> tensor<4x16xf16>
  %k = linalg.matmul ins(%h, %wk : tensor<4x32xf16>, tensor<32x16xf16>) outs(%fk : tensor<4x16xf16>) -> tensor<4x16xf16>
  return %y1, %y2, %q, %k : tensor<3x5x8xf32>, tensor<3x5x12xf32>, tensor<4x32xf16>, tensor<4x16xf16>
}
