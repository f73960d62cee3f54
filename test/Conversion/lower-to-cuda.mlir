// REQUIRES: cuda-toolkit
// (ptxas from the CUDA toolkit serializes the kernels; no GPU is needed.)
// RUN: linfuse-opt %s --linfuse-lower-to-cuda | FileCheck %s
// RUN: linfuse-opt %s --linfuse-lower-to-cuda="chip=sm_80 features=+ptx75 format=isa block-size=256" | FileCheck %s --check-prefix=OPTS
// RUN: linfuse-opt %s --linfuse-raise-to-gemm=target=cuda | FileCheck %s --check-prefix=RAISE
// RUN: linfuse-opt %s --linfuse-lower-to-cuda=cuda-graph=true | FileCheck %s --check-prefix=GRAPH

// With cuda-graph, the function's body is bracketed by the runtime's
// function-graph calls (after the final synchronization, which they make a
// no-op while capturing or replaying).
// GRAPH:       llvm.mlir.global private @__linfuse_graph_slot_qk(dense<0> : tensor<1xi64>)
// GRAPH-LABEL: llvm.func @qk(
// GRAPH:         llvm.mlir.addressof @__linfuse_graph_slot_qk : !llvm.ptr
// GRAPH:         llvm.call @linfuse_cuda_function_begin(%[[SA:[0-9]+]], %{{.*}}, %{{.*}}) : (i64, i64, i64) -> i32
// GRAPH-NOT:     llvm.call @linfuse_cuda_function
// GRAPH:         llvm.call @linfuse_cuda_gemm_f32_f32
// GRAPH:         llvm.call @linfuse_cuda_synchronize()
// GRAPH-NEXT:    llvm.call @linfuse_cuda_function_end(%[[SA]]) : (i64) -> i32

// A merged Q/K projection with bias and GELU (tanh form, which cuBLASLt's
// GELU epilogue computes) feeding another GEMM and an add, plus a SiLU that
// cuBLASLt has no epilogue for.
// RAISE-LABEL: func.func @qk
// RAISE:         linfuse.gemm {{.*}} bias(%{{.*}} : tensor<24xf32>) {{.*}} epilogue = <gelu_tanh>
// RAISE:         linfuse.gemm
// RAISE-NOT:     epilogue = <silu>
// RAISE:         linalg.generic
// RAISE:           math.exp

// Both GEMMs are cuBLASLt calls in the runtime, buffers are device
// allocations, the element-wise work (the add, the SiLU) is one kernel each
// in a fatbin for sm_90a, launched with 128 threads per block. Everything is
// ordered on the runtime's stream: no host synchronization before the GEMMs
// (--linfuse-stream-ordered-gemms), one before the return.
// CHECK:       llvm.func @linfuse_cuda_gemm_f32_f32(i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i32, i32, f32, f32) -> i32
// CHECK-LABEL: llvm.func @qk(
// CHECK-NOT:     llvm.call @malloc
// CHECK:         llvm.call @mgpuMemAlloc
// CHECK-NOT:     llvm.call @mgpuStreamSynchronize
// CHECK:         llvm.call @linfuse_cuda_gemm_f32_f32
// CHECK-NOT:     llvm.call @mgpuStreamSynchronize
// CHECK:         llvm.call @linfuse_cuda_gemm_f32_f32
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @qk_kernel::@qk_kernel blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%[[ONE:.*]], %[[T:.*]], %[[ONE]])
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @qk_kernel_0::@qk_kernel
// CHECK:         llvm.call @mgpuMemFree
// CHECK-NOT:     llvm.call @free
// CHECK-NOT:     llvm.call @mgpuStreamSynchronize
// CHECK:         llvm.call @linfuse_cuda_synchronize()
// CHECK:         llvm.return
// CHECK:       llvm.func @_mlir_ciface_qk(
// CHECK:       gpu.binary @qk_kernel  [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx80">
// CHECK:       gpu.binary @qk_kernel_0
// CHECK:       llvm.func @mgpuMemAlloc(i64, !llvm.ptr, i8) -> !llvm.ptr
// CHECK-NOT:   linfuse.gemm
// CHECK-NOT:   linalg.
// The thread count is the 128-thread tile of the innermost dimension.
// RUN: linfuse-opt %s --linfuse-lower-to-cuda | grep -B200 "gpu.launch_func" | FileCheck %s --check-prefix=THREADS
// THREADS: %[[C128:.*]] = llvm.mlir.constant(128 : index) : i64
// THREADS: gpu.launch_func {{.*}} threads in (%{{.*}}, %[[C128]], %{{.*}})

// OPTS: gpu.binary @qk_kernel  [#gpu.object<#nvvm.target<chip = "sm_80", features = "+ptx75">, properties = {{.*}}assembly = "

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @qk(%x: tensor<?x8xf32>, %w: tensor<8x24xf32>, %b: tensor<24xf32>, %v: tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%m) : tensor<?x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x24xf32>) -> tensor<?x24xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x24xf32>) outs(%f : tensor<?x24xf32>) -> tensor<?x24xf32>
  %yb = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<?x24xf32>, tensor<24xf32>) outs(%e : tensor<?x24xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<?x24xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<?x24xf32>) outs(%e : tensor<?x24xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.044715 : f32
    %s = arith.constant 0.797884583 : f32
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %x2 = arith.mulf %in, %in : f32
    %x3 = arith.mulf %x2, %in : f32
    %cx3 = arith.mulf %x3, %c : f32
    %inner = arith.addf %in, %cx3 : f32
    %arg = arith.mulf %inner, %s : f32
    %th = math.tanh %arg : f32
    %tp = arith.addf %th, %one : f32
    %hx = arith.mulf %in, %half : f32
    %r = arith.mulf %hx, %tp : f32
    linalg.yield %r : f32
  } -> tensor<?x24xf32>
  %q = tensor.extract_slice %g[0, 0] [%m, 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
  %k = tensor.extract_slice %g[0, 8] [%m, 8] [1, 1] : tensor<?x24xf32> to tensor<?x8xf32>
  %e8 = tensor.empty(%m) : tensor<?x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %o = linalg.matmul ins(%k, %v : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = linalg.add ins(%o, %q : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e8 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %sl = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%o : tensor<?x8xf32>) outs(%e8 : tensor<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %in : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %r = arith.divf %in, %den : f32
    linalg.yield %r : f32
  } -> tensor<?x8xf32>
  return %s, %sl : tensor<?x8xf32>, tensor<?x8xf32>
}
