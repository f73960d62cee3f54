// GEMM epilogues executed by the runtime: bias + GELU (erf), bias + ReLU,
// SiLU and GELU (tanh), against numpy. With --no-optimize each matmul is
// raised with its bias and activation into one linfuse.gemm (4 calls, no
// element-wise loops); optimized, CSE makes the four identical products
// one GEMM (1 call) whose result feeds four element-wise loops.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 5 x:9x24:f32 w:24x40:f32:0.3 b:40:f32
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --output=@%t/g.npy --output=@%t/r.npy --output=@%t/s.npy --output=@%t/t.npy | FileCheck %s --check-prefix=EPI
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --output=@%t/g1.npy --output=@%t/r1.npy --output=@%t/s1.npy --output=@%t/t1.npy | FileCheck %s --check-prefix=OPT
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "gelu_erf(x @ w + b)" --expect "relu(x @ w + b)" --expect "silu(x @ w)" --expect "gelu_tanh(x @ w)" %t/g.npy %t/r.npy %t/s.npy %t/t.npy %t/g1.npy %t/r1.npy %t/s1.npy %t/t1.npy | FileCheck %s --check-prefix=NUM
// RUN: linfuse-opt %s --linfuse-raise-to-gemm | FileCheck %s --check-prefix=IR

// EPI: gemm_calls: 4
// OPT: gemm_calls: 1
// NUM-COUNT-8: OK
// IR: linfuse.gemm {{.*}} bias(%arg2 : tensor<40xf32>) {{.*}} epilogue = <gelu_erf>
// IR: linfuse.gemm {{.*}} bias(%arg2 : tensor<40xf32>) {{.*}} epilogue = <relu>
// IR: linfuse.gemm {{.*}} epilogue = <silu>
// IR: linfuse.gemm {{.*}} epilogue = <gelu_tanh>
// IR-NOT: linalg.generic

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<9x24xf32>, %w: tensor<24x40xf32>, %b: tensor<40xf32>)
    -> (tensor<9x40xf32>, tensor<9x40xf32>, tensor<9x40xf32>, tensor<9x40xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<9x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<9x40xf32>) -> tensor<9x40xf32>
  %y1 = linalg.matmul ins(%x, %w : tensor<9x24xf32>, tensor<24x40xf32>) outs(%f : tensor<9x40xf32>) -> tensor<9x40xf32>
  %z1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y1, %b : tensor<9x40xf32>, tensor<40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<9x40xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%z1 : tensor<9x40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%in: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %rs2 = arith.constant 0.707106769 : f32
    %t = arith.mulf %in, %rs2 : f32
    %er = math.erf %t : f32
    %p1 = arith.addf %er, %one : f32
    %h = arith.mulf %in, %half : f32
    %r = arith.mulf %h, %p1 : f32
    linalg.yield %r : f32
  } -> tensor<9x40xf32>
  %y2 = linalg.matmul ins(%x, %w : tensor<9x24xf32>, tensor<24x40xf32>) outs(%f : tensor<9x40xf32>) -> tensor<9x40xf32>
  %z2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y2, %b : tensor<9x40xf32>, tensor<40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<9x40xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%z2 : tensor<9x40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%in: f32, %o: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<9x40xf32>
  %y3 = linalg.matmul ins(%x, %w : tensor<9x24xf32>, tensor<24x40xf32>) outs(%f : tensor<9x40xf32>) -> tensor<9x40xf32>
  %s3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y3 : tensor<9x40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%in: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %in : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %sg = arith.divf %one, %den : f32
    %r = arith.mulf %in, %sg : f32
    linalg.yield %r : f32
  } -> tensor<9x40xf32>
  %y4 = linalg.matmul ins(%x, %w : tensor<9x24xf32>, tensor<24x40xf32>) outs(%f : tensor<9x40xf32>) -> tensor<9x40xf32>
  %t4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y4 : tensor<9x40xf32>) outs(%e : tensor<9x40xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.044715 : f32
    %s = arith.constant 0.797884583 : f32
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %x2 = arith.mulf %in, %in : f32
    %x3 = arith.mulf %x2, %in : f32
    %cx3 = arith.mulf %x3, %c : f32
    %inner = arith.addf %in, %cx3 : f32
    %arg = arith.mulf %inner, %s : f32
    %th = math.tanh %arg : f32
    %tp = arith.addf %th, %one : f32
    %hx = arith.mulf %in, %half : f32
    %r = arith.mulf %hx, %tp : f32
    linalg.yield %r : f32
  } -> tensor<9x40xf32>
  return %g, %r2, %s3, %t4 : tensor<9x40xf32>, tensor<9x40xf32>, tensor<9x40xf32>, tensor<9x40xf32>
}
