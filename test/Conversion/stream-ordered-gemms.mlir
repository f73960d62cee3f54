// RUN: linfuse-opt %s --linfuse-stream-ordered-gemms --split-input-file | FileCheck %s

// The waits gpu-async-region puts before runtime GEMM calls go (casts and
// constants between them have no memory effects); the wait before the
// return becomes one synchronization of the runtime's stream, which also
// covers the last GEMM (enqueued after the last wait).
// CHECK:       func.func private @linfuse_cuda_synchronize() -> i32
// CHECK-LABEL: func.func @two_gemms
// CHECK:         %[[T0:.*]] = gpu.wait async
// CHECK-NEXT:    %[[C:.*]], %{{.*}} = gpu.alloc async [%[[T0]]] (%{{.*}}) : memref<?x8xf32>
// CHECK-NEXT:    %[[X:.*]] = memref.cast %{{.*}} : memref<?x4xf32> to memref<*xf32>
// CHECK-NEXT:    %[[W:.*]] = memref.cast %{{.*}} : memref<4x8xf32> to memref<*xf32>
// CHECK-NEXT:    %[[CU:.*]] = memref.cast %[[C]] : memref<?x8xf32> to memref<*xf32>
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_gemm_f32_f32(%[[X]], %[[W]], %[[CU]], %[[CU]], %{{.*}}) :
// CHECK-NEXT:    %[[T1:.*]] = gpu.wait async
// CHECK-NEXT:    %[[D:.*]], %{{.*}} = gpu.alloc async [%[[T1]]] (%{{.*}}) : memref<?x8xf32>
// CHECK-NEXT:    %[[V:.*]] = memref.cast %{{.*}} : memref<8x8xf32> to memref<*xf32>
// CHECK-NEXT:    %[[DU:.*]] = memref.cast %[[D]] : memref<?x8xf32> to memref<*xf32>
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_gemm_f32_f32(%[[CU]], %[[V]], %[[DU]], %[[DU]], %{{.*}}) :
// CHECK-NEXT:    %{{.*}} = call @linfuse_cuda_synchronize() : () -> i32
// CHECK-NEXT:    return %[[D]] : memref<?x8xf32>

func.func private @linfuse_cuda_gemm_f32_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32

func.func @two_gemms(%x: memref<?x4xf32>, %w: memref<4x8xf32>, %v: memref<8x8xf32>) -> memref<?x8xf32> {
  %c0 = arith.constant 0 : index
  %flags = arith.constant 0 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %x, %c0 : memref<?x4xf32>
  %t0 = gpu.wait async
  %c, %t1 = gpu.alloc async [%t0] (%m) : memref<?x8xf32>
  %xu = memref.cast %x : memref<?x4xf32> to memref<*xf32>
  %wu = memref.cast %w : memref<4x8xf32> to memref<*xf32>
  %cu = memref.cast %c : memref<?x8xf32> to memref<*xf32>
  gpu.wait [%t1]
  %s0 = func.call @linfuse_cuda_gemm_f32_f32(%xu, %wu, %cu, %cu, %flags, %flags, %one, %zero) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
  %t2 = gpu.wait async
  %d, %t3 = gpu.alloc async [%t2] (%m) : memref<?x8xf32>
  %vu = memref.cast %v : memref<8x8xf32> to memref<*xf32>
  %du = memref.cast %d : memref<?x8xf32> to memref<*xf32>
  gpu.wait [%t3]
  %s1 = func.call @linfuse_cuda_gemm_f32_f32(%cu, %vu, %du, %du, %flags, %flags, %one, %zero) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
  return %d : memref<?x8xf32>
}

// -----

// A wait followed by host code that reads memory stays: only stream-ordered
// runtime GEMMs make it unnecessary. A function without GEMM calls is left
// as gpu-async-region made it.
// CHECK-LABEL: func.func @host_read_first
// CHECK:         gpu.wait [%{{.*}}]
// CHECK-NEXT:    memref.load
// CHECK:         call @linfuse_cuda_gemm_f32_f32
// CHECK:         call @linfuse_cuda_synchronize()
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @no_gemm
// CHECK:         gpu.wait [%{{.*}}]
// CHECK-NEXT:    return
// CHECK-NOT:     linfuse_cuda_synchronize

func.func private @linfuse_cuda_gemm_f32_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32

func.func @host_read_first(%x: memref<4x4xf32>, %h: memref<1xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %t0 = gpu.wait async
  %t1 = gpu.memset async [%t0] %x, %zero : memref<4x4xf32>, f32
  gpu.wait [%t1]
  %flags = memref.load %h[%c0] : memref<1xi32>
  %xu = memref.cast %x : memref<4x4xf32> to memref<*xf32>
  %s = func.call @linfuse_cuda_gemm_f32_f32(%xu, %xu, %xu, %xu, %flags, %flags, %one, %zero) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
  return %s : i32
}

func.func @no_gemm(%x: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %t0 = gpu.wait async
  %t1 = gpu.memset async [%t0] %x, %zero : memref<4x4xf32>, f32
  gpu.wait [%t1]
  return
}
