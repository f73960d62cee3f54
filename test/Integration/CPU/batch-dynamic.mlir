// Batch matmuls sharing their input, with per-batch weights of a dynamic
// batch (one [K, N], one [N, K]): merged into one batched GEMM (2 -> 1
// calls), the [K, N] weight transposed at run time. Against numpy and
// --no-optimize.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 31 x:3x5x16:f32 w0:3x16x8:f32 w1:3x12x16:f32
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w0.npy --input=@%t/in/w1.npy --output=@%t/y0.npy --output=@%t/y1.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w0.npy --input=@%t/in/w1.npy --output=@%t/r0.npy --output=@%t/r1.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x @ w0" --expect "x @ w1.transpose(0, 2, 1)" %t/y0.npy %t/y1.npy %t/r0.npy %t/r1.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 1
// REF: gemm_calls: 2
// NUM-COUNT-4: OK

func.func @main(%x: tensor<?x5x16xf32>, %w0: tensor<?x16x8xf32>, %w1: tensor<?x12x16xf32>) -> (tensor<?x5x8xf32>, tensor<?x5x12xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x5x16xf32>
  %e8 = tensor.empty(%b) : tensor<?x5x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
  %y0 = linalg.batch_matmul ins(%x, %w0 : tensor<?x5x16xf32>, tensor<?x16x8xf32>) outs(%f8 : tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
  %e12 = tensor.empty(%b) : tensor<?x5x12xf32>
  %f12 = linalg.fill ins(%zero : f32) outs(%e12 : tensor<?x5x12xf32>) -> tensor<?x5x12xf32>
  %y1 = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%x, %w1 : tensor<?x5x16xf32>, tensor<?x12x16xf32>) outs(%f12 : tensor<?x5x12xf32>) -> tensor<?x5x12xf32>
  return %y0, %y1 : tensor<?x5x8xf32>, tensor<?x5x12xf32>
}
