// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains="policy=always" | FileCheck %s --check-prefix=ALWAYS
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains="policy=never" | FileCheck %s --check-prefix=NEVER
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Folded modules use upstream ops only and re-parse with Debian's mlir-opt.
// RUN: linfuse-opt %s -split-input-file --linfuse-fold-matmul-chains | %mlir-opt -split-input-file --verify-each -o /dev/null

// Must show: x·A·B with square 12x12 constants becomes one matmul
// (FLOPs per row 2·(12·12+12·12) = 576 → 288). Values: see
// fold-matmul-chains-numerics.test.
// CHECK-LABEL: func.func @square_12x12
// CHECK-SAME:    (%[[X:.*]]: tensor<?x12xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<{{.*}}> : tensor<12x12xf32>
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x12xf32>, tensor<12x12xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[R]]
// NEVER-LABEL: func.func @square_12x12
// NEVER-COUNT-2: linalg.matmul
// REMARK: remark: folded chain of 2 matmuls, FLOPs per row 2·(12·12+12·12) → 2·12·12
func.func @square_12x12(%x: tensor<?x12xf32>) -> tensor<?x12xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x12xf32>
  %a = arith.constant dense<[[3.0, 1.0, 1.0, 3.0, 1.0, 2.0, 2.0, -2.0, -3.0, -1.0, -2.0, 3.0], [3.0, -3.0, 0.0, 2.0, -3.0, 2.0, -3.0, 0.0, 2.0, -1.0, -1.0, -2.0], [2.0, -2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 3.0, 2.0, 2.0], [1.0, 1.0, -1.0, 3.0, 0.0, -2.0, 2.0, -2.0, 3.0, 1.0, -3.0, -3.0], [0.0, -3.0, -3.0, 0.0, 3.0, 0.0, 2.0, 3.0, 2.0, 1.0, 0.0, 0.0], [-2.0, 0.0, -1.0, -2.0, 3.0, -3.0, -3.0, -2.0, 3.0, 1.0, 3.0, -2.0], [2.0, -1.0, 0.0, -3.0, 1.0, 2.0, 1.0, -2.0, 0.0, -2.0, 3.0, 3.0], [-2.0, 0.0, 3.0, 2.0, 1.0, 1.0, -3.0, 2.0, 0.0, -3.0, -2.0, 0.0], [2.0, 0.0, 1.0, 3.0, 1.0, -1.0, 1.0, 1.0, -3.0, -3.0, 1.0, -1.0], [1.0, -1.0, -2.0, -2.0, -1.0, 2.0, -1.0, -1.0, 1.0, 3.0, -1.0, 1.0], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 3.0, -2.0, 0.0, 0.0, -1.0, -2.0], [-3.0, -1.0, 2.0, -3.0, -1.0, 3.0, 3.0, -2.0, -3.0, 1.0, -3.0, -1.0]]> : tensor<12x12xf32>
  %b = arith.constant dense<[[0.0, 3.0, -3.0, 1.0, 0.0, -3.0, 2.0, 2.0, 0.0, 3.0, 1.0, 3.0], [3.0, 0.0, -2.0, -2.0, 0.0, -2.0, 2.0, 3.0, -2.0, 0.0, -3.0, -2.0], [-1.0, 3.0, 3.0, 1.0, 1.0, 0.0, -3.0, -1.0, 3.0, -1.0, -2.0, -2.0], [1.0, -3.0, 3.0, 3.0, 0.0, 0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 2.0], [-3.0, -3.0, 2.0, -1.0, 2.0, -3.0, 3.0, -3.0, -1.0, 3.0, -3.0, 1.0], [2.0, -1.0, -3.0, 0.0, 0.0, 3.0, 1.0, -1.0, -3.0, 1.0, -2.0, 1.0], [3.0, -1.0, 3.0, 0.0, 0.0, 2.0, 2.0, 3.0, 3.0, -2.0, -1.0, 3.0], [-1.0, -3.0, 1.0, 2.0, 2.0, 2.0, 1.0, -3.0, 2.0, -1.0, 2.0, 2.0], [3.0, -3.0, 3.0, 1.0, 0.0, 2.0, 3.0, 0.0, -3.0, 2.0, -2.0, -2.0], [-2.0, -2.0, 3.0, -1.0, -3.0, -2.0, -1.0, -1.0, -1.0, 3.0, 3.0, 1.0], [3.0, -1.0, -3.0, -2.0, -3.0, 3.0, -2.0, 0.0, -2.0, 3.0, -2.0, 0.0], [3.0, 0.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 2.0, -1.0, 3.0, 3.0]]> : tensor<12x12xf32>
  %e = tensor.empty(%m) : tensor<?x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %xa = linalg.matmul ins(%x, %a : tensor<?x12xf32>, tensor<12x12xf32>) outs(%f : tensor<?x12xf32>) -> tensor<?x12xf32>
  %xab = linalg.matmul ins(%xa, %b : tensor<?x12xf32>, tensor<12x12xf32>) outs(%f : tensor<?x12xf32>) -> tensor<?x12xf32>
  return %xab : tensor<?x12xf32>
}

// -----

// Must show: a rank-2 bottleneck x·A[12x2]·B[2x12] stays two matmuls
// (2·(12·2+2·12) = 96 < 2·12·12 = 288): folding would triple the work.
// CHECK-LABEL: func.func @low_rank_stays
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT:     linalg.matmul
// ALWAYS-LABEL: func.func @low_rank_stays
// ALWAYS:         linalg.matmul {{.*}} tensor<12x12xf32>
// ALWAYS-NOT:     linalg.matmul
// ALWAYS:         return
// REMARK: remark: chain of 2 matmuls not folded: FLOPs per row 2·(12·2+2·12) = 96 would become 288
func.func @low_rank_stays(%x: tensor<?x12xf32>) -> tensor<?x12xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x12xf32>
  %a = arith.constant dense<[[-1.0, -1.0], [2.0, 3.0], [-3.0, -3.0], [-2.0, 0.0], [-2.0, 0.0], [0.0, 3.0], [2.0, -2.0], [2.0, 2.0], [1.0, 1.0], [-1.0, 2.0], [-3.0, 1.0], [3.0, 3.0]]> : tensor<12x2xf32>
  %b = arith.constant dense<[[-1.0, -1.0, 1.0, -1.0, 2.0, -2.0, -2.0, -3.0, 0.0, -2.0, -1.0, 3.0], [2.0, 2.0, 1.0, -3.0, 2.0, 1.0, 3.0, 0.0, -2.0, 1.0, 0.0, 1.0]]> : tensor<2x12xf32>
  %e2 = tensor.empty(%m) : tensor<?x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e = tensor.empty(%m) : tensor<?x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %xa = linalg.matmul ins(%x, %a : tensor<?x12xf32>, tensor<12x2xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xab = linalg.matmul ins(%xa, %b : tensor<?x2xf32>, tensor<2x12xf32>) outs(%f : tensor<?x12xf32>) -> tensor<?x12xf32>
  return %xab : tensor<?x12xf32>
}

// -----

// Must show: LoRA of rank 2 over a 16x16 W, x·W + 0.5·((x·A)·B), becomes
// one matmul over W + 0.5·AB.
// CHECK-LABEL: func.func @lora_rank2
// CHECK-SAME:    (%[[X:.*]]: tensor<?x16xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<{{.*}}> : tensor<16x16xf32>
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x16xf32>, tensor<16x16xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK-NOT:     linalg.add
// CHECK:         return %[[R]]
// REMARK: remark: folded a sum of linear branches (LoRA) into one matmul, FLOPs per row 640 → 512
func.func @lora_rank2(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xf32>
  %w = arith.constant dense<[[-1.0, -1.0, -3.0, 3.0, 2.0, 0.0, -2.0, 1.0, -1.0, 1.0, -3.0, -2.0, 2.0, -3.0, 1.0, -1.0], [-3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 2.0, -3.0, 3.0, 3.0, 1.0, 2.0, 2.0, 3.0, 3.0, 0.0], [2.0, 3.0, -1.0, -3.0, -2.0, -3.0, 0.0, -3.0, -2.0, -2.0, 1.0, -2.0, 3.0, -2.0, 3.0, 0.0], [-2.0, -3.0, -1.0, 1.0, -3.0, -2.0, -3.0, 1.0, -3.0, -3.0, 0.0, -1.0, 0.0, 3.0, 3.0, 0.0], [1.0, 2.0, 0.0, 1.0, -2.0, 1.0, -2.0, -2.0, 2.0, 1.0, -1.0, -3.0, -2.0, 2.0, 0.0, 3.0], [3.0, 2.0, -3.0, -3.0, 1.0, -1.0, 2.0, -1.0, -2.0, -3.0, -1.0, 1.0, -3.0, 2.0, -1.0, -1.0], [1.0, 3.0, 0.0, 2.0, -1.0, -3.0, 2.0, 2.0, 2.0, 3.0, 0.0, -2.0, 1.0, 1.0, -1.0, 1.0], [-2.0, 1.0, 2.0, -3.0, 0.0, 1.0, -3.0, 1.0, 3.0, 2.0, 1.0, 2.0, -1.0, -1.0, -3.0, 2.0], [-1.0, 3.0, 0.0, 3.0, -3.0, -2.0, -1.0, -3.0, 0.0, 1.0, 1.0, -2.0, -2.0, 0.0, 1.0, 3.0], [3.0, -1.0, -2.0, -2.0, 3.0, 0.0, 3.0, 1.0, 1.0, -3.0, 1.0, -1.0, 2.0, -3.0, -2.0, 1.0], [1.0, 2.0, 0.0, -1.0, -1.0, -1.0, 1.0, 0.0, -1.0, -2.0, 1.0, -2.0, -2.0, -1.0, 2.0, 0.0], [1.0, -3.0, -1.0, 2.0, 2.0, 1.0, 3.0, -1.0, -2.0, -3.0, -2.0, 2.0, 3.0, -3.0, 0.0, -3.0], [2.0, -3.0, 1.0, -3.0, 2.0, 3.0, 2.0, -2.0, 2.0, -1.0, 2.0, 2.0, 0.0, 1.0, 2.0, -2.0], [-3.0, 0.0, -2.0, 3.0, 3.0, -1.0, -1.0, 1.0, 0.0, -3.0, 1.0, 2.0, -3.0, 2.0, 0.0, 2.0], [2.0, 1.0, -1.0, -1.0, 2.0, -3.0, -2.0, 0.0, 3.0, 2.0, 2.0, -2.0, -2.0, -2.0, 2.0, 0.0], [-2.0, 2.0, 1.0, 3.0, 0.0, -3.0, 3.0, -2.0, -3.0, 2.0, 0.0, 1.0, -3.0, 2.0, -1.0, 3.0]]> : tensor<16x16xf32>
  %la = arith.constant dense<[[1.0, 3.0], [2.0, 2.0], [-3.0, 2.0], [1.0, -1.0], [-1.0, 1.0], [-2.0, -2.0], [3.0, 2.0], [1.0, 2.0], [-1.0, 2.0], [-2.0, 0.0], [-2.0, -1.0], [-1.0, -1.0], [0.0, -3.0], [-1.0, 2.0], [0.0, 0.0], [-3.0, -1.0]]> : tensor<16x2xf32>
  %lb = arith.constant dense<[[3.0, 0.0, -3.0, 2.0, 2.0, -1.0, -3.0, 2.0, -2.0, 3.0, -1.0, -1.0, 2.0, -3.0, -3.0, 2.0], [3.0, 3.0, -3.0, -2.0, -1.0, 1.0, 3.0, 2.0, -1.0, 3.0, -2.0, -3.0, 0.0, -3.0, 1.0, 3.0]]> : tensor<2x16xf32>
  %scale = arith.constant dense<0.5> : tensor<16xf32>
  %e = tensor.empty(%m) : tensor<?x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %e2 = tensor.empty(%m) : tensor<?x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<?x16xf32>, tensor<16x16xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
  %xa = linalg.matmul ins(%x, %la : tensor<?x16xf32>, tensor<16x2xf32>) outs(%f2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xab = linalg.matmul ins(%xa, %lb : tensor<?x2xf32>, tensor<2x16xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
  %sb = linalg.broadcast ins(%scale : tensor<16xf32>) outs(%e : tensor<?x16xf32>) dimensions = [0]
  %s = linalg.mul ins(%xab, %sb : tensor<?x16xf32>, tensor<?x16xf32>) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = linalg.add ins(%xw, %s : tensor<?x16xf32>, tensor<?x16xf32>) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Biases inside the chain fold too: (x·A + a)·B + b = x·(AB) + (aB + b).
// A is in the nn.Linear layout (transposed-B maps), B arrives through a
// linalg.transpose (torch-mlir). AB = [[2.5, -2], [5.5, -4]],
// aB + b = [-0.25, 1.5].
// CHECK-LABEL: func.func @chain_with_bias
// CHECK-SAME:    (%[[X:.*]]: tensor<4x2xf32>)
// CHECK-DAG:     %[[C:.*]] = arith.constant dense<[-2.500000e-01, 1.500000e+00]> : tensor<2xf32>
// CHECK-DAG:     %[[W:.*]] = arith.constant dense<{{\[}}[2.500000e+00, -2.000000e+00], [5.500000e+00, -4.000000e+00]]> : tensor<2x2xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x2xf32>, tensor<2x2xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<4x2xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[C]] : tensor<4x2xf32>, tensor<2xf32>) outs(%[[E]] : tensor<4x2xf32>)
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
// Chain with biases: (x·A + a)·B + b = x·(AB) + (aB + b). torch-mlir style
// transposed constants and bias generics.
func.func @chain_with_bias(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<[[1.0, 3.0], [2.0, 4.0]]> : tensor<2x2xf32>
  %ba = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %b = arith.constant dense<[[0.5, 1.0], [0.0, -1.0]]> : tensor<2x2xf32>
  %bb = arith.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %xa = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %a : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %ya = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%xa, %ba : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %te = tensor.empty() : tensor<2x2xf32>
  %bt = linalg.transpose ins(%b : tensor<2x2xf32>) outs(%te : tensor<2x2xf32>) permutation = [1, 0]
  %xb = linalg.matmul ins(%ya, %bt : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %yb = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%xb, %bb : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %yb : tensor<4x2xf32>
}

// -----

// LoRA with the scale as a linalg.generic multiplying by a constant:
// W + 0.5·A·B = I + 0.5·[[4, 8], [8, 16]].
// CHECK-LABEL: func.func @lora
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<{{\[}}[3.000000e+00, 4.000000e+00], [4.000000e+00, 9.000000e+00]]> : tensor<2x2xf32>
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x2xf32>, tensor<2x2xf32>)
// CHECK-NEXT:    return %[[R]]
// NEVER-LABEL: func.func @lora
// NEVER-COUNT-3: linalg.matmul
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
// LoRA: x·W + 0.5·((x·A)·B), rank 1 over 2x2.
func.func @lora(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %w = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %la = arith.constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
  %lb = arith.constant dense<[[4.0, 8.0]]> : tensor<1x2xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1 = tensor.empty(%m) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xa = linalg.matmul ins(%x, %la : tensor<?x2xf32>, tensor<2x1xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %xab = linalg.matmul ins(%xa, %lb : tensor<?x1xf32>, tensor<1x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%xab : tensor<?x2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %r = arith.mulf %p, %half : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %y = linalg.add ins(%xw, %s : tensor<?x2xf32>, tensor<?x2xf32>) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// RMSNorm gamma: both users are constant matmuls, so g moves into their
// weight rows (the second user keeps its [N, K] layout and maps).
// CHECK-LABEL: func.func @norm_scale
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[W1:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 1.000000e+01]]> : tensor<1x2xf32>
// CHECK-DAG:     %[[W0:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 4.000000e+00], [3.000000e+01, 4.000000e+01]]> : tensor<2x2xf32>
// CHECK-NOT:     arith.mulf
// CHECK:         %[[Y0:.*]] = linalg.matmul ins(%[[X]], %[[W0]] : tensor<?x2xf32>, tensor<2x2xf32>)
// CHECK-NEXT:    %[[Y1:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W1]] : tensor<?x2xf32>, tensor<1x2xf32>)
// CHECK-NEXT:    return %[[Y0]], %[[Y1]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
// RMSNorm gamma: y = x * g, all users matmuls.
func.func @norm_scale(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %g = arith.constant dense<[2.0, 10.0]> : tensor<2xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %xs = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<?x2xf32>, tensor<2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %w0 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %w1 = arith.constant dense<[[1.0, 1.0]]> : tensor<1x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e1 = tensor.empty(%m) : tensor<?x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %y0 = linalg.matmul ins(%xs, %w0 : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y1 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%xs, %w1 : tensor<?x2xf32>, tensor<1x2xf32>) outs(%f1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  return %y0, %y1 : tensor<?x2xf32>, tensor<?x1xf32>
}

// -----

// Three steps 8 → 2 → 8 → 8: the dynamic program keeps the rank-2 entry
// and folds the two steps after it (2·(8·2 + 2·8) = 64 per row, against
// 192 unfolded and 128 folded whole).
// CHECK-LABEL: func.func @chain_dp
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<4.000000e+00> : tensor<2x8xf32>
// CHECK:         %[[H:.*]] = linalg.matmul ins(%[[X]], %{{.*}} : tensor<4x8xf32>, tensor<8x2xf32>)
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[H]], %[[W]] : tensor<4x2xf32>, tensor<2x8xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[R]]
// ALWAYS-LABEL: func.func @chain_dp
// ALWAYS:         arith.constant dense<8.000000e+00> : tensor<8x8xf32>
// ALWAYS:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32>)
// ALWAYS-NOT:     linalg.matmul
// ALWAYS:         return
func.func @chain_dp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<8x2xf32>
  %b = arith.constant dense<2.0> : tensor<2x8xf32>
  %c = arith.constant dense<0.25> : tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<4x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %e8 = tensor.empty() : tensor<4x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.matmul ins(%x, %a : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f2 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %1 = linalg.matmul ins(%0, %b : tensor<4x2xf32>, tensor<2x8xf32>) outs(%f8 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = linalg.matmul ins(%1, %c : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// f16 weights: the product is accumulated in f64 and rounded once to f16.
// f16(0.1) = 0.0999755859375, so every entry of A·B is exactly
// 2 · 1.5 · 0.0999755859375 = 1228.5 / 4096, a tie that rounds to even:
// 1228 / 4096 = 2.998050e-01.
// CHECK-LABEL: func.func @chain_f16
// CHECK:         arith.constant dense<2.998050e-01> : tensor<2x2xf16>
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x2xf16>, tensor<2x2xf16>) outs(%{{.*}} : tensor<3x2xf16>)
// CHECK-NOT:     linalg.matmul
func.func @chain_f16(%x: tensor<3x2xf16>) -> tensor<3x2xf16> {
  %zero = arith.constant 0.0 : f16
  %a = arith.constant dense<0.1> : tensor<2x2xf16>
  %b = arith.constant dense<1.5> : tensor<2x2xf16>
  %e = tensor.empty() : tensor<3x2xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<3x2xf16>) -> tensor<3x2xf16>
  %0 = linalg.matmul ins(%x, %a : tensor<3x2xf16>, tensor<2x2xf16>) outs(%f : tensor<3x2xf16>) -> tensor<3x2xf16>
  %1 = linalg.matmul ins(%0, %b : tensor<3x2xf16>, tensor<2x2xf16>) outs(%f : tensor<3x2xf16>) -> tensor<3x2xf16>
  return %1 : tensor<3x2xf16>
}

// -----

// 3-D activations: the batch dims are collapsed around each matmul, and the
// expand_shape/collapse_shape pair between the two matmuls only renames
// rows, so the chain still folds (A·B = 4 · 1 · 0.5 = 2 everywhere).
// CHECK-LABEL: func.func @chain_through_reshapes
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-DAG:     %[[W:.*]] = arith.constant dense<2.000000e+00> : tensor<4x4xf32>
// CHECK:         %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]]
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X2]], %[[W]] : tensor<6x4xf32>, tensor<4x4xf32>)
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [2, 3, 4]
// CHECK-NEXT:    return %[[R]]
func.func @chain_through_reshapes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<4x4xf32>
  %b = arith.constant dense<0.5> : tensor<4x4xf32>
  %e = tensor.empty() : tensor<6x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x4xf32>) -> tensor<6x4xf32>
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
  %y = linalg.matmul ins(%x2, %a : tensor<6x4xf32>, tensor<4x4xf32>) outs(%f : tensor<6x4xf32>) -> tensor<6x4xf32>
  %y3 = tensor.expand_shape %y [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
  %y2 = tensor.collapse_shape %y3 [[0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
  %z = linalg.matmul ins(%y2, %b : tensor<6x4xf32>, tensor<4x4xf32>) outs(%f : tensor<6x4xf32>) -> tensor<6x4xf32>
  %z3 = tensor.expand_shape %z [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
  return %z3 : tensor<2x3x4xf32>
}

// -----

// A norm scale in front of a chain (dynamic M): the scale is absorbed into
// the first weight before the product, so diag(g)·A·B = [[2, 0], [0, 6]] is
// rounded once and the matmul reads %x directly. (Found by the numerics
// test: the chain fold used to add a tensor.dim of the scaled value, which
// then blocked the scale fold.)
// CHECK-LABEL: func.func @norm_scale_into_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[W:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 0.000000e+00], [0.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT:     arith.mulf
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x2xf32>, tensor<2x2xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[R]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @norm_scale_into_chain(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x2xf32>
  %g = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %a = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %b = arith.constant dense<[[2.0, 0.0], [0.0, 3.0]]> : tensor<2x2xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<?x2xf32>, tensor<2xf32>) outs(%e : tensor<?x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x2xf32>
  %xa = linalg.matmul ins(%y, %a : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  %xab = linalg.matmul ins(%xa, %b : tensor<?x2xf32>, tensor<2x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  return %xab : tensor<?x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Negative cases: left unchanged.
//===----------------------------------------------------------------------===//

// A ReLU between the matmuls: not linear, nothing to fold.
// CHECK-LABEL: func.func @nonlinear_between
// CHECK:         %[[H:.*]] = linalg.matmul
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[H]]
// CHECK:           arith.maximumf
// CHECK:         linalg.matmul ins(%[[R]]
func.func @nonlinear_between(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<8x8xf32>
  %b = arith.constant dense<2.0> : tensor<8x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.matmul ins(%x, %a : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %m = arith.maximumf %p, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %1 = linalg.matmul ins(%r, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Weights that are plain function arguments may change on every call: they
// cannot be pre-multiplied, and a remark says why (mark them
// `linfuse.weight` to fold them, see @weight_args_chain).
// CHECK-LABEL: func.func @runtime_weights
// CHECK-COUNT-2: linalg.matmul
// REMARK: remark: chain of matmuls not folded: weight %arg1 is neither a constant nor a linfuse.weight argument
func.func @runtime_weights(%x: tensor<4x8xf32>, %a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.matmul ins(%x, %a : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = linalg.matmul ins(%0, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// The intermediate x·A is also returned: folding would compute it anyway
// and add a second full GEMM.
// CHECK-LABEL: func.func @intermediate_has_other_users
// CHECK:         %[[H:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32>)
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[H]],
// CHECK:         return %[[H]], %[[R]]
func.func @intermediate_has_other_users(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = arith.constant dense<1.0> : tensor<8x8xf32>
  %b = arith.constant dense<2.0> : tensor<8x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.matmul ins(%x, %a : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = linalg.matmul ins(%0, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The scaled input also feeds a non-matmul: the scale stays.
// CHECK-LABEL: func.func @scale_with_other_user
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK:           arith.mulf
// CHECK:         linalg.matmul ins(%[[S]], %{{.*}} : tensor<4x2xf32>, tensor<2x2xf32>)
func.func @scale_with_other_user(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = arith.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %0 = linalg.matmul ins(%s, %w : tensor<4x2xf32>, tensor<2x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0, %s : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// Run-time weights marked `linfuse.weight` (known at load time): the product
// A·B is emitted as IR, accumulated in f64 and rounded once to f32, for
// --linfuse-lift-weight-packing to move into the packing function (see
// lift-weight-packing.mlir; values: fold-matmul-chains-numerics.test).
// CHECK-LABEL: func.func @weight_args_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4xf32>, %[[A:.*]]: tensor<4x4xf32> {linfuse.weight}, %[[B:.*]]: tensor<4x4xf32> {linfuse.weight})
// CHECK:         %[[A64:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4x4xf32>) outs(%{{.*}} : tensor<4x4xf64>)
// CHECK:           arith.extf %{{.*}} : f32 to f64
// CHECK:         %[[B64:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x4xf32>) outs(%{{.*}} : tensor<4x4xf64>)
// CHECK:         %[[AB:.*]] = linalg.matmul ins(%[[A64]], %[[B64]] : tensor<4x4xf64>, tensor<4x4xf64>)
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[AB]] : tensor<4x4xf64>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK:           arith.truncf %{{.*}} : f64 to f32
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x4xf32>, tensor<4x4xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[R]]
// NEVER-LABEL: func.func @weight_args_chain
// NEVER-COUNT-2: linalg.matmul
// REMARK: remark: folded chain of 2 matmuls, FLOPs per row 2·(4·4+4·4) → 2·4·4
func.func @weight_args_chain(%x: tensor<?x4xf32>, %a: tensor<4x4xf32> {linfuse.weight}, %b: tensor<4x4xf32> {linfuse.weight}) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %0 = linalg.matmul ins(%x, %a : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = linalg.matmul ins(%0, %b : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// -----

// f16 LoRA over `linfuse.weight` arguments: W + 0.5·A·B in f32, rounded
// once to f16.
// CHECK-LABEL: func.func @weight_args_lora_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<2x8xf16>, %[[W:.*]]: tensor<8x8xf16> {linfuse.weight}, %[[A:.*]]: tensor<8x1xf16> {linfuse.weight}, %[[B:.*]]: tensor<1x8xf16> {linfuse.weight})
// CHECK-DAG:     %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:     %[[W32:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<8x8xf16>) outs(%{{.*}} : tensor<8x8xf32>)
// CHECK-DAG:     %[[B32:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<1x8xf16>) outs(%{{.*}} : tensor<1x8xf32>)
// CHECK-DAG:     %[[A32:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<8x1xf16>) outs(%{{.*}} : tensor<8x1xf32>)
// CHECK:         %[[AB:.*]] = linalg.matmul ins(%[[A32]], %[[B32]] : tensor<8x1xf32>, tensor<1x8xf32>)
// CHECK:         %[[SAB:.*]] = linalg.generic {{.*}} ins(%[[AB]] : tensor<8x8xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[HALF]] : f32
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[W32]], %[[SAB]] : tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK:           arith.addf
// CHECK:         %[[W16:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<8x8xf32>) outs(%{{.*}} : tensor<8x8xf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to f16
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W16]] : tensor<2x8xf16>, tensor<8x8xf16>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[R]]
// REMARK: remark: folded a sum of linear branches (LoRA) into one matmul, FLOPs per row 160 → 128
func.func @weight_args_lora_f16(%x: tensor<2x8xf16>, %w: tensor<8x8xf16> {linfuse.weight}, %a: tensor<8x1xf16> {linfuse.weight}, %b: tensor<1x8xf16> {linfuse.weight}) -> tensor<2x8xf16> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<2x8xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<2x8xf16>) -> tensor<2x8xf16>
  %e1 = tensor.empty() : tensor<2x1xf16>
  %f1 = linalg.fill ins(%zero : f16) outs(%e1 : tensor<2x1xf16>) -> tensor<2x1xf16>
  %xw = linalg.matmul ins(%x, %w : tensor<2x8xf16>, tensor<8x8xf16>) outs(%f : tensor<2x8xf16>) -> tensor<2x8xf16>
  %xa = linalg.matmul ins(%x, %a : tensor<2x8xf16>, tensor<8x1xf16>) outs(%f1 : tensor<2x1xf16>) -> tensor<2x1xf16>
  %xab = linalg.matmul ins(%xa, %b : tensor<2x1xf16>, tensor<1x8xf16>) outs(%f : tensor<2x8xf16>) -> tensor<2x8xf16>
  %s = arith.constant dense<5.000000e-01> : tensor<2x8xf16>
  %e2 = tensor.empty() : tensor<2x8xf16>
  %scaled = linalg.mul ins(%xab, %s : tensor<2x8xf16>, tensor<2x8xf16>) outs(%e2 : tensor<2x8xf16>) -> tensor<2x8xf16>
  %e3 = tensor.empty() : tensor<2x8xf16>
  %sum = linalg.add ins(%xw, %scaled : tensor<2x8xf16>, tensor<2x8xf16>) outs(%e3 : tensor<2x8xf16>) -> tensor<2x8xf16>
  return %sum : tensor<2x8xf16>
}

// -----

// A norm gamma that is a `linfuse.weight` argument, in front of a weight
// argument: by default the scale stays in the element-wise code (folding it
// would make the scaled weight a second copy beside the caller's, to save
// one multiply per input element). With policy=always it scales the rows of
// the (transposed-B, [N, K]) weight, which is written back in its own layout.
// CHECK-LABEL: func.func @weight_args_gamma
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[G:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<6x4xf32> {linfuse.weight})
// CHECK:         %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[G]] : tensor<2x4xf32>, tensor<4xf32>)
// CHECK:           arith.mulf
// CHECK:         linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[Y]], %[[W]] : tensor<2x4xf32>, tensor<6x4xf32>)
// REMARK: :[[@LINE+11]]:8: remark: input scale not folded into weight arguments: the scaled weights would be a second copy of 96 bytes of weights (policy=always folds it)
// ALWAYS-LABEL: func.func @weight_args_gamma
// ALWAYS-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[G:.*]]: tensor<4xf32> {linfuse.weight}, %[[W:.*]]: tensor<6x4xf32> {linfuse.weight})
// ALWAYS:         %[[GR:.*]] = tensor.expand_shape %[[G]] {{\[\[}}0, 1]] output_shape [1, 4] : tensor<4xf32> into tensor<1x4xf32>
// ALWAYS:         %[[SCALED:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x6xf64>, tensor<1x4xf64>)
// ALWAYS:         %[[T:.*]] = linalg.transpose ins(%[[SCALED]] : tensor<4x6xf64>) outs(%{{.*}} : tensor<6x4xf64>) permutation = [1, 0]
// ALWAYS:         %[[W2:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<6x4xf64>) outs(%{{.*}} : tensor<6x4xf32>)
// ALWAYS:         linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W2]] : tensor<2x4xf32>, tensor<6x4xf32>)
func.func @weight_args_gamma(%x: tensor<2x4xf32>, %g: tensor<4xf32> {linfuse.weight}, %w: tensor<6x4xf32> {linfuse.weight}) -> tensor<2x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %g : tensor<2x4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e6 = tensor.empty() : tensor<2x6xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<2x6xf32>) -> tensor<2x6xf32>
  %o = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%y, %w : tensor<2x4xf32>, tensor<6x4xf32>) outs(%f6 : tensor<2x6xf32>) -> tensor<2x6xf32>
  return %o : tensor<2x6xf32>
}

// -----

// A chain of weights only (a product the pass itself would emit) is
// load-time work for the packing function, not a run-time chain: left
// alone, without a remark.
// CHECK-LABEL: func.func @weights_only_chain
// CHECK-COUNT-2: linalg.matmul
// REMARK-NOT: remark
func.func @weights_only_chain(%a: tensor<4x4xf32> {linfuse.weight}, %b: tensor<4x4xf32> {linfuse.weight}, %c: tensor<4x4xf32> {linfuse.weight}) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%0, %c : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
