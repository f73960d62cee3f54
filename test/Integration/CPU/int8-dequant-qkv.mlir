// Quantized Q/K/V as a quantized model computes them: i8 x i8 -> i32
// matmuls sharing x, an i32 bias each, then dequantization to f32 by a
// per-channel weight scale and a per-tensor activation scale. Optimized:
// ONE s8 GEMM, then one bias-add and one dequantization over the merged
// result (biases and scales concatenated like the weights); --no-optimize:
// three of each. Both against numpy (f64): rtol 1e-6 holds for the f32
// dequantization of exact i32 sums.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 23 x:9x256:i8 wq:64x256:i8 wk:32x256:i8 wv:32x256:i8 bq:64:i32 bk:32:i32 bv:32:i32 sq:64:f32:0.01 sk:32:f32:0.01 sv:32:f32:0.01
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/sq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/sk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --input=@%t/in/sv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/sq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/sk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --input=@%t/in/sv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-6 --expect "(x @ wq.T + bq) * sq * 0.0125" --expect "(x @ wk.T + bk) * sk * 0.0125" --expect "(x @ wv.T + bv) * sv * 0.0125" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM
// RUN: linfuse-opt %s --linfuse-optimize | FileCheck %s --check-prefix=IR

// OPT: gemm_calls: 1
// OPT-NEXT: kernel_launches: 1
// REF: gemm_calls: 3
// REF-NEXT: kernel_launches: 3
// NUM-COUNT-6: OK
// IR-COUNT-1: linalg.matmul
// IR-NOT:     linalg.matmul
// IR-COUNT-1: arith.addi %{{.*}}, %{{.*}} : i32
// IR-NOT:     arith.addi %{{.*}}, %{{.*}} : i32
// IR-COUNT-1: arith.sitofp
// IR-NOT:     arith.sitofp

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<?x256xi8>,
    %wq: tensor<64x256xi8> {linfuse.weight}, %bq: tensor<64xi32> {linfuse.weight}, %sq: tensor<64xf32> {linfuse.weight},
    %wk: tensor<32x256xi8> {linfuse.weight}, %bk: tensor<32xi32> {linfuse.weight}, %sk: tensor<32xf32> {linfuse.weight},
    %wv: tensor<32x256xi8> {linfuse.weight}, %bv: tensor<32xi32> {linfuse.weight}, %sv: tensor<32xf32> {linfuse.weight})
    -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %q = call @project(%x, %wq, %bq, %sq) : (tensor<?x256xi8>, tensor<64x256xi8>, tensor<64xi32>, tensor<64xf32>) -> tensor<?x64xf32>
  %k = call @project_kv(%x, %wk, %bk, %sk) : (tensor<?x256xi8>, tensor<32x256xi8>, tensor<32xi32>, tensor<32xf32>) -> tensor<?x32xf32>
  %v = call @project_kv(%x, %wv, %bv, %sv) : (tensor<?x256xi8>, tensor<32x256xi8>, tensor<32xi32>, tensor<32xf32>) -> tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// y = (x @ w.T + b) * s * 0.0125, as a quantized Linear computes it.
func.func private @project(%x: tensor<?x256xi8>, %w: tensor<64x256xi8>, %b: tensor<64xi32>, %s: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %xs = arith.constant 0.0125 : f32
  %m = tensor.dim %x, %c0 : tensor<?x256xi8>
  %e = tensor.empty(%m) : tensor<?x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x64xi32>) -> tensor<?x64xi32>
  %acc = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %w : tensor<?x256xi8>, tensor<64x256xi8>) outs(%f : tensor<?x64xi32>) -> tensor<?x64xi32>
  %biased = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %b : tensor<?x64xi32>, tensor<64xi32>) outs(%e : tensor<?x64xi32>) {
  ^bb0(%a: i32, %bb: i32, %o: i32):
    %sum = arith.addi %a, %bb : i32
    linalg.yield %sum : i32
  } -> tensor<?x64xi32>
  %ef = tensor.empty(%m) : tensor<?x64xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%biased, %s : tensor<?x64xi32>, tensor<64xf32>) outs(%ef : tensor<?x64xf32>) {
  ^bb0(%a: i32, %sc: f32, %o: f32):
    %fa = arith.sitofp %a : i32 to f32
    %t = arith.mulf %fa, %sc : f32
    %u = arith.mulf %t, %xs : f32
    linalg.yield %u : f32
  } -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

func.func private @project_kv(%x: tensor<?x256xi8>, %w: tensor<32x256xi8>, %b: tensor<32xi32>, %s: tensor<32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %xs = arith.constant 0.0125 : f32
  %m = tensor.dim %x, %c0 : tensor<?x256xi8>
  %e = tensor.empty(%m) : tensor<?x32xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x32xi32>) -> tensor<?x32xi32>
  %acc = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %w : tensor<?x256xi8>, tensor<32x256xi8>) outs(%f : tensor<?x32xi32>) -> tensor<?x32xi32>
  %biased = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %b : tensor<?x32xi32>, tensor<32xi32>) outs(%e : tensor<?x32xi32>) {
  ^bb0(%a: i32, %bb: i32, %o: i32):
    %sum = arith.addi %a, %bb : i32
    linalg.yield %sum : i32
  } -> tensor<?x32xi32>
  %ef = tensor.empty(%m) : tensor<?x32xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%biased, %s : tensor<?x32xi32>, tensor<32xf32>) outs(%ef : tensor<?x32xf32>) {
  ^bb0(%a: i32, %sc: f32, %o: f32):
    %fa = arith.sitofp %a : i32 to f32
    %t = arith.mulf %fa, %sc : f32
    %u = arith.mulf %t, %xs : f32
    linalg.yield %u : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
