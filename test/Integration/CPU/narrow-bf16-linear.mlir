// A bf16 Linear with bias spelled in f32, as torch-mlir emits it: x, W and
// b widened to f32, an f32 matmul and bias-add, the result truncated to
// bf16. It runs as ONE bf16 x bf16 -> bf16 library GEMM with a bf16 bias
// (f32 accumulation, rounded once): no widening and no truncation loops,
// optimized or not. Against numpy on the bf16 inputs (rtol 1e-2, bf16
// results).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 31 x:5x64:bf16 w:48x64:bf16:0.2 b:48:bf16
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --output=@%t/y.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --output=@%t/y0.npy
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-2 --expect "x @ w.T + b" %t/y.npy %t/y0.npy | FileCheck %s --check-prefix=NUM
// RUN: linfuse-opt %s --linfuse-optimize --linfuse-lower-to-cpu | FileCheck %s --check-prefix=CALL
// RUN: linfuse-opt %s --linfuse-lower-to-cpu | FileCheck %s --check-prefix=CALL

// OPT: gemm_calls: 1
// OPT-NEXT: kernel_launches: 1
// OPT-NEXT: fallback_gemm_calls: 0
// NUM-COUNT-2: OK
// CALL-LABEL: llvm.func @main
// CALL-NOT:   llvm.fpext
// CALL-NOT:   llvm.fptrunc
// CALL:       llvm.call @linfuse_cpu_gemm_bf16_bf16
// CALL-NOT:   llvm.fptrunc
// CALL:       llvm.return

#id = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%x: tensor<?x64xbf16>, %w: tensor<48x64xbf16>, %b: tensor<48xbf16>) -> tensor<?x48xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %xe = tensor.empty(%m) : tensor<?x64xf32>
  %xf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x64xbf16>) outs(%xe : tensor<?x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<?x64xf32>
  %we = tensor.empty() : tensor<48x64xf32>
  %wf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<48x64xbf16>) outs(%we : tensor<48x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<48x64xf32>
  %be = tensor.empty() : tensor<48xf32>
  %bf = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b : tensor<48xbf16>) outs(%be : tensor<48xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<48xf32>
  %e = tensor.empty(%m) : tensor<?x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x48xf32>) -> tensor<?x48xf32>
  %y = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xf, %wf : tensor<?x64xf32>, tensor<48x64xf32>) outs(%f : tensor<?x48xf32>) -> tensor<?x48xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %bf : tensor<?x48xf32>, tensor<48xf32>) outs(%e : tensor<?x48xf32>) {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %s = arith.addf %a, %bb : f32
    linalg.yield %s : f32
  } -> tensor<?x48xf32>
  %he = tensor.empty(%m) : tensor<?x48xbf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<?x48xf32>) outs(%he : tensor<?x48xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x48xbf16>
  return %h : tensor<?x48xbf16>
}
