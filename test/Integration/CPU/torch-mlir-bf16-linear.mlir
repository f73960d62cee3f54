// torch-mlir's bf16 nn.Linear triple with bias (dynamic batch), as
// `torch_mlir.fx.export_and_import(..., output_type="linalg-on-tensors")`
// emits it, with the parameters passed as `linfuse.weight` arguments: x is
// cast to f32 once; each weight is transposed and cast to f32, and each bias
// cast, right before its own matmul (after the previous one's users); the
// bias is broadcast to [M, N] by one linalg.generic and added by another,
// whose body also carries torch's alpha multiply by 1 here. Optimized, the
// weight casts and transposes move to the packing function and the three
// matmuls with their bias-adds become one GEMM with a bias; the matmuls read
// the bf16 values the casts widened (one bf16 GEMM, f32 accumulation), and
// without packing (the GEMM check) the GEMM also takes the bias in bf16 and
// writes bf16; --no-optimize runs the three. Both compared with numpy (bf16
// results: rtol 1e-2).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 7 x:5x32:bf16 wq:32x32:bf16:0.2 bq:32:bf16 wk:16x32:bf16:0.2 bk:16:bf16 wv:16x32:bf16:0.2 bv:16:bf16
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/bq.npy --input=@%t/in/wk.npy --input=@%t/in/bk.npy --input=@%t/in/wv.npy --input=@%t/in/bv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 1e-2 --expect "x @ wq.T + bq" --expect "x @ wk.T + bk" --expect "x @ wv.T + bv" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM
// The merge itself, and the GEMM's bias:
// RUN: linfuse-opt %s --linfuse-optimize --linfuse-remarks -o /dev/null 2>&1 | FileCheck %s --check-prefix=MERGE
// RUN: linfuse-opt %s --linfuse-optimize | linfuse-opt --linfuse-raise-to-gemm | FileCheck %s --check-prefix=GEMM

// OPT: gemm_calls: 1
// REF: gemm_calls: 3
// NUM-COUNT-6: OK
// NUM-NOT: FAIL
// MERGE: remark: merged 3 matmuls sharing %{{.*}} (with their bias-adds) into one ?x64 GEMM
// MERGE-NOT: not merged
// GEMM: linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x32xbf16>, tensor<64x32xbf16>) bias(%{{.*}} : tensor<64xbf16>) outs(%{{.*}} : tensor<?x64xbf16>) transpose_b -> tensor<?x64xbf16>
// GEMM-NOT: linfuse.gemm
// With the weights lifted into the packing function (what linfuse-run
// does), the packed f32 bias is marked exact in bf16, truncated back (64
// values per call) and the GEMM still writes bf16:
// RUN: linfuse-opt %s --linfuse-optimize=lift-weights=true | linfuse-opt --linfuse-raise-to-gemm | FileCheck %s --check-prefix=LIFTED
// LIFTED-LABEL: func.func @main(
// LIFTED-SAME:    tensor<64xf32> {linfuse.exact_in = bf16, linfuse.packed = {{[0-9]+}} : i64}
// LIFTED:         arith.truncf %{{.*}} : f32 to bf16
// LIFTED:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x32xbf16>, tensor<64x32xbf16>) bias(%{{.*}} : tensor<64xbf16>) outs(%{{.*}} : tensor<?x64xbf16>) transpose_b -> tensor<?x64xbf16>
// LIFTED-NOT:     arith.truncf

#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<?x32xbf16>, %wq: tensor<32x32xbf16> {linfuse.weight}, %bq: tensor<32xbf16> {linfuse.weight}, %wk: tensor<16x32xbf16> {linfuse.weight}, %bk: tensor<16xbf16> {linfuse.weight}, %wv: tensor<16x32xbf16> {linfuse.weight}, %bv: tensor<16xbf16> {linfuse.weight}) -> (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xbf16>
  %xe = tensor.empty(%m) : tensor<?x32xf32>
  %xf = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x32xbf16>) outs(%xe : tensor<?x32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<?x32xf32>
  %tqe = tensor.empty() : tensor<32x32xbf16>
  %tq = linalg.transpose ins(%wq : tensor<32x32xbf16>) outs(%tqe : tensor<32x32xbf16>) permutation = [1, 0]
  %bqe = tensor.empty() : tensor<32xf32>
  %bqf = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%bq : tensor<32xbf16>) outs(%bqe : tensor<32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %wqe = tensor.empty() : tensor<32x32xf32>
  %wqf = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%tq : tensor<32x32xbf16>) outs(%wqe : tensor<32x32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<32x32xf32>
  %qe = tensor.empty(%m) : tensor<?x32xf32>
  %qz = linalg.fill ins(%zero : f32) outs(%qe : tensor<?x32xf32>) -> tensor<?x32xf32>
  %qmm = linalg.matmul ins(%xf, %wqf : tensor<?x32xf32>, tensor<32x32xf32>) outs(%qz : tensor<?x32xf32>) -> tensor<?x32xf32>
  %qbb = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%bqf : tensor<32xf32>) outs(%qe : tensor<?x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x32xf32>
  %qadd = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%qmm, %qbb : tensor<?x32xf32>, tensor<?x32xf32>) outs(%qe : tensor<?x32xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %s = arith.mulf %in_1, %one : f32
    %v = arith.addf %in, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x32xf32>
  %qte = tensor.empty(%m) : tensor<?x32xbf16>
  %q = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%qadd : tensor<?x32xf32>) outs(%qte : tensor<?x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<?x32xbf16>
  %tke = tensor.empty() : tensor<32x16xbf16>
  %tk = linalg.transpose ins(%wk : tensor<16x32xbf16>) outs(%tke : tensor<32x16xbf16>) permutation = [1, 0]
  %bke = tensor.empty() : tensor<16xf32>
  %bkf = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%bk : tensor<16xbf16>) outs(%bke : tensor<16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %wke = tensor.empty() : tensor<32x16xf32>
  %wkf = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%tk : tensor<32x16xbf16>) outs(%wke : tensor<32x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<32x16xf32>
  %ke = tensor.empty(%m) : tensor<?x16xf32>
  %kz = linalg.fill ins(%zero : f32) outs(%ke : tensor<?x16xf32>) -> tensor<?x16xf32>
  %kmm = linalg.matmul ins(%xf, %wkf : tensor<?x32xf32>, tensor<32x16xf32>) outs(%kz : tensor<?x16xf32>) -> tensor<?x16xf32>
  %kbb = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%bkf : tensor<16xf32>) outs(%ke : tensor<?x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x16xf32>
  %kadd = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%kmm, %kbb : tensor<?x16xf32>, tensor<?x16xf32>) outs(%ke : tensor<?x16xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %s = arith.mulf %in_1, %one : f32
    %v = arith.addf %in, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  %kte = tensor.empty(%m) : tensor<?x16xbf16>
  %k = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%kadd : tensor<?x16xf32>) outs(%kte : tensor<?x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<?x16xbf16>
  %tve = tensor.empty() : tensor<32x16xbf16>
  %tv = linalg.transpose ins(%wv : tensor<16x32xbf16>) outs(%tve : tensor<32x16xbf16>) permutation = [1, 0]
  %bve = tensor.empty() : tensor<16xf32>
  %bvf = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%bv : tensor<16xbf16>) outs(%bve : tensor<16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %wve = tensor.empty() : tensor<32x16xf32>
  %wvf = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%tv : tensor<32x16xbf16>) outs(%wve : tensor<32x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<32x16xf32>
  %ve = tensor.empty(%m) : tensor<?x16xf32>
  %vz = linalg.fill ins(%zero : f32) outs(%ve : tensor<?x16xf32>) -> tensor<?x16xf32>
  %vmm = linalg.matmul ins(%xf, %wvf : tensor<?x32xf32>, tensor<32x16xf32>) outs(%vz : tensor<?x16xf32>) -> tensor<?x16xf32>
  %vbb = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%bvf : tensor<16xf32>) outs(%ve : tensor<?x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x16xf32>
  %vadd = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%vmm, %vbb : tensor<?x16xf32>, tensor<?x16xf32>) outs(%ve : tensor<?x16xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %s = arith.mulf %in_1, %one : f32
    %v = arith.addf %in, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  %vte = tensor.empty(%m) : tensor<?x16xbf16>
  %v = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%vadd : tensor<?x16xf32>) outs(%vte : tensor<?x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<?x16xbf16>
  return %q, %k, %v : tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?x16xbf16>
}
