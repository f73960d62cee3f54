// Weights with a dynamic dimension run optimized (lifted: the size is read
// in @main from the packed weight; it used to fail with "packed weight 0 has
// type index") as they run unoptimized.
// RUN: linfuse-run %s --input=2x32xf32=1 --input=3x32xf32=0.5 | FileCheck %s
// RUN: linfuse-run %s --no-optimize --input=2x32xf32=1 --input=3x32xf32=0.5 | FileCheck %s
// RUN: linfuse-run %s --input=1x32xf32=2 --input=5x32xf32=0.25 | FileCheck %s --check-prefix=OTHER
// CHECK: result[0]: 2x3xf32={{\[\[}}16 16 16][16 16 16]]
// OTHER: result[0]: 1x5xf32={{\[\[}}16 16 16 16 16]]
func.func @main(%x: tensor<?x32xf32>, %w: tensor<?x32xf32> {linfuse.weight}) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %n = tensor.dim %w, %c0 : tensor<?x32xf32>
  %et = tensor.empty(%n) : tensor<32x?xf32>
  %t = linalg.transpose ins(%w : tensor<?x32xf32>) outs(%et : tensor<32x?xf32>) permutation = [1, 0]
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%x, %t : tensor<?x32xf32>, tensor<32x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
