// Every spelling of a contraction runs through the library GEMM, none as
// loops: a batch generic with a K-major left operand (and its multiply
// written b * a + acc), a batch_matvec of dynamic batch with f16 inputs and
// an f32 accumulator, a vecmat, a linalg.contract producing the
// transposed result, attention scores with two batch dims (batch, heads),
// and two linear layers on [batch, seq, hidden] (two M loops) sharing
// their input, which merge. Optimized and not, against numpy.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 37 x:2x6x3:f32 w:2x6x5:f32 a:3x5x6:f16 v:3x6:f16 u:6:f32 m:6x4:f32 p:3x4:f32 q:4x5:f32 aq:2x3x4x5:f32 ak:2x3x6x5:f32 h:2x3x8:f32 w1:6x8:f32 w2:4x8:f32
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/a.npy --input=@%t/in/v.npy --input=@%t/in/u.npy --input=@%t/in/m.npy --input=@%t/in/p.npy --input=@%t/in/q.npy --input=@%t/in/aq.npy --input=@%t/in/ak.npy --input=@%t/in/h.npy --input=@%t/in/w1.npy --input=@%t/in/w2.npy --output=@%t/r.npy --output=@%t/y.npy --output=@%t/z.npy --output=@%t/t.npy --output=@%t/s.npy --output=@%t/l1.npy --output=@%t/l2.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/w.npy --input=@%t/in/a.npy --input=@%t/in/v.npy --input=@%t/in/u.npy --input=@%t/in/m.npy --input=@%t/in/p.npy --input=@%t/in/q.npy --input=@%t/in/aq.npy --input=@%t/in/ak.npy --input=@%t/in/h.npy --input=@%t/in/w1.npy --input=@%t/in/w2.npy --output=@%t/r0.npy --output=@%t/y0.npy --output=@%t/z0.npy --output=@%t/t0.npy --output=@%t/s0.npy --output=@%t/l10.npy --output=@%t/l20.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-5 --expect "x.transpose(0, 2, 1) @ w" --expect "np.einsum('bnk,bk->bn', a, v)" --expect "u @ m" --expect "(p @ q).T" --expect "aq @ ak.transpose(0, 1, 3, 2)" --expect "h @ w1.T" --expect "h @ w2.T" %t/r.npy %t/y.npy %t/z.npy %t/t.npy %t/s.npy %t/l1.npy %t/l2.npy %t/r0.npy %t/y0.npy %t/z0.npy %t/t0.npy %t/s0.npy %t/l10.npy %t/l20.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 6
// OPT: loop_calls: 0
// REF: gemm_calls: 7
// REF: loop_calls: 0
// NUM-COUNT-14: OK

func.func @main(%x: tensor<2x6x3xf32>, %w: tensor<2x6x5xf32>, %a: tensor<?x5x6xf16>, %v: tensor<?x6xf16>,
                %u: tensor<6xf32>, %m: tensor<6x4xf32>, %p: tensor<3x4xf32>, %q: tensor<4x5xf32>,
                %aq: tensor<2x3x4x5xf32>, %ak: tensor<2x3x6x5xf32>, %h: tensor<2x3x8xf32>,
                %w1: tensor<6x8xf32>, %w2: tensor<4x8xf32>)
    -> (tensor<2x3x5xf32>, tensor<?x5xf32>, tensor<4xf32>, tensor<5x3xf32>, tensor<2x3x4x6xf32>,
        tensor<2x3x6xf32>, tensor<2x3x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, k, m)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
    ins(%x, %w : tensor<2x6x3xf32>, tensor<2x6x5xf32>) outs(%f : tensor<2x3x5xf32>) {
  ^bb0(%s0: f32, %s1: f32, %acc: f32):
    %mul = arith.mulf %s1, %s0 : f32
    %sum = arith.addf %mul, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<2x3x5xf32>
  %b = tensor.dim %a, %c0 : tensor<?x5x6xf16>
  %e2 = tensor.empty(%b) : tensor<?x5xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x5xf32>) -> tensor<?x5xf32>
  %y = linalg.batch_matvec ins(%a, %v : tensor<?x5x6xf16>, tensor<?x6xf16>) outs(%f2 : tensor<?x5xf32>) -> tensor<?x5xf32>
  %e3 = tensor.empty() : tensor<4xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4xf32>) -> tensor<4xf32>
  %z = linalg.vecmat ins(%u, %m : tensor<6xf32>, tensor<6x4xf32>) outs(%f3 : tensor<4xf32>) -> tensor<4xf32>
  %e4 = tensor.empty() : tensor<5x3xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<5x3xf32>) -> tensor<5x3xf32>
  %t = linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (n, m)>]
    ins(%p, %q : tensor<3x4xf32>, tensor<4x5xf32>) outs(%f4 : tensor<5x3xf32>) -> tensor<5x3xf32>
  %e5 = tensor.empty() : tensor<2x3x4x6xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<2x3x4x6xf32>) -> tensor<2x3x4x6xf32>
  %sc = linalg.contract indexing_maps = [affine_map<(b, h, m, n, d) -> (b, h, m, d)>, affine_map<(b, h, m, n, d) -> (b, h, n, d)>, affine_map<(b, h, m, n, d) -> (b, h, m, n)>]
    ins(%aq, %ak : tensor<2x3x4x5xf32>, tensor<2x3x6x5xf32>) outs(%f5 : tensor<2x3x4x6xf32>) -> tensor<2x3x4x6xf32>
  %e6 = tensor.empty() : tensor<2x3x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %l1 = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
    ins(%h, %w1 : tensor<2x3x8xf32>, tensor<6x8xf32>) outs(%f6 : tensor<2x3x6xf32>) {
  ^bb0(%s0: f32, %s1: f32, %acc: f32):
    %mul = arith.mulf %s0, %s1 : f32
    %sum = arith.addf %acc, %mul : f32
    linalg.yield %sum : f32
  } -> tensor<2x3x6xf32>
  %e7 = tensor.empty() : tensor<2x3x4xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %l2 = linalg.generic {indexing_maps = [affine_map<(b, s, n, k) -> (b, s, k)>, affine_map<(b, s, n, k) -> (n, k)>, affine_map<(b, s, n, k) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
    ins(%h, %w2 : tensor<2x3x8xf32>, tensor<4x8xf32>) outs(%f7 : tensor<2x3x4xf32>) {
  ^bb0(%s0: f32, %s1: f32, %acc: f32):
    %mul = arith.mulf %s0, %s1 : f32
    %sum = arith.addf %acc, %mul : f32
    linalg.yield %sum : f32
  } -> tensor<2x3x4xf32>
  return %r, %y, %z, %t, %sc, %l1, %l2 : tensor<2x3x5xf32>, tensor<?x5xf32>, tensor<4xf32>, tensor<5x3xf32>, tensor<2x3x4x6xf32>,
      tensor<2x3x6xf32>, tensor<2x3x4xf32>
}
