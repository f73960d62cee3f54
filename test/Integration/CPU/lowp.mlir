// f16 and bf16 end to end: a bf16 linear layer with bias and GELU (raised
// into one runtime GEMM: f32 accumulation, epilogue, one rounding) and f16
// element-wise math that is not an epilogue (erf, tanh: computed in f32 by
// the lowering, since libm has no f16 erf), against numpy at the types'
// precision; optimized and not.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 6 x:5x32:bf16 w:32x24:bf16:0.2 b:24:bf16 h:3x7:f16
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --input=@%t/in/h.npy --output=@%t/y.npy --output=@%t/z.npy | FileCheck %s
// RUN: linfuse-run %s --no-optimize --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/b.npy --input=@%t/in/h.npy --output=@%t/y0.npy --output=@%t/z0.npy
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-2 --expect "gelu_erf(x @ w + b)" %t/y.npy %t/y0.npy | FileCheck %s --check-prefix=NUM
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 2e-3 --expect "np.tanh(np.vectorize(__import__('math').erf)(h)) + h" %t/z.npy %t/z0.npy | FileCheck %s --check-prefix=NUM

// CHECK: gemm_calls: 1
// NUM-COUNT-2: OK

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<5x32xbf16>, %w: tensor<32x24xbf16>, %b: tensor<24xbf16>, %h: tensor<3x7xf16>)
    -> (tensor<5x24xbf16>, tensor<3x7xf16>) {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<5x24xbf16>
  %f = linalg.fill ins(%zero : bf16) outs(%e : tensor<5x24xbf16>) -> tensor<5x24xbf16>
  %y = linalg.matmul ins(%x, %w : tensor<5x32xbf16>, tensor<32x24xbf16>) outs(%f : tensor<5x24xbf16>) -> tensor<5x24xbf16>
  %yb = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<5x24xbf16>, tensor<24xbf16>) outs(%e : tensor<5x24xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %o: bf16):
    %s = arith.addf %p, %q : bf16
    linalg.yield %s : bf16
  } -> tensor<5x24xbf16>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<5x24xbf16>) outs(%e : tensor<5x24xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %v = arith.extf %in : bf16 to f32
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %rs2 = arith.constant 0.707106769 : f32
    %t = arith.mulf %v, %rs2 : f32
    %er = math.erf %t : f32
    %p1 = arith.addf %er, %one : f32
    %hv = arith.mulf %v, %half : f32
    %r = arith.mulf %hv, %p1 : f32
    %rb = arith.truncf %r : f32 to bf16
    linalg.yield %rb : bf16
  } -> tensor<5x24xbf16>
  %eh = tensor.empty() : tensor<3x7xf16>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<3x7xf16>) outs(%eh : tensor<3x7xf16>) {
  ^bb0(%in: f16, %o: f16):
    %t = math.erf %in : f16
    %u = math.tanh %t : f16
    %v = arith.addf %u, %in : f16
    linalg.yield %v : f16
  } -> tensor<3x7xf16>
  return %g, %z : tensor<5x24xbf16>, tensor<3x7xf16>
}
