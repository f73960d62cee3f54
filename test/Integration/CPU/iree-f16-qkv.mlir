// Must show: an IREE-style f16 contraction triple (linalg.generic with the
// f16 inputs extended to f32 in the body, accumulated in f32, then a
// truncf generic to f16), Q/K/V sharing x with nn.Linear weights, merges
// into ONE library GEMM (f16 x f16 -> f32, the accumulation kept) and runs;
// --no-optimize runs one GEMM per contraction (not scalar loops). Both
// against numpy (f64 products of the f16 inputs): rtol 1e-3 holds for f32
// accumulation rounded once to f16 (3e-4 here), not for accumulating in f16
// (3e-3).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 17 x:7x256:f16 wq:64x256:f16:0.1 wk:16x256:f16:0.1 wv:16x256:f16:0.1
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefixes=OPT,OPT-%f16gemm
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefixes=REF,REF-%f16gemm
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-3 --expect "x @ wq.T" --expect "x @ wk.T" --expect "x @ wv.T" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM
// The merged GEMM, as the optimizer leaves it.
// RUN: linfuse-opt %s --linfuse-optimize | FileCheck %s --check-prefix=IR

// The library GEMM is oneDNN 3's f16 matmul where the CPU has f16 kernels
// (AVX512-FP16, AMX-FP16), else the runtime's widening fallback (AMD Zen 4).
// OPT: gemm_calls: 1
// OPT-NEXT: kernel_launches: 1
// OPT-F16NATIVE-NEXT: fallback_gemm_calls: 0
// OPT-F16WIDENED-NEXT: fallback_gemm_calls: 1
// REF: gemm_calls: 3
// REF-NEXT: kernel_launches: 3
// REF-F16NATIVE-NEXT: fallback_gemm_calls: 0
// REF-F16WIDENED-NEXT: fallback_gemm_calls: 3
// NUM-COUNT-6: OK
// IR-COUNT-1: linalg.matmul {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x256xf16>, tensor<96x256xf16>) outs(%{{.*}} : tensor<?x96xf32>) -> tensor<?x96xf32>
// IR-NOT:     linalg.matmul
// IR-COUNT-1: arith.truncf %{{.*}} : f32 to f16
// IR-NOT:     arith.truncf

#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<?x256xf16>, %wq: tensor<64x256xf16> {linfuse.weight},
                %wk: tensor<16x256xf16> {linfuse.weight}, %wv: tensor<16x256xf16> {linfuse.weight})
    -> (tensor<?x64xf16>, tensor<?x16xf16>, tensor<?x16xf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x256xf16>
  %e64 = tensor.empty(%m) : tensor<?x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %e16 = tensor.empty(%m) : tensor<?x16xf32>
  %f16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %q = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wq : tensor<?x256xf16>, tensor<64x256xf16>) outs(%f64 : tensor<?x64xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %k = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wk : tensor<?x256xf16>, tensor<16x256xf16>) outs(%f16 : tensor<?x16xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  %v = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wv : tensor<?x256xf16>, tensor<16x256xf16>) outs(%f16 : tensor<?x16xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  %h64 = tensor.empty(%m) : tensor<?x64xf16>
  %qh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
    ins(%q : tensor<?x64xf32>) outs(%h64 : tensor<?x64xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x64xf16>
  %h16 = tensor.empty(%m) : tensor<?x16xf16>
  %kh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
    ins(%k : tensor<?x16xf32>) outs(%h16 : tensor<?x16xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x16xf16>
  %vh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
    ins(%v : tensor<?x16xf32>) outs(%h16 : tensor<?x16xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x16xf16>
  return %qh, %kh, %vh : tensor<?x64xf16>, tensor<?x16xf16>, tensor<?x16xf16>
}
