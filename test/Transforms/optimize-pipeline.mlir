// RUN: linfuse-opt %s -split-input-file --linfuse-optimize | FileCheck %s
// The result uses upstream ops only: Debian's own mlir-opt re-parses and
// verifies it.
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize | %mlir-opt -split-input-file --verify-each | FileCheck %s --check-prefix=UPSTREAM
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// Must show: 3 x nn.Linear with bias on a dynamic batch, torch-mlir style
// (transposed constant weights, bias as linalg.generic) leaves exactly one
// matmul; weights and biases are concatenated at compile time, every value
// in place.
// CHECK-LABEL: func.func @qkv_constants
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[B:.*]] = arith.constant dense<[5.000000e-01, -5.000000e-01, 1.500000e+00, 2.500000e+00]> : tensor<4xf32>
// CHECK-DAG:     %[[W:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00], [7.000000e+00, 8.000000e+00]]> : tensor<4x2xf32>
// CHECK-NOT:     linalg.transpose
// CHECK-NOT:     tensor.concat
// CHECK:         %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<?x2xf32>, tensor<4x2xf32>) outs(%{{.*}} : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[B]] : tensor<?x4xf32>, tensor<4xf32>)
// CHECK:         %[[Q:.*]] = tensor.extract_slice %[[ADD]][0, 0] [%{{.*}}, 2] [1, 1] : tensor<?x4xf32> to tensor<?x2xf32>
// CHECK-NEXT:    %[[K:.*]] = tensor.extract_slice %[[ADD]][0, 2] [%{{.*}}, 1] [1, 1] : tensor<?x4xf32> to tensor<?x1xf32>
// CHECK-NEXT:    %[[V:.*]] = tensor.extract_slice %[[ADD]][0, 3] [%{{.*}}, 1] [1, 1] : tensor<?x4xf32> to tensor<?x1xf32>
// CHECK-NEXT:    return %[[Q]], %[[K]], %[[V]]
// UPSTREAM-LABEL: func.func @qkv_constants
// UPSTREAM-COUNT-1: linalg.matmul
// UPSTREAM-NOT:     linalg.matmul
// UPSTREAM:         return
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @qkv_constants(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %wq = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %bq = arith.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %tq_e = tensor.empty() : tensor<2x2xf32>
  %tq = linalg.transpose ins(%wq : tensor<2x2xf32>) outs(%tq_e : tensor<2x2xf32>) permutation = [1, 0]
  %eq = tensor.empty(%m) : tensor<?x2xf32>
  %fq = linalg.fill ins(%zero : f32) outs(%eq : tensor<?x2xf32>) -> tensor<?x2xf32>
  %q0 = linalg.matmul ins(%x, %tq : tensor<?x2xf32>, tensor<2x2xf32>) outs(%fq : tensor<?x2xf32>) -> tensor<?x2xf32>
  %q = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%q0, %bq : tensor<?x2xf32>, tensor<2xf32>) outs(%eq : tensor<?x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x2xf32>
  %wk = arith.constant dense<[[5.0, 6.0]]> : tensor<1x2xf32>
  %bk = arith.constant dense<[1.5]> : tensor<1xf32>
  %tk_e = tensor.empty() : tensor<2x1xf32>
  %tk = linalg.transpose ins(%wk : tensor<1x2xf32>) outs(%tk_e : tensor<2x1xf32>) permutation = [1, 0]
  %ek = tensor.empty(%m) : tensor<?x1xf32>
  %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x1xf32>) -> tensor<?x1xf32>
  %k0 = linalg.matmul ins(%x, %tk : tensor<?x2xf32>, tensor<2x1xf32>) outs(%fk : tensor<?x1xf32>) -> tensor<?x1xf32>
  %k = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%k0, %bk : tensor<?x1xf32>, tensor<1xf32>) outs(%ek : tensor<?x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %wv = arith.constant dense<[[7.0, 8.0]]> : tensor<1x2xf32>
  %bv = arith.constant dense<[2.5]> : tensor<1xf32>
  %tv_e = tensor.empty() : tensor<2x1xf32>
  %tv = linalg.transpose ins(%wv : tensor<1x2xf32>) outs(%tv_e : tensor<2x1xf32>) permutation = [1, 0]
  %v0 = linalg.matmul ins(%x, %tv : tensor<?x2xf32>, tensor<2x1xf32>) outs(%fk : tensor<?x1xf32>) -> tensor<?x1xf32>
  %v = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%v0, %bv : tensor<?x1xf32>, tensor<1xf32>) outs(%ek : tensor<?x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  return %q, %k, %v : tensor<?x2xf32>, tensor<?x1xf32>, tensor<?x1xf32>
}

// -----

// Runtime weights (function arguments): the concatenation stays a
// tensor.concat for the weight-packing step; still one matmul.
// CHECK-LABEL: func.func @qkv_runtime_weights
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xbf16>, %[[WQ:.*]]: tensor<8x8xbf16>, %[[WK:.*]]: tensor<4x8xbf16>, %[[WV:.*]]: tensor<4x8xbf16>)
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<8x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<16x8xbf16>
// CHECK:         linalg.matmul {{.*}} ins(%[[X]], %[[W]] : tensor<?x8xbf16>, tensor<16x8xbf16>) {{.*}} -> tensor<?x16xf32>
// CHECK-NOT:     linalg.matmul
// CHECK:         return
// UPSTREAM-LABEL: func.func @qkv_runtime_weights
// UPSTREAM-COUNT-1: linalg.matmul
// UPSTREAM-NOT:     linalg.matmul
// UPSTREAM:         return
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @qkv_runtime_weights(%x: tensor<?x8xbf16>, %wq: tensor<8x8xbf16>, %wk: tensor<4x8xbf16>, %wv: tensor<4x8xbf16>) -> (tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xbf16>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %e4 = tensor.empty(%m) : tensor<?x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %q = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wq : tensor<?x8xbf16>, tensor<8x8xbf16>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %k = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wk : tensor<?x8xbf16>, tensor<4x8xbf16>) outs(%f4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %v = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wv : tensor<?x8xbf16>, tensor<4x8xbf16>) outs(%f4 : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %q, %k, %v : tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}


// -----

// LoRA beside a second projection of the same input: the chain folding runs
// first, so x·W and x·A are not merged with each other; W + 0.5·A·B is
// folded, then merged with the other projection: one matmul in the end.
// CHECK-LABEL: func.func @lora_then_merge
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[W:.*]] = arith.constant dense<{{\[}}[3.000000e+00, 4.000000e+00, 1.000000e+00], [4.000000e+00, 9.000000e+00, 1.000000e+00]]> : tensor<2x3xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x2xf32>, tensor<2x3xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         tensor.extract_slice %[[MM]][0, 0] [%{{.*}}, 2] [1, 1]
// CHECK:         tensor.extract_slice %[[MM]][0, 2] [%{{.*}}, 1] [1, 1]
// UPSTREAM-LABEL: func.func @lora_then_merge
// UPSTREAM-COUNT-1: linalg.matmul
// UPSTREAM-NOT:     linalg.matmul
// UPSTREAM:         return
func.func @lora_then_merge(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %half = arith.constant dense<0.5> : tensor<2xf32>
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %w = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %la = arith.constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
  %lb = arith.constant dense<[[4.0, 8.0]]> : tensor<1x2xf32>
  %wo = arith.constant dense<[[1.0], [1.0]]> : tensor<2x1xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1 = tensor.empty(%m) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xa = linalg.matmul ins(%x, %la : tensor<?x2xf32>, tensor<2x1xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %xab = linalg.matmul ins(%xa, %lb : tensor<?x1xf32>, tensor<1x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %hb = linalg.broadcast ins(%half : tensor<2xf32>) outs(%e : tensor<?x2xf32>) dimensions = [0]
  %s = linalg.mul ins(%xab, %hb : tensor<?x2xf32>, tensor<?x2xf32>) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y = linalg.add ins(%xw, %s : tensor<?x2xf32>, tensor<?x2xf32>) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %o = linalg.matmul ins(%x, %wo : tensor<?x2xf32>, tensor<2x1xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  return %y, %o : tensor<?x2xf32>, tensor<?x1xf32>
}

// Statistics over the whole file. Fold: the LoRA sum (3 matmuls -> 1).
// Merge: 32 + 256 + 24 (LoRA-folded W and W_o) + 1024 (@through_calls'
// two 8x16 f32 weights) bytes of weights concatenated. Constant folding: the Q/K/V weights (32 B) and biases
// (16 B), and the [2x3] merged LoRA weight (24 B).
// STATS: linfuse-fold-matmul-chains
// STATS-NEXT: (S) 0 chains-folded
// STATS-NEXT: (S) 1 sums-folded
// STATS-NEXT: (S) 0 scales-folded
// STATS-NEXT: (S) 0 shifts-folded
// STATS-NEXT: (S) 2 matmuls-removed
// STATS-NEXT: linfuse-merge-parallel-matmuls
// STATS-NEXT: (S) 4 groups-merged
// STATS-NEXT: (S) 6 matmuls-removed
// STATS-NEXT: (S) 1336 bytes-concatenated
// STATS-NEXT: (S) 0 epilogues-merged
// STATS-NEXT: linfuse-fold-constant-weights
// STATS-NEXT: (S) 3 constants-folded
// STATS-NEXT: (S) 72 bytes-folded

// -----

// Matmuls behind calls: the pipeline inlines first, so projections written
// through a private helper merge, and the helper (now unused) is gone. A
// declaration (no body) is left alone.
// CHECK-LABEL: func.func @through_calls
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W0:.*]]: tensor<8x16xf32>, %[[W1:.*]]: tensor<8x16xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x32xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[A:.*]] = tensor.extract_slice %[[MM]][0, 0] [4, 16]
// CHECK:         call @opaque(%[[A]])
// CHECK-NOT:     func.func private @proj
func.func private @proj(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
func.func private @opaque(tensor<4x16xf32>)
func.func @through_calls(%x: tensor<4x8xf32>, %w0: tensor<8x16xf32>, %w1: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %a = func.call @proj(%x, %w0) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = func.call @proj(%x, %w1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.call @opaque(%a) : (tensor<4x16xf32>) -> ()
  return %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
}
