// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls -canonicalize -cse | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls="merge-shared-rhs=false" -canonicalize -cse | FileCheck %s --check-prefix=NORHS
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls="min-group-size=3" -canonicalize -cse | FileCheck %s --check-prefix=MIN3
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls="max-merged-bytes=4096" -canonicalize -cse | FileCheck %s --check-prefix=CAP
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// The output must also parse with Debian's upstream mlir-opt (upstream ops only).
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls | %mlir-opt -split-input-file -o /dev/null

// Q/K/V in nn.Linear layout (transposed-B maps), GQA (K/V narrower than Q),
// dynamic M, and the three spellings of a bias-add: generic with the matmul
// as input, generic accumulating into the matmul result, bias first.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>

// CHECK-DAG:   #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @qkv_gqa_bias
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf32>, %[[WQ:.*]]: tensor<64x64xf32>, %[[WK:.*]]: tensor<16x64xf32>, %[[WV:.*]]: tensor<16x64xf32>, %[[BQ:.*]]: tensor<64xf32>, %[[BK:.*]]: tensor<16xf32>, %[[BV:.*]]: tensor<16xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<64x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<96x64xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x64xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[M]]) : tensor<?x96xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<?x96xf32>) -> tensor<?x96xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#[[$A]], #[[$BT]], #[[$C]]] ins(%[[X]], %[[W]] : tensor<?x64xf32>, tensor<96x64xf32>) outs(%[[F]] : tensor<?x96xf32>) -> tensor<?x96xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.concat dim(0) %[[BQ]], %[[BK]], %[[BV]] : (tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<96xf32>
// CHECK-NEXT:    %[[ADD:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[MM]], %[[B]] : tensor<?x96xf32>, tensor<96xf32>) outs(%[[E]] : tensor<?x96xf32>) {
// CHECK-NEXT:    ^bb0(%[[I0:.*]]: f32, %[[I1:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[I0]], %[[I1]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<?x96xf32>
// CHECK-NEXT:    %[[Q:.*]] = tensor.extract_slice %[[ADD]][0, 0] [%[[M]], 64] [1, 1] : tensor<?x96xf32> to tensor<?x64xf32>
// CHECK-NEXT:    %[[K:.*]] = tensor.extract_slice %[[ADD]][0, 64] [%[[M]], 16] [1, 1] : tensor<?x96xf32> to tensor<?x16xf32>
// CHECK-NEXT:    %[[V:.*]] = tensor.extract_slice %[[ADD]][0, 80] [%[[M]], 16] [1, 1] : tensor<?x96xf32> to tensor<?x16xf32>
// CHECK-NEXT:    return %[[Q]], %[[K]], %[[V]]
func.func @qkv_gqa_bias(%x: tensor<?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<16x64xf32>, %wv: tensor<16x64xf32>,
                        %bq: tensor<64xf32>, %bk: tensor<16xf32>, %bv: tensor<16xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e64 = tensor.empty(%m) : tensor<?x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %e16 = tensor.empty(%m) : tensor<?x16xf32>
  %f16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %q0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wq : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%q0, %bq : tensor<?x64xf32>, tensor<64xf32>) outs(%e64 : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %k0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wk : tensor<?x64xf32>, tensor<16x64xf32>) outs(%f16 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %k = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%bk : tensor<16xf32>) outs(%k0 : tensor<?x16xf32>) {
  ^bb0(%b: f32, %o: f32):
    %s = arith.addf %o, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  %v0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %wv : tensor<?x64xf32>, tensor<16x64xf32>) outs(%f16 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %v = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%bv, %v0 : tensor<16xf32>, tensor<?x16xf32>) outs(%e16 : tensor<?x16xf32>) {
  ^bb0(%b: f32, %a: f32, %o: f32):
    %s = arith.addf %b, %a : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
// REMARK: remark: merged 3 matmuls sharing %arg0 (with their bias-adds) into one ?x96 GEMM
// MIN3-LABEL: func.func @qkv_gqa_bias
// MIN3:         linalg.matmul {{.*}} -> tensor<?x96xf32>
// CAP-LABEL:  func.func @qkv_gqa_bias
// CAP-NOT:      tensor.concat
// CAP-COUNT-3:  linalg.matmul
// CAP-NOT:      tensor.concat
// CAP:          return

// -----

// Default maps ([K, N] weights), static M: weights concatenated along N.
// CHECK-LABEL: func.func @default_maps
// CHECK-SAME:    (%[[X:.*]]: tensor<8x32xf32>, %[[W0:.*]]: tensor<32x16xf32>, %[[W1:.*]]: tensor<32x48xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<32x16xf32>, tensor<32x48xf32>) -> tensor<32x64xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x64xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<8x32xf32>, tensor<32x64xf32>) outs(%[[F]] : tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [8, 16] [1, 1] : tensor<8x64xf32> to tensor<8x16xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 16] [8, 48] [1, 1] : tensor<8x64xf32> to tensor<8x48xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
func.func @default_maps(%x: tensor<8x32xf32>, %w0: tensor<32x16xf32>, %w1: tensor<32x48xf32>) -> (tensor<8x16xf32>, tensor<8x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8x48xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = linalg.matmul ins(%x, %w1 : tensor<8x32xf32>, tensor<32x48xf32>) outs(%f1 : tensor<8x48xf32>) -> tensor<8x48xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<8x48xf32>
}
// REMARK: remark: merged 2 matmuls sharing %arg0 into one 8x64 GEMM
// MIN3-LABEL: func.func @default_maps
// MIN3-NOT:     tensor.concat
// MIN3-COUNT-2: linalg.matmul
// MIN3-NOT:     tensor.concat
// MIN3:         return

// -----

// torch-mlir: linalg.transpose of each [out, in] weight feeding a plain
// matmul, bias as linalg.add of linalg.broadcast. The transposes are looked
// through: the [out, in] weights are concatenated as they are and the merged
// matmul reads them with transposed-B maps.
// CHECK-LABEL: func.func @torch_mlir_linear
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xf32>, %[[W0:.*]]: tensor<16x32xf32>, %[[W1:.*]]: tensor<8x32xf32>, %[[B0:.*]]: tensor<16xf32>, %[[B1:.*]]: tensor<8xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[W0]], %[[W1]] : (tensor<16x32xf32>, tensor<8x32xf32>) -> tensor<24x32xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]]
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[M]]) : tensor<?x24xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<?x32xf32>, tensor<24x32xf32>) outs(%[[F]] : tensor<?x24xf32>) -> tensor<?x24xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.concat dim(0) %[[B0]], %[[B1]] : (tensor<16xf32>, tensor<8xf32>) -> tensor<24xf32>
// CHECK-NEXT:    %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[B]] : tensor<?x24xf32>, tensor<24xf32>) outs(%[[E]] : tensor<?x24xf32>)
// CHECK:         %[[S0:.*]] = tensor.extract_slice %[[ADD]][0, 0] [%[[M]], 16] [1, 1] : tensor<?x24xf32> to tensor<?x16xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[ADD]][0, 16] [%[[M]], 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
func.func @torch_mlir_linear(%x: tensor<?x32xf32>, %w0: tensor<16x32xf32>, %w1: tensor<8x32xf32>, %b0: tensor<16xf32>, %b1: tensor<8xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %t0e = tensor.empty() : tensor<32x16xf32>
  %t0 = linalg.transpose ins(%w0 : tensor<16x32xf32>) outs(%t0e : tensor<32x16xf32>) permutation = [1, 0]
  %e0 = tensor.empty(%m) : tensor<?x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %mm0 = linalg.matmul ins(%x, %t0 : tensor<?x32xf32>, tensor<32x16xf32>) outs(%f0 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %bb0 = linalg.broadcast ins(%b0 : tensor<16xf32>) outs(%e0 : tensor<?x16xf32>) dimensions = [0]
  %r0 = linalg.add ins(%mm0, %bb0 : tensor<?x16xf32>, tensor<?x16xf32>) outs(%e0 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %t1e = tensor.empty() : tensor<32x8xf32>
  %t1 = linalg.transpose ins(%w1 : tensor<8x32xf32>) outs(%t1e : tensor<32x8xf32>) permutation = [1, 0]
  %e1 = tensor.empty(%m) : tensor<?x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %mm1 = linalg.matmul ins(%x, %t1 : tensor<?x32xf32>, tensor<32x8xf32>) outs(%f1 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %bb1 = linalg.broadcast ins(%b1 : tensor<8xf32>) outs(%e1 : tensor<?x8xf32>) dimensions = [0]
  %r1 = linalg.add ins(%mm1, %bb1 : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e1 : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r0, %r1 : tensor<?x16xf32>, tensor<?x8xf32>
}

// -----

// Batch matmul with a shared LHS and per-batch weights; bf16 operands with
// f32 accumulators that are function arguments (non-zero inits): the inits
// are concatenated too.
// CHECK-LABEL: func.func @batch_matmul_nonzero_init
// CHECK-SAME:    (%[[X:.*]]: tensor<4x?x32xbf16>, %[[W0:.*]]: tensor<4x32x16xbf16>, %[[W1:.*]]: tensor<4x32x16xbf16>, %[[I0:.*]]: tensor<4x?x16xf32>, %[[I1:.*]]: tensor<4x?x16xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(2) %[[W0]], %[[W1]] : (tensor<4x32x16xbf16>, tensor<4x32x16xbf16>) -> tensor<4x32x32xbf16>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<4x?x32xbf16>
// CHECK-NEXT:    %[[I:.*]] = tensor.concat dim(2) %[[I0]], %[[I1]] : (tensor<4x?x16xf32>, tensor<4x?x16xf32>) -> tensor<4x?x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.batch_matmul ins(%[[X]], %[[W]] : tensor<4x?x32xbf16>, tensor<4x32x32xbf16>) outs(%[[I]] : tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0, 0] [4, %[[M]], 16] [1, 1, 1] : tensor<4x?x32xf32> to tensor<4x?x16xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 0, 16] [4, %[[M]], 16] [1, 1, 1] : tensor<4x?x32xf32> to tensor<4x?x16xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
func.func @batch_matmul_nonzero_init(%x: tensor<4x?x32xbf16>, %w0: tensor<4x32x16xbf16>, %w1: tensor<4x32x16xbf16>, %init0: tensor<4x?x16xf32>, %init1: tensor<4x?x16xf32>) -> (tensor<4x?x16xf32>, tensor<4x?x16xf32>) {
  %0 = linalg.batch_matmul ins(%x, %w0 : tensor<4x?x32xbf16>, tensor<4x32x16xbf16>) outs(%init0 : tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  %1 = linalg.batch_matmul ins(%x, %w1 : tensor<4x?x32xbf16>, tensor<4x32x16xbf16>) outs(%init1 : tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  return %0, %1 : tensor<4x?x16xf32>, tensor<4x?x16xf32>
}

// -----

// Per-batch weights of a dynamic batch (the input's), one of them [N, K]:
// merged too; the transpose and the slices take the batch at run time.
// CHECK-LABEL: func.func @batch_matmul_dynamic_batch
// CHECK-SAME:    (%[[X:.*]]: tensor<?x5x16xf32>, %[[W0:.*]]: tensor<?x16x8xf32>, %[[W1:.*]]: tensor<?x12x16xf32>)
// CHECK:         %[[WB:.*]] = tensor.dim %[[W0]], %{{.*}} : tensor<?x16x8xf32>
// CHECK-NEXT:    %[[TE:.*]] = tensor.empty(%[[WB]]) : tensor<?x8x16xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W0]] : tensor<?x16x8xf32>) outs(%[[TE]] : tensor<?x8x16xf32>) permutation = [0, 2, 1]
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(1) %[[T]], %[[W1]] : (tensor<?x8x16xf32>, tensor<?x12x16xf32>) -> tensor<?x20x16xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x5x16xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[B]]) : tensor<?x5x20xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x5x20xf32>) -> tensor<?x5x20xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.batch_matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<?x5x16xf32>, tensor<?x20x16xf32>) outs(%[[F]] : tensor<?x5x20xf32>) -> tensor<?x5x20xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0, 0] [%[[B]], 5, 8] [1, 1, 1] : tensor<?x5x20xf32> to tensor<?x5x8xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 0, 8] [%[[B]], 5, 12] [1, 1, 1] : tensor<?x5x20xf32> to tensor<?x5x12xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
func.func @batch_matmul_dynamic_batch(%x: tensor<?x5x16xf32>, %w0: tensor<?x16x8xf32>, %w1: tensor<?x12x16xf32>) -> (tensor<?x5x8xf32>, tensor<?x5x12xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x5x16xf32>
  %e8 = tensor.empty(%b) : tensor<?x5x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
  %y0 = linalg.batch_matmul ins(%x, %w0 : tensor<?x5x16xf32>, tensor<?x16x8xf32>) outs(%f8 : tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
  %e12 = tensor.empty(%b) : tensor<?x5x12xf32>
  %f12 = linalg.fill ins(%zero : f32) outs(%e12 : tensor<?x5x12xf32>) -> tensor<?x5x12xf32>
  %y1 = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%x, %w1 : tensor<?x5x16xf32>, tensor<?x12x16xf32>) outs(%f12 : tensor<?x5x12xf32>) -> tensor<?x5x12xf32>
  return %y0, %y1 : tensor<?x5x8xf32>, tensor<?x5x12xf32>
}

// -----

// Mixed weight layouts (f16): the group takes the majority layout ([N, K]);
// only the [K, N] weight is transposed before the concat.
// CHECK-LABEL: func.func @mixed_layouts_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<8x32xf16>, %[[WKN:.*]]: tensor<32x16xf16>, %[[WNK0:.*]]: tensor<16x32xf16>, %[[WNK1:.*]]: tensor<8x32xf16>)
// CHECK:         %[[TE:.*]] = tensor.empty() : tensor<16x32xf16>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[WKN]] : tensor<32x16xf16>) outs(%[[TE]] : tensor<16x32xf16>) permutation = [1, 0]
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(0) %[[T]], %[[WNK0]], %[[WNK1]] : (tensor<16x32xf16>, tensor<16x32xf16>, tensor<8x32xf16>) -> tensor<40x32xf16>
// CHECK:         %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<8x32xf16>, tensor<40x32xf16>) outs(%{{.*}} : tensor<8x40xf16>) -> tensor<8x40xf16>
// CHECK-NEXT:    tensor.extract_slice %[[MM]][0, 0] [8, 16] [1, 1] : tensor<8x40xf16> to tensor<8x16xf16>
// CHECK-NEXT:    tensor.extract_slice %[[MM]][0, 16] [8, 16] [1, 1] : tensor<8x40xf16> to tensor<8x16xf16>
// CHECK-NEXT:    tensor.extract_slice %[[MM]][0, 32] [8, 8] [1, 1] : tensor<8x40xf16> to tensor<8x8xf16>
func.func @mixed_layouts_f16(%x: tensor<8x32xf16>, %wkn: tensor<32x16xf16>, %wnk0: tensor<16x32xf16>, %wnk1: tensor<8x32xf16>) -> (tensor<8x16xf16>, tensor<8x16xf16>, tensor<8x8xf16>) {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x16xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<8x16xf16>) -> tensor<8x16xf16>
  %e8 = tensor.empty() : tensor<8x8xf16>
  %f8 = linalg.fill ins(%zero : f16) outs(%e8 : tensor<8x8xf16>) -> tensor<8x8xf16>
  %0 = linalg.matmul ins(%x, %wkn : tensor<8x32xf16>, tensor<32x16xf16>) outs(%f : tensor<8x16xf16>) -> tensor<8x16xf16>
  %1 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%x, %wnk0 : tensor<8x32xf16>, tensor<16x32xf16>) outs(%f : tensor<8x16xf16>) -> tensor<8x16xf16>
  %2 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%x, %wnk1 : tensor<8x32xf16>, tensor<8x32xf16>) outs(%f8 : tensor<8x8xf16>) -> tensor<8x8xf16>
  return %0, %1, %2 : tensor<8x16xf16>, tensor<8x16xf16>, tensor<8x8xf16>
}
// MIN3-LABEL: func.func @mixed_layouts_f16
// MIN3:         linalg.matmul {{.*}} -> tensor<8x40xf16>

// -----

// Groups are split by result element type: the two f32-accumulating bf16
// matmuls merge, the bf16-accumulating one stays.
// CHECK-LABEL: func.func @split_by_result_type
// CHECK-SAME:    (%[[X:.*]]: tensor<8x32xbf16>, %[[W0:.*]]: tensor<32x16xbf16>, %[[W1:.*]]: tensor<32x16xbf16>, %[[W2:.*]]: tensor<32x16xbf16>, %[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<8x16xbf16>, %[[C:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W2]] : (tensor<32x16xbf16>, tensor<32x16xbf16>) -> tensor<32x32xbf16>
// CHECK-NEXT:    %[[I:.*]] = tensor.concat dim(1) %[[A]], %[[C]] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<8x32xbf16>, tensor<32x32xbf16>) outs(%[[I]] : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [8, 16] [1, 1]
// CHECK-NEXT:    %[[S2:.*]] = tensor.extract_slice %[[MM]][0, 16] [8, 16] [1, 1]
// CHECK-NEXT:    %[[R1:.*]] = linalg.matmul ins(%[[X]], %[[W1]] : tensor<8x32xbf16>, tensor<32x16xbf16>) outs(%[[B]] : tensor<8x16xbf16>) -> tensor<8x16xbf16>
// CHECK-NEXT:    return %[[S0]], %[[R1]], %[[S2]]
func.func @split_by_result_type(%x: tensor<8x32xbf16>, %w0: tensor<32x16xbf16>, %w1: tensor<32x16xbf16>, %w2: tensor<32x16xbf16>, %a: tensor<8x16xf32>, %b: tensor<8x16xbf16>, %c: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8x16xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x32xbf16>, tensor<32x16xbf16>) outs(%a : tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = linalg.matmul ins(%x, %w1 : tensor<8x32xbf16>, tensor<32x16xbf16>) outs(%b : tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %2 = linalg.matmul ins(%x, %w2 : tensor<8x32xbf16>, tensor<32x16xbf16>) outs(%c : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0, %1, %2 : tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8x16xf32>
}

// -----

// Shared RHS: the same weight applied to two inputs becomes one matmul over
// the inputs concatenated along M (dynamic + static rows).
// CHECK-LABEL: func.func @shared_rhs
// CHECK-SAME:    (%[[X0:.*]]: tensor<?x32xf32>, %[[X1:.*]]: tensor<4x32xf32>, %[[W:.*]]: tensor<32x16xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[X:.*]] = tensor.concat dim(0) %[[X0]], %[[X1]] : (tensor<?x32xf32>, tensor<4x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT:    %[[MT:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x32xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[MT]]) : tensor<?x16xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x32xf32>, tensor<32x16xf32>) outs(%[[F]] : tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT:    %[[M0:.*]] = tensor.dim %[[X0]], %[[C0]] : tensor<?x32xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [%[[M0]], 16] [1, 1] : tensor<?x16xf32> to tensor<?x16xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][%[[M0]], 0] [4, 16] [1, 1] : tensor<?x16xf32> to tensor<4x16xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
// NORHS-LABEL: func.func @shared_rhs
// NORHS-NOT:     tensor.concat
// NORHS-COUNT-2: linalg.matmul
// NORHS-NOT:     tensor.concat
// NORHS:         return
func.func @shared_rhs(%x0: tensor<?x32xf32>, %x1: tensor<4x32xf32>, %w: tensor<32x16xf32>) -> (tensor<?x16xf32>, tensor<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x0, %c0 : tensor<?x32xf32>
  %e0 = tensor.empty(%m) : tensor<?x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %e1 = tensor.empty() : tensor<4x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %0 = linalg.matmul ins(%x0, %w : tensor<?x32xf32>, tensor<32x16xf32>) outs(%f0 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %1 = linalg.matmul ins(%x1, %w : tensor<4x32xf32>, tensor<32x16xf32>) outs(%f1 : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0, %1 : tensor<?x16xf32>, tensor<4x16xf32>
}
// REMARK: remark: merged 2 matmuls sharing %arg2 into one ?x16 GEMM

// -----

// Two independent groups in one function, one of them inside a loop body.
// CHECK-LABEL: func.func @two_groups_and_a_loop
// CHECK:         linalg.matmul {{.*}} -> tensor<8x32xf32>
// CHECK:         scf.for
// CHECK:           linalg.matmul {{.*}} -> tensor<8x24xf32>
// CHECK-NOT:       linalg.matmul
// CHECK:           scf.yield
func.func @two_groups_and_a_loop(%x: tensor<8x32xf32>, %y: tensor<8x32xf32>, %w0: tensor<32x16xf32>, %w1: tensor<32x16xf32>, %w2: tensor<32x8xf32>, %init: tensor<8x16xf32>, %init8: tensor<8x8xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%init : tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = linalg.matmul ins(%x, %w1 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%init : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %init, %b = %init8) -> (tensor<8x16xf32>, tensor<8x8xf32>) {
    %2 = linalg.matmul ins(%y, %w0 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%a : tensor<8x16xf32>) -> tensor<8x16xf32>
    %3 = linalg.matmul ins(%y, %w2 : tensor<8x32xf32>, tensor<32x8xf32>) outs(%b : tensor<8x8xf32>) -> tensor<8x8xf32>
    scf.yield %2, %3 : tensor<8x16xf32>, tensor<8x8xf32>
  }
  %s = arith.addf %0, %1 : tensor<8x16xf32>
  return %s, %r#0, %r#1 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x8xf32>
}

// -----

// Constant weights interleaved with the matmuls (as importers emit them),
// the second one after a user of the first result: constants move to the
// merged op, so they never block placement.
// CHECK-LABEL: func.func @interleaved_constant_weights
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-DAG:     %[[W0:.*]] = arith.constant dense<1.000000e+00> : tensor<8x8xf32>
// CHECK-DAG:     %[[W1:.*]] = arith.constant dense<2.000000e+00> : tensor<8x8xf32>
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [4, 8] [1, 1]
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 8] [4, 8] [1, 1]
// CHECK:         %[[USE:.*]] = linalg.copy ins(%[[S0]]
// CHECK-NEXT:    return %[[USE]], %[[S1]]
func.func @interleaved_constant_weights(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %w0 = arith.constant dense<1.0> : tensor<8x8xf32>
  %0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = linalg.copy ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %w1 = arith.constant dense<2.0> : tensor<8x8xf32>
  %1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %u, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Negative cases: must stay unmerged.
//===----------------------------------------------------------------------===//

// A member's weight is another member's result.
// CHECK-LABEL: func.func @dependent_members
// CHECK-SAME:    (%[[X:.*]]: tensor<8x8xf32>, %[[W0:.*]]: tensor<8x8xf32>, %[[I:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[R0:.*]] = linalg.matmul ins(%[[X]], %[[W0]] : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[I]] : tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    %[[R1:.*]] = linalg.matmul ins(%[[X]], %[[R0]] : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[I]] : tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    return %[[R0]], %[[R1]]
func.func @dependent_members(%x: tensor<8x8xf32>, %w0: tensor<8x8xf32>, %init: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.matmul ins(%x, %0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// The second member accumulates into the first one's result.
// CHECK-LABEL: func.func @dependent_through_init
// CHECK:         scf.for
// CHECK-NEXT:      %[[R0:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<32x16xf32>) outs(%{{.*}} : tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:      %[[R1:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<32x16xf32>) outs(%[[R0]] : tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:      scf.yield %[[R1]]
func.func @dependent_through_init(%x: tensor<8x32xf32>, %w0: tensor<32x16xf32>, %w1: tensor<32x16xf32>, %init: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> tensor<8x16xf32> {
    %0 = linalg.matmul ins(%x, %w0 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%acc : tensor<8x16xf32>) -> tensor<8x16xf32>
    %1 = linalg.matmul ins(%x, %w1 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%0 : tensor<8x16xf32>) -> tensor<8x16xf32>
    scf.yield %1 : tensor<8x16xf32>
  }
  return %r : tensor<8x16xf32>
}

// -----

// Same LHS value read as [M, K] by one member and as [K, M] by the other:
// different K, different maps.
// CHECK-LABEL: func.func @different_k
// CHECK-NEXT:    linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<32x8xf32>) outs(%{{.*}} : tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT:    linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<16x8xf32>) outs(%{{.*}} : tensor<32x8xf32>) -> tensor<32x8xf32>
// CHECK-NEXT:    return
func.func @different_k(%x: tensor<16x32xf32>, %w0: tensor<32x8xf32>, %w1: tensor<16x8xf32>, %i0: tensor<16x8xf32>, %i1: tensor<32x8xf32>) -> (tensor<16x8xf32>, tensor<32x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<16x32xf32>, tensor<32x8xf32>) outs(%i0 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%x, %w1 : tensor<16x32xf32>, tensor<16x8xf32>) outs(%i1 : tensor<32x8xf32>) -> tensor<32x8xf32>
  return %0, %1 : tensor<16x8xf32>, tensor<32x8xf32>
}

// -----

// A mixed-precision member (f16 x f32) is not a candidate at all.
// CHECK-LABEL: func.func @different_weight_types
// CHECK-NEXT:    linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x16xf16>, tensor<16x8xf16>)
// CHECK-NEXT:    linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x16xf16>, tensor<16x8xf32>)
// CHECK-NEXT:    return
func.func @different_weight_types(%x: tensor<8x16xf16>, %w0: tensor<16x8xf16>, %w1: tensor<16x8xf32>, %i0: tensor<8x8xf32>, %i1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf16>, tensor<16x8xf16>) outs(%i0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.matmul ins(%x, %w1 : tensor<8x16xf16>, tensor<16x8xf32>) outs(%i1 : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// CHECK-LABEL: func.func @single_member
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<16x8xf32>) outs(%{{.*}} : tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    return %[[R]]
func.func @single_member(%x: tensor<8x16xf32>, %w0: tensor<16x8xf32>, %i0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// One member adds a bias, the other does not (a parallel attention + MLP
// block: bias-free Q/K/V, biased fc_in): they merge, the bias-free member
// with a bias of -0.0, which leaves every value as it was (x + -0.0 == x,
// -0.0 included). The bias-add over the whole becomes the merged GEMM's
// epilogue.
// CHECK-LABEL: func.func @bias_on_one_member
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xf32>, %[[W0:.*]]: tensor<16x8xf32>, %[[W1:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[I:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant dense<-0.000000e+00> : tensor<8xf32>
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.concat dim(1) %[[I]], %[[I]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<8x16xf32>, tensor<16x16xf32>) outs(%[[INIT]] : tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[BIAS:.*]] = tensor.concat dim(0) %[[B]], %[[ZERO]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[BIAS]] : tensor<8x16xf32>, tensor<16xf32>) outs(%[[E]] : tensor<8x16xf32>)
// CHECK:           arith.addf
// CHECK:         %[[S0:.*]] = tensor.extract_slice %[[ADD]][0, 0] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[ADD]][0, 8] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
func.func @bias_on_one_member(%x: tensor<8x16xf32>, %w0: tensor<16x8xf32>, %w1: tensor<16x8xf32>, %b: tensor<8xf32>, %i: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
       ins(%0, %b : tensor<8x8xf32>, tensor<8xf32>) outs(%i : tensor<8x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %2 = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// The same in bf16 with the bias-free member first and of another width:
// its -0.0 bias comes first in the concatenation, at its own width.
// CHECK-LABEL: func.func @bias_on_second_member_bf16
// CHECK-SAME:    (%{{.*}}: tensor<4x16xbf16>, %{{.*}}: tensor<16x24xbf16>, %{{.*}}: tensor<16x8xbf16>, %[[B:.*]]: tensor<8xbf16>,
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant dense<-0.000000e+00> : tensor<24xbf16>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x16xbf16>, tensor<16x32xbf16>)
// CHECK-NEXT:    %[[BIAS:.*]] = tensor.concat dim(0) %[[ZERO]], %[[B]] : (tensor<24xbf16>, tensor<8xbf16>) -> tensor<32xbf16>
// CHECK:         linalg.generic {{.*}} ins(%[[MM]], %[[BIAS]] : tensor<4x32xbf16>, tensor<32xbf16>)
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [4, 24] [1, 1] : tensor<4x32xbf16> to tensor<4x24xbf16>
// CHECK-NEXT:    tensor.extract_slice %{{.*}}[0, 24] [4, 8] [1, 1] : tensor<4x32xbf16> to tensor<4x8xbf16>
func.func @bias_on_second_member_bf16(%x: tensor<4x16xbf16>, %w0: tensor<16x24xbf16>, %w1: tensor<16x8xbf16>, %b: tensor<8xbf16>, %i0: tensor<4x24xbf16>, %i1: tensor<4x8xbf16>) -> (tensor<4x24xbf16>, tensor<4x8xbf16>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<4x16xbf16>, tensor<16x24xbf16>) outs(%i0 : tensor<4x24xbf16>) -> tensor<4x24xbf16>
  %1 = linalg.matmul ins(%x, %w1 : tensor<4x16xbf16>, tensor<16x8xbf16>) outs(%i1 : tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
       ins(%1, %b : tensor<4x8xbf16>, tensor<8xbf16>) outs(%i1 : tensor<4x8xbf16>) {
  ^bb0(%a: bf16, %c: bf16, %o: bf16):
    %s = arith.addf %a, %c : bf16
    linalg.yield %s : bf16
  } -> tensor<4x8xbf16>
  return %0, %2 : tensor<4x24xbf16>, tensor<4x8xbf16>
}

// -----

// A multiply by a row vector is not a bias-add: the matmuls merge (neither
// has a bias) and the multiply reads its slice.
// CHECK-LABEL: func.func @not_a_bias_add
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<16x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[I:.*]]: tensor<8x8xf32>)
// CHECK:         %[[INIT:.*]] = tensor.concat dim(1) %[[I]], %[[I]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul {{.*}} outs(%[[INIT]] : tensor<8x16xf32>)
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [8, 8] [1, 1]
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 8] [8, 8] [1, 1]
// CHECK-NEXT:    %[[MUL:.*]] = linalg.generic {{.*}} ins(%[[S0]], %[[B]] : tensor<8x8xf32>, tensor<8xf32>)
// CHECK:           arith.mulf
// CHECK:         return %[[MUL]], %[[S1]]
func.func @not_a_bias_add(%x: tensor<8x16xf32>, %w0: tensor<16x8xf32>, %w1: tensor<16x8xf32>, %b: tensor<8xf32>, %i: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
       ins(%0, %b : tensor<8x8xf32>, tensor<8xf32>) outs(%i : tensor<8x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.mulf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %2 = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// The second weight is produced after a user of the first result (without
// depending on it): no point in the block is after every operand and before
// every use, so the group is not formed.
// CHECK-LABEL: func.func @no_legal_placement
// CHECK-NOT:     tensor.concat
// CHECK:         %[[R0:.*]] = linalg.matmul
// CHECK-NEXT:    %[[USE:.*]] = linalg.copy ins(%[[R0]]
// CHECK-NEXT:    %[[W1:.*]] = linalg.copy
// CHECK-NEXT:    %[[R1:.*]] = linalg.matmul ins(%{{.*}}, %[[W1]]
// CHECK-NEXT:    return %[[USE]], %[[R1]]
func.func @no_legal_placement(%x: tensor<8x16xf32>, %w0: tensor<16x8xf32>, %w1: tensor<16x8xf32>, %i: tensor<8x8xf32>, %o: tensor<8x8xf32>, %e: tensor<16x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %u = linalg.copy ins(%0 : tensor<8x8xf32>) outs(%o : tensor<8x8xf32>) -> tensor<8x8xf32>
  %w1b = linalg.copy ins(%w1 : tensor<16x8xf32>) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = linalg.matmul ins(%x, %w1b : tensor<8x16xf32>, tensor<16x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %u, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Shared RHS leaves each member's bias-add on its slice, so the bias-add of
// the first member is a user that must follow the merged matmul; here it
// precedes the second member's input, so nothing merges. (Found by the
// random-graph differential test.)
// CHECK-LABEL: func.func @shared_rhs_bias_before_second_input
// CHECK-NOT:     tensor.concat
// CHECK-COUNT-2: linalg.matmul ins
// CHECK:         return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d1)>
func.func @shared_rhs_bias_before_second_input(%x1: tensor<4x16xf32>, %a: tensor<7x16xf32>, %w: tensor<16x9xf32>, %b: tensor<9xf32>) -> (tensor<4x9xf32>, tensor<7x9xf32>) {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x9xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x9xf32>) -> tensor<4x9xf32>
  %mm1 = linalg.matmul ins(%x1, %w : tensor<4x16xf32>, tensor<16x9xf32>) outs(%f1 : tensor<4x9xf32>) -> tensor<4x9xf32>
  %y1 = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%mm1, %b : tensor<4x9xf32>, tensor<9xf32>) outs(%e1 : tensor<4x9xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x9xf32>
  %e2 = tensor.empty() : tensor<7x16xf32>
  %x2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<7x16xf32>) outs(%e2 : tensor<7x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.mulf %p, %p : f32
    linalg.yield %s : f32
  } -> tensor<7x16xf32>
  %e3 = tensor.empty() : tensor<7x9xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<7x9xf32>) -> tensor<7x9xf32>
  %mm2 = linalg.matmul ins(%x2, %w : tensor<7x16xf32>, tensor<16x9xf32>) outs(%f3 : tensor<7x9xf32>) -> tensor<7x9xf32>
  return %y1, %mm2 : tensor<4x9xf32>, tensor<7x9xf32>
}

// -----

// A linalg.add whose init (ignored by linalg.add) is the matmul result is
// not a bias-add of that matmul: the matmuls merge without bias and each add
// keeps its operands, writing into its slice. (Found by review.)
// CHECK-LABEL: func.func @add_into_matmul_init_is_not_bias
// CHECK-SAME:    (%{{.*}}: tensor<2x2xf32>, %{{.*}}: tensor<2x2xf32>, %{{.*}}: tensor<2x2xf32>, %[[B1:.*]]: tensor<2xf32>, %[[B2:.*]]: tensor<2xf32>, %[[Z:.*]]: tensor<2x2xf32>)
// CHECK:         %[[MM:.*]] = linalg.matmul {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [2, 2] [1, 1]
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 2] [2, 2] [1, 1]
// CHECK:         %[[BC1:.*]] = linalg.broadcast ins(%[[B1]]
// CHECK-NEXT:    %[[R1:.*]] = linalg.add ins(%[[BC1]], %[[Z]] : tensor<2x2xf32>, tensor<2x2xf32>) outs(%[[S0]] : tensor<2x2xf32>)
// CHECK-NEXT:    %[[BC2:.*]] = linalg.broadcast ins(%[[B2]]
// CHECK-NEXT:    %[[R2:.*]] = linalg.add ins(%[[BC2]], %[[Z]] : tensor<2x2xf32>, tensor<2x2xf32>) outs(%[[S1]] : tensor<2x2xf32>)
// CHECK-NEXT:    return %[[R1]], %[[R2]]
func.func @add_into_matmul_init_is_not_bias(%x: tensor<2x2xf32>, %w1: tensor<2x2xf32>, %w2: tensor<2x2xf32>, %b1: tensor<2xf32>, %b2: tensor<2xf32>, %z: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %m1 = linalg.matmul ins(%x, %w1 : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %bc1 = linalg.broadcast ins(%b1 : tensor<2xf32>) outs(%e : tensor<2x2xf32>) dimensions = [0]
  %r1 = linalg.add ins(%bc1, %z : tensor<2x2xf32>, tensor<2x2xf32>) outs(%m1 : tensor<2x2xf32>) -> tensor<2x2xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %bc2 = linalg.broadcast ins(%b2 : tensor<2xf32>) outs(%e : tensor<2x2xf32>) dimensions = [0]
  %r2 = linalg.add ins(%bc2, %z : tensor<2x2xf32>, tensor<2x2xf32>) outs(%m2 : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %r1, %r2 : tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// min-group-size=3: {a, b} is too small (c and d depend on a), but once a is
// set aside, {b, c, d} is a legal group of three. (Found by review: a
// discarded group used to take its members down with it.)
// MIN3-LABEL: func.func @min_group_retries_without_head
// MIN3:         %[[A:.*]] = linalg.matmul {{.*}} -> tensor<8x8xf32>
// MIN3:         linalg.matmul {{.*}} -> tensor<8x24xf32>
// MIN3-NOT:     linalg.matmul
// MIN3:         return
func.func @min_group_retries_without_head(%x: tensor<8x8xf32>, %wa: tensor<8x8xf32>, %wb: tensor<8x8xf32>, %i: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %a = linalg.matmul ins(%x, %wa : tensor<8x8xf32>, tensor<8x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %b = linalg.matmul ins(%x, %wb : tensor<8x8xf32>, tensor<8x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %wc = arith.negf %a : tensor<8x8xf32>
  %wd = arith.addf %a, %a : tensor<8x8xf32>
  %c = linalg.matmul ins(%x, %wc : tensor<8x8xf32>, tensor<8x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %d = linalg.matmul ins(%x, %wd : tensor<8x8xf32>, tensor<8x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %a, %b, %c, %d : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// torch-mlir's bf16 nn.Linear with a bias computes in f32: each weight is
// transposed and cast (extf) right before its own matmul, after the users of
// the previous one. Computed from `linfuse.weight` arguments alone, those
// producers are re-materialized at the merged matmul (the originals die), so
// they do not block the merge.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @weight_casts_after_users
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[W0:.*]]: tensor<4x8xbf16> {linfuse.weight}, %[[W1:.*]]: tensor<4x8xbf16> {linfuse.weight})
// CHECK:         %[[T0:.*]] = linalg.transpose ins(%[[W0]]
// CHECK:         %[[C0:.*]] = linalg.generic {{.*}} ins(%[[T0]] : tensor<8x4xbf16>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK:           arith.extf
// CHECK:         %[[T1:.*]] = linalg.transpose ins(%[[W1]]
// CHECK-NEXT:    %[[C1:.*]] = linalg.generic {{.*}} ins(%[[T1]] : tensor<8x4xbf16>) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK:           arith.extf
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[C0]], %[[C1]] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]]
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[M]]) : tensor<?x8xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill {{.*}} outs(%[[E]] : tensor<?x8xf32>)
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<8x8xf32>) outs(%[[F]] : tensor<?x8xf32>)
// The members' truncations to bf16, the same element-wise op on each
// slice, merge into one over the merged result; the slices come after it.
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty(%[[M]]) : tensor<?x8xbf16>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<?x8xf32>) outs(%[[E2]] : tensor<?x8xbf16>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[T]] : bf16
// CHECK-NEXT:    } -> tensor<?x8xbf16>
// CHECK-NEXT:    %[[R0:.*]] = tensor.extract_slice %[[R]][0, 0] [%[[M]], 4] [1, 1] : tensor<?x8xbf16> to tensor<?x4xbf16>
// CHECK-NEXT:    %[[R1:.*]] = tensor.extract_slice %[[R]][0, 4] [%[[M]], 4] [1, 1] : tensor<?x8xbf16> to tensor<?x4xbf16>
// CHECK-NEXT:    return %[[R0]], %[[R1]]
// CHECK-NOT:     linalg.matmul
// REMARK: remark: merged 2 matmuls sharing %arg0 into one ?x8 GEMM
// REMARK: remark: merged 2 element-wise epilogues of slices into one over the ?x8 result
func.func @weight_casts_after_users(%x: tensor<?x8xf32>, %w0: tensor<4x8xbf16> {linfuse.weight}, %w1: tensor<4x8xbf16> {linfuse.weight}) -> (tensor<?x4xbf16>, tensor<?x4xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %te = tensor.empty() : tensor<8x4xbf16>
  %ce = tensor.empty() : tensor<8x4xf32>
  %t0 = linalg.transpose ins(%w0 : tensor<4x8xbf16>) outs(%te : tensor<8x4xbf16>) permutation = [1, 0]
  %c0w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t0 : tensor<8x4xbf16>) outs(%ce : tensor<8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %mm0 = linalg.matmul ins(%x, %c0w : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %eb = tensor.empty(%m) : tensor<?x4xbf16>
  %r0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0 : tensor<?x4xf32>) outs(%eb : tensor<?x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<?x4xbf16>
  %t1 = linalg.transpose ins(%w1 : tensor<4x8xbf16>) outs(%te : tensor<8x4xbf16>) permutation = [1, 0]
  %c1w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<8x4xbf16>) outs(%ce : tensor<8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %mm1 = linalg.matmul ins(%x, %c1w : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm1 : tensor<?x4xf32>) outs(%eb : tensor<?x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<?x4xbf16>
  return %r0, %r1 : tensor<?x4xbf16>, tensor<?x4xbf16>
}

// -----

// The same with constant weights, a reshape on the way (tensor.collapse_shape)
// and a producer already above the merged op: what is above stays, what is
// below is cloned up.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @constant_weight_producers
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-DAG:     %[[CW1:.*]] = arith.constant dense<2.000000e+00> : tensor<8x4xf16>
// CHECK-DAG:     %[[CW0:.*]] = arith.constant dense<1.000000e+00> : tensor<8x4xf16>
// CHECK:         %[[C0:.*]] = linalg.generic {{.*}} ins(%[[CW0]] : tensor<8x4xf16>)
// CHECK:         %[[C1:.*]] = linalg.generic {{.*}} ins(%[[CW1]] : tensor<8x4xf16>)
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[C0]], %[[C1]] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [4, 4] [1, 1]
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 4] [4, 4] [1, 1]
// CHECK:         %[[U:.*]] = linalg.generic {{.*}} ins(%[[S0]] : tensor<4x4xf32>)
// CHECK:         return %[[U]], %[[S1]]
// REMARK: remark: merged 2 matmuls sharing %arg0 into one 4x8 GEMM
func.func @constant_weight_producers(%x: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %w0 = arith.constant dense<1.0> : tensor<8x4xf16>
  %ce = tensor.empty() : tensor<8x4xf32>
  %c0w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w0 : tensor<8x4xf16>) outs(%ce : tensor<8x4xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm0 = linalg.matmul ins(%x, %c0w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %u0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %in : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %w1 = arith.constant dense<2.0> : tensor<2x4x4xf16>
  %w1c = tensor.collapse_shape %w1 [[0, 1], [2]] : tensor<2x4x4xf16> into tensor<8x4xf16>
  %c1w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w1c : tensor<8x4xf16>) outs(%ce : tensor<8x4xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %mm1 = linalg.matmul ins(%x, %c1w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u0, %mm1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Negative: the second weight is computed from a `linfuse.weight` argument
// and a run-time argument after the first result's user. It is not weight
// preprocessing (it changes every call), so it is not moved and the group
// has no legal placement.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @weight_producer_reads_runtime_value
// CHECK-NOT:     tensor.concat
// CHECK:         %[[R0:.*]] = linalg.matmul
// CHECK-NEXT:    %[[U:.*]] = linalg.generic {{.*}} ins(%[[R0]]
// CHECK:         %[[W1:.*]] = linalg.generic
// CHECK:         %[[R1:.*]] = linalg.matmul ins(%{{.*}}, %[[W1]]
// CHECK-NEXT:    return %[[U]], %[[R1]]
// REMARK: remark: not merged with the matmul at {{.*}}, both reading %arg0: no place for the merged matmul: linalg.generic at {{.*}} uses one before linalg.generic at {{.*}} defines what the other reads
func.func @weight_producer_reads_runtime_value(%x: tensor<4x8xf32>, %w0: tensor<8x4xf32> {linfuse.weight}, %w1: tensor<8x4xf32> {linfuse.weight}, %s: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %u0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %in : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %we = tensor.empty() : tensor<8x4xf32>
  %w1s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%w1, %s : tensor<8x4xf32>, tensor<8x4xf32>) outs(%we : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %mm1 = linalg.matmul ins(%x, %w1s : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u0, %mm1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// torch-mlir's bias-add: the bias broadcast to [M, N] by a linalg.generic,
// then an element-wise add, here with torch's `alpha` multiply by 1 (a
// constant captured from above in one, defined in the body in the other,
// summands in either order). Both are bias-adds: the biases are
// concatenated, one bias-add follows the merged matmul, and the broadcasts
// die with the adds.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @torch_bias_broadcast
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[W0:.*]]: tensor<8x8xf32>, %[[W1:.*]]: tensor<8x4xf32>, %[[B0:.*]]: tensor<8xf32>, %[[B1:.*]]: tensor<4xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x12xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]]
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[M]]) : tensor<?x12xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x8xf32>, tensor<8x12xf32>) outs(%[[F]] : tensor<?x12xf32>)
// CHECK-NEXT:    %[[B:.*]] = tensor.concat dim(0) %[[B0]], %[[B1]] : (tensor<8xf32>, tensor<4xf32>) -> tensor<12xf32>
// CHECK-NEXT:    %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[B]] : tensor<?x12xf32>, tensor<12xf32>) outs(%[[E]] : tensor<?x12xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    } -> tensor<?x12xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[ADD]][0, 0] [%[[M]], 8] [1, 1] : tensor<?x12xf32> to tensor<?x8xf32>
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[ADD]][0, 8] [%[[M]], 4] [1, 1] : tensor<?x12xf32> to tensor<?x4xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]]
// REMARK: remark: merged 2 matmuls sharing %arg0 (with their bias-adds) into one ?x12 GEMM
func.func @torch_bias_broadcast(%x: tensor<?x8xf32>, %w0: tensor<8x8xf32>, %w1: tensor<8x4xf32>, %b0: tensor<8xf32>, %b1: tensor<4xf32>) -> (tensor<?x8xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e0 = tensor.empty(%m) : tensor<?x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f0 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %bb0 = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<8xf32>) outs(%e0 : tensor<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x8xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0, %bb0 : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e0 : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %b, %one : f32
    %v = arith.addf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x8xf32>
  %e1 = tensor.empty(%m) : tensor<?x4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %mm1 = linalg.matmul ins(%x, %w1 : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %bb1 = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b1 : tensor<4xf32>) outs(%e1 : tensor<?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x4xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%bb1, %mm1 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e1 : tensor<?x4xf32>) {
  ^bb0(%b: f32, %a: f32, %out: f32):
    %c1 = arith.constant 1.0 : f32
    %s = arith.mulf %c1, %b : f32
    %v = arith.addf %s, %a : f32
    linalg.yield %v : f32
  } -> tensor<?x4xf32>
  return %r0, %r1 : tensor<?x8xf32>, tensor<?x4xf32>
}

// -----

// Negative: torch.add(y, b, alpha=2) adds 2·b, which is not the bias b. The
// matmuls still merge (neither has a bias-add) and each add keeps reading
// its slice and its broadcast.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @torch_bias_alpha_two
// CHECK-SAME:    (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<8x4xf32>, %[[B0:.*]]: tensor<4xf32>, %[[B1:.*]]: tensor<4xf32>)
// CHECK:         %[[MM:.*]] = linalg.matmul {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT:    %[[S0:.*]] = tensor.extract_slice %[[MM]][0, 0] [4, 4] [1, 1]
// CHECK-NEXT:    %[[S1:.*]] = tensor.extract_slice %[[MM]][0, 4] [4, 4] [1, 1]
// CHECK:         %[[BB0:.*]] = linalg.generic {{.*}} ins(%[[B0]] : tensor<4xf32>)
// CHECK:         %[[R0:.*]] = linalg.generic {{.*}} ins(%[[S0]], %[[BB0]] : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:           arith.mulf
// CHECK:         %[[BB1:.*]] = linalg.generic {{.*}} ins(%[[B1]] : tensor<4xf32>)
// CHECK:         %[[R1:.*]] = linalg.generic {{.*}} ins(%[[S1]], %[[BB1]] : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:         return %[[R0]], %[[R1]]
// REMARK: remark: merged 2 matmuls sharing %arg0 into one 4x8 GEMM
func.func @torch_bias_alpha_two(%x: tensor<4x8xf32>, %w0: tensor<8x4xf32>, %w1: tensor<8x4xf32>, %b0: tensor<4xf32>, %b1: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %bb0 = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0, %bb0 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %b, %two : f32
    %v = arith.addf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %mm1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %bb1 = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%b1 : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm1, %bb1 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %b, %two : f32
    %v = arith.addf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r0, %r1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Dequantization (int8 weights times a per-column scale, all `linfuse.weight`
// arguments) right before each matmul, the second after the first result's
// user: re-materialized like a cast; the dequantized weights are
// concatenated (for the packing function) and the matmuls merge.
// CHECK-LABEL: func.func @dequantized_weights_after_users
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[Q0:.*]]: tensor<8x4xi8> {linfuse.weight}, %[[S0:.*]]: tensor<4xf32> {linfuse.weight}, %[[Q1:.*]]: tensor<8x4xi8> {linfuse.weight}, %[[S1:.*]]: tensor<4xf32> {linfuse.weight})
// CHECK:         %[[W0:.*]] = linalg.generic {{.*}} ins(%[[Q0]], %[[S0]] : tensor<8x4xi8>, tensor<4xf32>)
// CHECK:         %[[W1:.*]] = linalg.generic {{.*}} ins(%[[Q1]], %[[S1]] : tensor<8x4xi8>, tensor<4xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(1) %[[W0]], %[[W1]] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT:    %[[SL0:.*]] = tensor.extract_slice %[[MM]][0, 0] [4, 4] [1, 1]
// CHECK-NEXT:    %[[SL1:.*]] = tensor.extract_slice %[[MM]][0, 4] [4, 4] [1, 1]
// CHECK:         %[[U:.*]] = linalg.generic {{.*}} ins(%[[SL0]] : tensor<4x4xf32>)
// CHECK:         return %[[U]], %[[SL1]]
// CHECK-NOT:     linalg.matmul
// REMARK: remark: merged 2 matmuls sharing %arg0 into one 4x8 GEMM
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @dequantized_weights_after_users(%x: tensor<4x8xf32>, %q0: tensor<8x4xi8> {linfuse.weight}, %s0: tensor<4xf32> {linfuse.weight}, %q1: tensor<8x4xi8> {linfuse.weight}, %s1: tensor<4xf32> {linfuse.weight}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %we = tensor.empty() : tensor<8x4xf32>
  %w0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%q0, %s0 : tensor<8x4xi8>, tensor<4xf32>) outs(%we : tensor<8x4xf32>) {
  ^bb0(%q: i8, %s: f32, %out: f32):
    %qf = arith.sitofp %q : i8 to f32
    %v = arith.mulf %qf, %s : f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %u0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %in : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%q1, %s1 : tensor<8x4xi8>, tensor<4xf32>) outs(%we : tensor<8x4xf32>) {
  ^bb0(%q: i8, %s: f32, %out: f32):
    %qf = arith.sitofp %q : i8 to f32
    %v = arith.mulf %qf, %s : f32
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %mm1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u0, %mm1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Negative: a weight computed by a matmul (here a product of two
// `linfuse.weight` arguments) after the first result's user is not
// re-materialized: matmuls may be members of other groups, so they never
// move. The group has no legal placement.
// CHECK-LABEL: func.func @weight_product_stays
// CHECK-NOT:     tensor.concat
// CHECK:         %[[R0:.*]] = linalg.matmul
// CHECK-NEXT:    %[[U:.*]] = linalg.generic {{.*}} ins(%[[R0]]
// CHECK:         %[[P:.*]] = linalg.matmul
// CHECK-NEXT:    %[[R1:.*]] = linalg.matmul ins(%{{.*}}, %[[P]]
// CHECK-NEXT:    return %[[U]], %[[R1]]
// REMARK: remark: not merged with the matmul at {{.*}}, both reading %arg0: no place for the merged matmul: linalg.generic at {{.*}} uses one before linalg.matmul at {{.*}} defines what the other reads
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @weight_product_stays(%x: tensor<4x8xf32>, %w0: tensor<8x4xf32> {linfuse.weight}, %a: tensor<8x2xf32> {linfuse.weight}, %b: tensor<2x4xf32> {linfuse.weight}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %u0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %in : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %pe = tensor.empty() : tensor<8x4xf32>
  %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<8x4xf32>) -> tensor<8x4xf32>
  %p = linalg.matmul ins(%a, %b : tensor<8x2xf32>, tensor<2x4xf32>) outs(%pf : tensor<8x4xf32>) -> tensor<8x4xf32>
  %mm1 = linalg.matmul ins(%x, %p : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u0, %mm1 : tensor<4x4xf32>, tensor<4x4xf32>
}
