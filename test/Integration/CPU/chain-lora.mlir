// A chain x·A·B (square, folds: 2 GEMMs -> 1) and a LoRA adapter
// x·W + 0.5·(x·A2)·B2 (rank 4, folds: 3 GEMMs -> 1), weights as
// `linfuse.weight` arguments: the products are computed once by the
// packing function (in f64), and the two folded matmuls, which share x,
// then merge: optimized 1 GEMM, --no-optimize 5.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 3 x:6x32:f32 a:32x32:f32:0.2 b:32x32:f32:0.2 w:32x48:f32:0.2 a2:32x4:f32:0.2 b2:4x48:f32:0.2
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/a.npy --input=@%t/in/b.npy --input=@%t/in/w.npy --input=@%t/in/a2.npy --input=@%t/in/b2.npy --output=@%t/c.npy --output=@%t/l.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/a.npy --input=@%t/in/b.npy --input=@%t/in/w.npy --input=@%t/in/a2.npy --input=@%t/in/b2.npy --output=@%t/c0.npy --output=@%t/l0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x @ a @ b" --expect "x @ w + 0.5 * (x @ a2) @ b2" %t/c.npy %t/l.npy %t/c0.npy %t/l0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 1
// REF: gemm_calls: 5
// NUM-COUNT-4: OK

func.func @main(%x: tensor<6x32xf32>, %a: tensor<32x32xf32> {linfuse.weight},
                %b: tensor<32x32xf32> {linfuse.weight}, %w: tensor<32x48xf32> {linfuse.weight},
                %a2: tensor<32x4xf32> {linfuse.weight}, %b2: tensor<4x48xf32> {linfuse.weight})
    -> (tensor<6x32xf32>, tensor<6x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %e32 = tensor.empty() : tensor<6x32xf32>
  %f32 = linalg.fill ins(%zero : f32) outs(%e32 : tensor<6x32xf32>) -> tensor<6x32xf32>
  %xa = linalg.matmul ins(%x, %a : tensor<6x32xf32>, tensor<32x32xf32>) outs(%f32 : tensor<6x32xf32>) -> tensor<6x32xf32>
  %xab = linalg.matmul ins(%xa, %b : tensor<6x32xf32>, tensor<32x32xf32>) outs(%f32 : tensor<6x32xf32>) -> tensor<6x32xf32>
  %e48 = tensor.empty() : tensor<6x48xf32>
  %f48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<6x48xf32>) -> tensor<6x48xf32>
  %e4 = tensor.empty() : tensor<6x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<6x32xf32>, tensor<32x48xf32>) outs(%f48 : tensor<6x48xf32>) -> tensor<6x48xf32>
  %xa2 = linalg.matmul ins(%x, %a2 : tensor<6x32xf32>, tensor<32x4xf32>) outs(%f4 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %lo = linalg.matmul ins(%xa2, %b2 : tensor<6x4xf32>, tensor<4x48xf32>) outs(%f48 : tensor<6x48xf32>) -> tensor<6x48xf32>
  %half = arith.constant dense<0.5> : tensor<6x48xf32>
  %s = linalg.mul ins(%lo, %half : tensor<6x48xf32>, tensor<6x48xf32>) outs(%e48 : tensor<6x48xf32>) -> tensor<6x48xf32>
  %sum = linalg.add ins(%xw, %s : tensor<6x48xf32>, tensor<6x48xf32>) outs(%e48 : tensor<6x48xf32>) -> tensor<6x48xf32>
  return %xab, %sum : tensor<6x32xf32>, tensor<6x48xf32>
}
