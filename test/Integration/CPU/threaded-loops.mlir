// Element-wise loops on the runtime's thread pool
// (--linfuse-thread-parallel-loops): a LLaMA block's RMSNorm (a reduction
// per row), the SwiGLU product over a merged gate/up result (slices), the
// residual add, over ?x?x256 activations; and a 1-d loop (a vector
// scaled). With 2 x 150 positions the loops over activations have enough
// work to run on several threads; LINFUSE_NUM_THREADS=1 runs the same code
// on one, and 3 threads split rows unevenly. All three agree
// with numpy (float64) and the threaded runs count their loops.
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 3 x:2x150x256:f32 g:256:f32 wg:512x256:f32:0.06 wu:512x256:f32:0.06 wd:256x512:f32:0.05 b:40000:f32
// RUN: env LINFUSE_NUM_THREADS=2 linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/g.npy --input=@%t/in/wg.npy --input=@%t/in/wu.npy --input=@%t/in/wd.npy --input=@%t/in/b.npy --output=@%t/y2.npy --output=@%t/c2.npy | FileCheck %s --check-prefix=TWO
// RUN: env LINFUSE_NUM_THREADS=1 linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/g.npy --input=@%t/in/wg.npy --input=@%t/in/wu.npy --input=@%t/in/wd.npy --input=@%t/in/b.npy --output=@%t/y1.npy --output=@%t/c1.npy | FileCheck %s --check-prefix=ONE
// RUN: env LINFUSE_NUM_THREADS=3 linfuse-run %s --input=@%t/in/x.npy --input=@%t/in/g.npy --input=@%t/in/wg.npy --input=@%t/in/wu.npy --input=@%t/in/wd.npy --input=@%t/in/b.npy --output=@%t/y3.npy --output=@%t/c3.npy
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 2e-5 --expect "x + (silu((x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g) @ wg.T) * ((x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g) @ wu.T)) @ wd.T" --expect "b * 2.0" %t/y1.npy %t/c1.npy %t/y2.npy %t/c2.npy %t/y3.npy %t/c3.npy | FileCheck %s --check-prefix=NUM

// Six loops: the sums of squares' zero fill (300 elements: on the calling
// thread), the sums, the normalization, SwiGLU, the residual add, the 1-d.
// TWO: gemm_calls: 2
// TWO: loop_calls: 6
// TWO-NEXT: threaded_loop_calls: 5
// ONE: loop_calls: 6
// ONE-NEXT: threaded_loop_calls: 0
// NUM-COUNT-6: OK

#row = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
#vec = affine_map<(d0, d1, d2) -> (d2)>
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<?x?x256xf32>, %g: tensor<256xf32>,
                %wg: tensor<512x256xf32> {linfuse.weight},
                %wu: tensor<512x256xf32> {linfuse.weight},
                %wd: tensor<256x512xf32> {linfuse.weight},
                %b: tensor<40000xf32>)
    -> (tensor<?x?x256xf32>, tensor<40000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %n = arith.constant 256.0 : f32
  %eps = arith.constant 1.0e-6 : f32
  %bs = tensor.dim %x, %c0 : tensor<?x?x256xf32>
  %sq = tensor.dim %x, %c1 : tensor<?x?x256xf32>
  // RMSNorm: sum of squares per row, then x * rsqrt(mean + eps) * g.
  %es = tensor.empty(%bs, %sq) : tensor<?x?xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<?x?xf32>) -> tensor<?x?xf32>
  %ss = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<?x?x256xf32>) outs(%fs : tensor<?x?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %e = tensor.empty(%bs, %sq) : tensor<?x?x256xf32>
  %h = linalg.generic {indexing_maps = [#row, #red, #vec, #row], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %ss, %g : tensor<?x?x256xf32>, tensor<?x?xf32>, tensor<256xf32>) outs(%e : tensor<?x?x256xf32>) {
  ^bb0(%a: f32, %s: f32, %gg: f32, %o: f32):
    %m = arith.divf %s, %n : f32
    %me = arith.addf %m, %eps : f32
    %r = math.rsqrt %me : f32
    %ar = arith.mulf %a, %r : f32
    %v = arith.mulf %ar, %gg : f32
    linalg.yield %v : f32
  } -> tensor<?x?x256xf32>
  // SwiGLU MLP over the rows (gate and up merge), back to ?x?x256.
  %h2 = tensor.collapse_shape %h [[0, 1], [2]] : tensor<?x?x256xf32> into tensor<?x256xf32>
  %m = tensor.dim %h2, %c0 : tensor<?x256xf32>
  %e5 = tensor.empty(%m) : tensor<?x512xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<?x512xf32>) -> tensor<?x512xf32>
  %gt = linalg.matmul indexing_maps = [#x, #w, #y] ins(%h2, %wg : tensor<?x256xf32>, tensor<512x256xf32>) outs(%f5 : tensor<?x512xf32>) -> tensor<?x512xf32>
  %up = linalg.matmul indexing_maps = [#x, #w, #y] ins(%h2, %wu : tensor<?x256xf32>, tensor<512x256xf32>) outs(%f5 : tensor<?x512xf32>) -> tensor<?x512xf32>
  %act = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%gt, %up : tensor<?x512xf32>, tensor<?x512xf32>) outs(%e5 : tensor<?x512xf32>) {
  ^bb0(%a: f32, %u: f32, %o: f32):
    %neg = arith.negf %a : f32
    %ex = math.exp %neg : f32
    %den = arith.addf %ex, %one : f32
    %sg = arith.divf %a, %den : f32
    %v = arith.mulf %sg, %u : f32
    linalg.yield %v : f32
  } -> tensor<?x512xf32>
  %e2 = tensor.empty(%m) : tensor<?x256xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x256xf32>) -> tensor<?x256xf32>
  %dn2 = linalg.matmul indexing_maps = [#x, #w, #y] ins(%act, %wd : tensor<?x512xf32>, tensor<256x512xf32>) outs(%f2 : tensor<?x256xf32>) -> tensor<?x256xf32>
  %dn = tensor.expand_shape %dn2 [[0, 1], [2]] output_shape [%bs, %sq, 256] : tensor<?x256xf32> into tensor<?x?x256xf32>
  %out = linalg.generic {indexing_maps = [#row, #row, #row], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %dn : tensor<?x?x256xf32>, tensor<?x?x256xf32>) outs(%e : tensor<?x?x256xf32>) {
  ^bb0(%a: f32, %d: f32, %o: f32):
    %v = arith.addf %a, %d : f32
    linalg.yield %v : f32
  } -> tensor<?x?x256xf32>
  // A 1-d loop of 40000 iterations: split in aligned chunks.
  %eb = tensor.empty() : tensor<40000xf32>
  %cb = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%b : tensor<40000xf32>) outs(%eb : tensor<40000xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %two : f32
    linalg.yield %v : f32
  } -> tensor<40000xf32>
  return %out, %cb : tensor<?x?x256xf32>, tensor<40000xf32>
}
