// Contractions in other spellings merge like linalg.matmul once
// --linfuse-optimize has specialized them: three IREE-style f16 generics
// (extf in the body, f32 accumulation, truncf after) sharing their input,
// three decode matvecs (M = 1) sharing their vector, and two
// linalg.contract ops sharing their input each become ONE matmul.
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// The lowerings raise the merged contraction to one linfuse.gemm (and the
// unmerged ones, without --linfuse-optimize, to one each: no loops).
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --linfuse-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: linfuse-opt %s -split-input-file --linfuse-lower-to-cpu | FileCheck %s --check-prefix=CPU-NOOPT
// RUN: linfuse-opt %s -split-input-file --linfuse-optimize --linfuse-lower-to-cuda | FileCheck %s --check-prefix=CUDA

// STATS:      linfuse-specialize-contractions
// STATS-NEXT:   (S) 8 contractions-specialized
// STATS:      linfuse-merge-parallel-matmuls
// STATS-NEXT:   (S) 3 groups-merged
// STATS-NEXT:   (S) 5 matmuls-removed
// STATS-NEXT:   (S) 86016 bytes-concatenated
// STATS-NEXT:   (S) 2 epilogues-merged

// CHECK-DAG:   #[[MK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @qkv_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf16>, %[[WQ:.*]]: tensor<64x64xf16>, %[[WK:.*]]: tensor<16x64xf16>, %[[WV:.*]]: tensor<16x64xf16>)
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<64x64xf16>, tensor<16x64xf16>, tensor<16x64xf16>) -> tensor<96x64xf16>
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x96xf32>) -> tensor<?x96xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#[[MK]], #[[NK]], #[[MN]]] ins(%[[X]], %[[W]] : tensor<?x64xf16>, tensor<96x64xf16>) outs(%[[F]] : tensor<?x96xf32>) -> tensor<?x96xf32>
// The three truncations to f16 merge too: one pass over the merged result.
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x96xf16>
// CHECK-NEXT:    %[[H:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<?x96xf32>) outs(%[[E]] : tensor<?x96xf16>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f16):
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[IN]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[T]] : f16
// CHECK-NEXT:    } -> tensor<?x96xf16>
// CHECK-NEXT:    %[[QH:.*]] = tensor.extract_slice %[[H]][0, 0] [%{{.*}}, 64] [1, 1] : tensor<?x96xf16> to tensor<?x64xf16>
// CHECK-NEXT:    %[[KH:.*]] = tensor.extract_slice %[[H]][0, 64] [%{{.*}}, 16] [1, 1] : tensor<?x96xf16> to tensor<?x16xf16>
// CHECK-NEXT:    %[[VH:.*]] = tensor.extract_slice %[[H]][0, 80] [%{{.*}}, 16] [1, 1] : tensor<?x96xf16> to tensor<?x16xf16>
// CHECK-NEXT:    return %[[QH]], %[[KH]], %[[VH]]
// CHECK-NOT:     linalg.matmul
// One GEMM, f16 inputs, f32 accumulation, and the truncation to f16 done
// by the GEMM itself (rounded once, to nearest even, as truncf does): the
// runtime's linfuse_cpu_gemm_f16_f16 / linfuse_cuda_gemm_f16_f16, and no
// conversion loop after it.
// CPU-LABEL: llvm.func @qkv_f16
// CPU-NOT:     llvm.fptrunc
// CPU-COUNT-1: llvm.call @linfuse_cpu_gemm_f16_f16
// CPU-NOT:     llvm.call @linfuse_cpu_gemm
// CPU-NOT:     llvm.fptrunc
// CPU:         llvm.return
// CPU-NOOPT-LABEL: llvm.func @qkv_f16
// CPU-NOOPT-COUNT-3: llvm.call @linfuse_cpu_gemm_f16_f16
// CPU-NOOPT-NOT:     llvm.call @linfuse_cpu_gemm
// CPU-NOOPT:         llvm.return
// CUDA-LABEL: llvm.func @qkv_f16
// CUDA-COUNT-1: llvm.call @linfuse_cuda_gemm_f16_f16
// CUDA-NOT:     llvm.call @linfuse_cuda_gemm
// CUDA:         llvm.return

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @qkv_f16(%x: tensor<?x64xf16>, %wq: tensor<64x64xf16>, %wk: tensor<16x64xf16>, %wv: tensor<16x64xf16>)
    -> (tensor<?x64xf16>, tensor<?x16xf16>, tensor<?x16xf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf16>
  %e64 = tensor.empty(%m) : tensor<?x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %e16 = tensor.empty(%m) : tensor<?x16xf32>
  %f16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %q = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wq : tensor<?x64xf16>, tensor<64x64xf16>) outs(%f64 : tensor<?x64xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %k = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wk : tensor<?x64xf16>, tensor<16x64xf16>) outs(%f16 : tensor<?x16xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  %v = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wv : tensor<?x64xf16>, tensor<16x64xf16>) outs(%f16 : tensor<?x16xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  %h64 = tensor.empty(%m) : tensor<?x64xf16>
  %qh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<?x64xf32>) outs(%h64 : tensor<?x64xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x64xf16>
  %h16 = tensor.empty(%m) : tensor<?x16xf16>
  %kh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%k : tensor<?x16xf32>) outs(%h16 : tensor<?x16xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x16xf16>
  %vh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%v : tensor<?x16xf32>) outs(%h16 : tensor<?x16xf16>) {
  ^bb0(%a: f32, %o: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<?x16xf16>
  return %qh, %kh, %vh : tensor<?x64xf16>, tensor<?x16xf16>, tensor<?x16xf16>
}

// -----

// Decode: x is one vector; the three matvecs become one-row matmuls over
// the same 1x64 view of it, merged into one 1x96 GEMM.
// CHECK-DAG:   #[[MK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @qkv_matvec
// CHECK-SAME:    (%[[X:.*]]: tensor<64xf32>, %[[WQ:.*]]: tensor<64x64xf32>, %[[WK:.*]]: tensor<16x64xf32>, %[[WV:.*]]: tensor<16x64xf32>)
// CHECK:         %[[XR:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1]] output_shape [1, 64] : tensor<64xf32> into tensor<1x64xf32>
// CHECK-NEXT:    %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WK]], %[[WV]] : (tensor<64x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<96x64xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<1x96xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x96xf32>) -> tensor<1x96xf32>
// CHECK-NEXT:    %[[MM:.*]] = linalg.matmul indexing_maps = [#[[MK]], #[[NK]], #[[MN]]] ins(%[[XR]], %[[W]] : tensor<1x64xf32>, tensor<96x64xf32>) outs(%[[F]] : tensor<1x96xf32>) -> tensor<1x96xf32>
// CHECK-NEXT:    %[[Q:.*]] = tensor.extract_slice %[[MM]][0, 0] [1, 64] [1, 1] : tensor<1x96xf32> to tensor<1x64xf32>
// CHECK-NEXT:    %[[K:.*]] = tensor.extract_slice %[[MM]][0, 64] [1, 16] [1, 1] : tensor<1x96xf32> to tensor<1x16xf32>
// CHECK-NEXT:    %[[V:.*]] = tensor.extract_slice %[[MM]][0, 80] [1, 16] [1, 1] : tensor<1x96xf32> to tensor<1x16xf32>
// CHECK-NEXT:    %[[QC:.*]] = tensor.collapse_shape %[[Q]] {{\[}}[0, 1]] : tensor<1x64xf32> into tensor<64xf32>
// CHECK-NEXT:    %[[KC:.*]] = tensor.collapse_shape %[[K]] {{\[}}[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
// CHECK-NEXT:    %[[VC:.*]] = tensor.collapse_shape %[[V]] {{\[}}[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
// CHECK-NEXT:    return %[[QC]], %[[KC]], %[[VC]]
// CPU-LABEL: llvm.func @qkv_matvec
// CPU-COUNT-1: llvm.call @linfuse_cpu_gemm_f32_f32
// CPU-NOT:     llvm.call @linfuse_cpu_gemm
// CPU:         llvm.return
// CPU-NOOPT-LABEL: llvm.func @qkv_matvec
// CPU-NOOPT-COUNT-3: llvm.call @linfuse_cpu_gemm_f32_f32
// CPU-NOOPT-NOT:     llvm.call @linfuse_cpu_gemm
// CPU-NOOPT:         llvm.return
// CUDA-LABEL: llvm.func @qkv_matvec
// CUDA-COUNT-1: llvm.call @linfuse_cuda_gemm_f32_f32
// CUDA-NOT:     llvm.call @linfuse_cuda_gemm
// CUDA:         llvm.return
func.func @qkv_matvec(%x: tensor<64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<16x64xf32>, %wv: tensor<16x64xf32>)
    -> (tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e64 = tensor.empty() : tensor<64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<64xf32>) -> tensor<64xf32>
  %e16 = tensor.empty() : tensor<16xf32>
  %f16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<16xf32>) -> tensor<16xf32>
  %q = linalg.matvec ins(%wq, %x : tensor<64x64xf32>, tensor<64xf32>) outs(%f64 : tensor<64xf32>) -> tensor<64xf32>
  %k = linalg.matvec ins(%wk, %x : tensor<16x64xf32>, tensor<64xf32>) outs(%f16 : tensor<16xf32>) -> tensor<16xf32>
  %v = linalg.matvec ins(%wv, %x : tensor<16x64xf32>, tensor<64xf32>) outs(%f16 : tensor<16xf32>) -> tensor<16xf32>
  return %q, %k, %v : tensor<64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// gate/up as linalg.contract with nn.Linear weights.
// CHECK-LABEL: func.func @contract_pair
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf32>, %[[WG:.*]]: tensor<96x64xf32>, %[[WU:.*]]: tensor<96x64xf32>)
// CHECK:         %[[W:.*]] = tensor.concat dim(0) %[[WG]], %[[WU]] : (tensor<96x64xf32>, tensor<96x64xf32>) -> tensor<192x64xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[W]] : tensor<?x64xf32>, tensor<192x64xf32>) outs(%{{.*}} : tensor<?x192xf32>) -> tensor<?x192xf32>
// CHECK-NEXT:    %[[G:.*]] = tensor.extract_slice %[[MM]][0, 0] [%{{.*}}, 96] [1, 1] : tensor<?x192xf32> to tensor<?x96xf32>
// CHECK-NEXT:    %[[U:.*]] = tensor.extract_slice %[[MM]][0, 96] [%{{.*}}, 96] [1, 1] : tensor<?x192xf32> to tensor<?x96xf32>
// CHECK-NEXT:    return %[[G]], %[[U]]
// CPU-LABEL: llvm.func @contract_pair
// CPU-COUNT-1: llvm.call @linfuse_cpu_gemm_f32_f32
// CPU-NOT:     llvm.call @linfuse_cpu_gemm
// CPU:         llvm.return
// CPU-NOOPT-LABEL: llvm.func @contract_pair
// CPU-NOOPT-COUNT-2: llvm.call @linfuse_cpu_gemm_f32_f32
// CPU-NOOPT-NOT:     llvm.call @linfuse_cpu_gemm
// CPU-NOOPT:         llvm.return
// CUDA-LABEL: llvm.func @contract_pair
// CUDA-COUNT-1: llvm.call @linfuse_cuda_gemm_f32_f32
// CUDA-NOT:     llvm.call @linfuse_cuda_gemm
// CUDA:         llvm.return
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @contract_pair(%x: tensor<?x64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> (tensor<?x96xf32>, tensor<?x96xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x96xf32>) -> tensor<?x96xf32>
  %g = linalg.contract indexing_maps = [#mk, #nk, #mn] ins(%x, %wg : tensor<?x64xf32>, tensor<96x64xf32>) outs(%f : tensor<?x96xf32>) -> tensor<?x96xf32>
  %u = linalg.contract indexing_maps = [#mk, #nk, #mn] ins(%x, %wu : tensor<?x64xf32>, tensor<96x64xf32>) outs(%f : tensor<?x96xf32>) -> tensor<?x96xf32>
  return %g, %u : tensor<?x96xf32>, tensor<?x96xf32>
}
