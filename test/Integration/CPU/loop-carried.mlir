// A loop-carried activation the body recomputes into a new tensor each
// iteration (h = h·W three times, as a recurrent or weight-tied stack
// writes it): bufferization yields a fresh buffer per iteration
// (allow-return-allocs-from-loops) and frees the previous one. Before, this
// was rejected ("Yield operand #0 is not equivalent to the corresponding
// iter bbArg").
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 5 x:7x16:f32 w:16x16:f32:0.3
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --output=@%t/h.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --input=@%t/in/x.npy --input=@%t/in/w.npy --output=@%t/h0.npy
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x @ w @ w @ w" %t/h.npy %t/h0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 3
// NUM-COUNT-2: OK
// NUM-NOT: FAIL

func.func @main(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %z = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%h = %x) -> (tensor<?x16xf32>) {
    %m = tensor.dim %h, %c0 : tensor<?x16xf32>
    %e = tensor.empty(%m) : tensor<?x16xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
    %y = linalg.matmul ins(%h, %w : tensor<?x16xf32>, tensor<16x16xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
    scf.yield %y : tensor<?x16xf32>
  }
  return %r : tensor<?x16xf32>
}
