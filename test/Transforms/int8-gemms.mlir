// Integer (i8 x i8 -> i32) matmuls: merged like float ones, raised to
// linfuse.gemm on the CPU (oneDNN's s8 matmul), left as loops where no
// library GEMM computes them (unsigned i8; on CUDA, layouts and sizes
// cuBLASLt's int8 kernels do not take).
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls -canonicalize -cse | FileCheck %s --check-prefix=MERGE
// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm | FileCheck %s --check-prefix=RAISE
// RUN: linfuse-opt %s -split-input-file --linfuse-raise-to-gemm=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: linfuse-opt %s -split-input-file --linfuse-merge-parallel-matmuls --linfuse-raise-to-gemm | linfuse-opt -split-input-file --verify-each -o /dev/null

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>

// Q/K/V of a quantized layer: one i8 GEMM over the concatenated weights,
// i32 slices.
// MERGE-LABEL: func.func @qkv(
// MERGE-SAME:      %[[X:.*]]: tensor<?x64xi8>, %[[WQ:.*]]: tensor<96x64xi8>, %[[WK:.*]]: tensor<32x64xi8>, %[[WV:.*]]: tensor<32x64xi8>)
// MERGE:         %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<96x64xi8>, tensor<32x64xi8>, tensor<32x64xi8>) -> tensor<160x64xi8>
// MERGE:         %[[F:.*]] = linalg.fill ins(%{{.*}} : i32) outs(%{{.*}} : tensor<?x160xi32>)
// MERGE:         %[[R:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<?x64xi8>, tensor<160x64xi8>) outs(%[[F]] : tensor<?x160xi32>) -> tensor<?x160xi32>
// MERGE-NOT:     linalg.matmul
// MERGE-DAG:     tensor.extract_slice %[[R]][0, 0] [%{{.*}}, 96] [1, 1]
// MERGE-DAG:     tensor.extract_slice %[[R]][0, 96] [%{{.*}}, 32] [1, 1]
// MERGE-DAG:     tensor.extract_slice %[[R]][0, 128] [%{{.*}}, 32] [1, 1]
// RAISE-LABEL: func.func @qkv(
// RAISE-COUNT-3: linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xi8>, tensor<{{96|32}}x64xi8>) outs(%{{.*}} : tensor<?x{{96|32}}xi32>) transpose_b -> tensor<?x{{96|32}}xi32>
// RAISE-NOT:     linalg.matmul
// On CUDA, cuBLASLt's int8 GEMM (weights N x K, N and K multiples of 4).
// CUDA-LABEL: func.func @qkv(
// CUDA-COUNT-3:  linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xi8>, tensor<{{96|32}}x64xi8>) outs(%{{.*}} : tensor<?x{{96|32}}xi32>) transpose_b -> tensor<?x{{96|32}}xi32>
// CUDA-NOT:      linalg.matmul
func.func @qkv(%x: tensor<?x64xi8>, %wq: tensor<96x64xi8>, %wk: tensor<32x64xi8>, %wv: tensor<32x64xi8>) -> (tensor<?x96xi32>, tensor<?x32xi32>, tensor<?x32xi32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = tensor.dim %x, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%m) : tensor<?x96xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x96xi32>) -> tensor<?x96xi32>
  %e2 = tensor.empty(%m) : tensor<?x32xi32>
  %f2 = linalg.fill ins(%zero : i32) outs(%e2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %q = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wq : tensor<?x64xi8>, tensor<96x64xi8>) outs(%f : tensor<?x96xi32>) -> tensor<?x96xi32>
  %k = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wk : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %v = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wv : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  return %q, %k, %v : tensor<?x96xi32>, tensor<?x32xi32>, tensor<?x32xi32>
}

// -----

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>

// Unsigned i8 (cast_unsigned): no library GEMM reads u8 x u8, so neither
// merged (the merged matmul would read it signed) nor raised.
// MERGE-LABEL: func.func @unsigned(
// MERGE-NOT:     tensor.concat
// MERGE-COUNT-2: linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] {cast = #linalg.type_fn<cast_unsigned>}
// RAISE-LABEL: func.func @unsigned(
// RAISE-NOT:     linfuse.gemm
// RAISE-COUNT-2: linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] {cast = #linalg.type_fn<cast_unsigned>}
// CUDA-LABEL: func.func @unsigned(
// CUDA-NOT:      linfuse.gemm
// CUDA-COUNT-2:  linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] {cast = #linalg.type_fn<cast_unsigned>}
func.func @unsigned(%x: tensor<?x64xi8>, %wa: tensor<32x64xi8>, %wb: tensor<32x64xi8>) -> (tensor<?x32xi32>, tensor<?x32xi32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = tensor.dim %x, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%m) : tensor<?x32xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x32xi32>) -> tensor<?x32xi32>
  %a = linalg.matmul indexing_maps = [#x, #w, #y] {cast = #linalg.type_fn<cast_unsigned>} ins(%x, %wa : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f : tensor<?x32xi32>) -> tensor<?x32xi32>
  %b = linalg.matmul indexing_maps = [#x, #w, #y] {cast = #linalg.type_fn<cast_unsigned>} ins(%x, %wb : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f : tensor<?x32xi32>) -> tensor<?x32xi32>
  return %a, %b : tensor<?x32xi32>, tensor<?x32xi32>
}

// -----

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>

// i8 into an i8 or f32 result is not a GEMM linfuse runs (the library's
// integer GEMM accumulates in i32): neither merged nor raised.
// MERGE-LABEL: func.func @i8_into_f32(
// MERGE-NOT:     tensor.concat
// RAISE-LABEL: func.func @i8_into_f32(
// RAISE-NOT:     linfuse.gemm
func.func @i8_into_f32(%x: tensor<?x64xi8>, %wa: tensor<32x64xi8>, %wb: tensor<32x64xi8>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %a = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wa : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f : tensor<?x32xf32>) -> tensor<?x32xf32>
  %b = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %wb : tensor<?x64xi8>, tensor<32x64xi8>) outs(%f : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a, %b : tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// What cuBLASLt's int8 kernels do not take stays loops on CUDA (each is a
// library GEMM on the CPU): weights stored K x N (no transpose_b), K or N
// not a multiple of 4, a dynamic N.
// CUDA-LABEL: func.func @cuda_int8_refused(
// CUDA-NOT:      linfuse.gemm
// CUDA-COUNT-4:  linalg.matmul
// CUDA-NOT:      linfuse.gemm
// RAISE-LABEL: func.func @cuda_int8_refused(
// RAISE-COUNT-4: linfuse.gemm
// RAISE-NOT:     linalg.matmul
func.func @cuda_int8_refused(%x: tensor<8x64xi8>, %wkn: tensor<64x32xi8>, %x62: tensor<8x62xi8>, %wk62: tensor<32x62xi8>, %x2: tensor<8x64xi8>, %wn30: tensor<30x64xi8>, %x3: tensor<8x64xi8>, %wdyn: tensor<?x64xi8>, %c: tensor<8x32xi32>, %c30: tensor<8x30xi32>, %cdyn: tensor<8x?xi32>) -> (tensor<8x32xi32>, tensor<8x32xi32>, tensor<8x30xi32>, tensor<8x?xi32>) {
  %kn = linalg.matmul ins(%x, %wkn : tensor<8x64xi8>, tensor<64x32xi8>) outs(%c : tensor<8x32xi32>) -> tensor<8x32xi32>
  %k62 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%x62, %wk62 : tensor<8x62xi8>, tensor<32x62xi8>) outs(%c : tensor<8x32xi32>) -> tensor<8x32xi32>
  %n30 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%x2, %wn30 : tensor<8x64xi8>, tensor<30x64xi8>) outs(%c30 : tensor<8x30xi32>) -> tensor<8x30xi32>
  %dyn = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%x3, %wdyn : tensor<8x64xi8>, tensor<?x64xi8>) outs(%cdyn : tensor<8x?xi32>) -> tensor<8x?xi32>
  return %kn, %k62, %n30, %dyn : tensor<8x32xi32>, tensor<8x32xi32>, tensor<8x30xi32>, tensor<8x?xi32>
}

// -----

// A batched int8 matmul with per-batch N x K weights: one strided-batched
// cuBLASLt int8 GEMM.
// CUDA-LABEL: func.func @cuda_int8_batched(
// CUDA:          linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x8x64xi8>, tensor<?x32x64xi8>) outs(%{{.*}} : tensor<?x8x32xi32>) transpose_b {beta = 1.000000e+00 : f32} -> tensor<?x8x32xi32>
// CUDA-NOT:      linalg.batch_matmul
func.func @cuda_int8_batched(%x: tensor<?x8x64xi8>, %w: tensor<?x32x64xi8>, %c: tensor<?x8x32xi32>) -> tensor<?x8x32xi32> {
  %r = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] ins(%x, %w : tensor<?x8x64xi8>, tensor<?x32x64xi8>) outs(%c : tensor<?x8x32xi32>) -> tensor<?x8x32xi32>
  return %r : tensor<?x8x32xi32>
}
