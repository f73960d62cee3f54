// Quantized Q/K/V as another front end spells them: linalg.generic bodies
// acc + extsi(x) * extsi(w) (i8 -> i32), weights [K, N]. Specialized to
// linalg.matmul, merged into one GEMM on oneDNN's s8 matmul; exact against
// numpy (tolerance 0), optimized and --no-optimize (three GEMMs).
// RUN: rm -rf %t && %python %S/Inputs/npy_check.py gen %t/in 6 x:5x512:i8 wq:512x64:i8 wk:512x32:i8 wv:512x32:i8
// RUN: linfuse-run %s --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q.npy --output=@%t/k.npy --output=@%t/v.npy | FileCheck %s --check-prefix=OPT
// RUN: linfuse-run %s --no-optimize --runtime-stats --input=@%t/in/x.npy --input=@%t/in/wq.npy --input=@%t/in/wk.npy --input=@%t/in/wv.npy --output=@%t/q0.npy --output=@%t/k0.npy --output=@%t/v0.npy | FileCheck %s --check-prefix=REF
// RUN: %python %S/Inputs/npy_check.py check %t/in --rtol 0 --expect "x @ wq" --expect "x @ wk" --expect "x @ wv" %t/q.npy %t/k.npy %t/v.npy %t/q0.npy %t/k0.npy %t/v0.npy | FileCheck %s --check-prefix=NUM

// OPT: gemm_calls: 1
// OPT-NEXT: kernel_launches: 1
// OPT-NEXT: fallback_gemm_calls: 0
// REF: gemm_calls: 3
// REF-NEXT: kernel_launches: 3
// REF-NEXT: fallback_gemm_calls: 0
// NUM-COUNT-6: OK

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @main(%x: tensor<?x512xi8>, %wq: tensor<512x64xi8>, %wk: tensor<512x32xi8>,
                %wv: tensor<512x32xi8>) -> (tensor<?x64xi32>, tensor<?x32xi32>, tensor<?x32xi32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %m = tensor.dim %x, %c0 : tensor<?x512xi8>
  %e = tensor.empty(%m) : tensor<?x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x64xi32>) -> tensor<?x64xi32>
  %e2 = tensor.empty(%m) : tensor<?x32xi32>
  %f2 = linalg.fill ins(%zero : i32) outs(%e2 : tensor<?x32xi32>) -> tensor<?x32xi32>
  %q = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wq : tensor<?x512xi8>, tensor<512x64xi8>) outs(%f : tensor<?x64xi32>) {
  ^bb0(%a: i8, %b: i8, %o: i32):
    %ea = arith.extsi %a : i8 to i32
    %eb = arith.extsi %b : i8 to i32
    %p = arith.muli %ea, %eb : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x64xi32>
  %k = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wk : tensor<?x512xi8>, tensor<512x32xi8>) outs(%f2 : tensor<?x32xi32>) {
  ^bb0(%a: i8, %b: i8, %o: i32):
    %ea = arith.extsi %a : i8 to i32
    %eb = arith.extsi %b : i8 to i32
    %p = arith.muli %ea, %eb : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x32xi32>
  %v = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%x, %wv : tensor<?x512xi8>, tensor<512x32xi8>) outs(%f2 : tensor<?x32xi32>) {
  ^bb0(%a: i8, %b: i8, %o: i32):
    %ea = arith.extsi %a : i8 to i32
    %eb = arith.extsi %b : i8 to i32
    %p = arith.muli %ea, %eb : i32
    %s = arith.addi %o, %p : i32
    linalg.yield %s : i32
  } -> tensor<?x32xi32>
  return %q, %k, %v : tensor<?x64xi32>, tensor<?x32xi32>, tensor<?x32xi32>
}
