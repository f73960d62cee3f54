// The pipelines nested under func.func: --linfuse-optimize works there
// (without inlining), the module-level ones refuse with one error and exit
// 1, in linfuse-opt and in Debian's mlir-opt with the plugin (both aborted
// with "Can't add pass ... restricted to 'builtin.module'" before).
// RUN: linfuse-opt %s --pass-pipeline='builtin.module(func.func(linfuse-optimize))' | FileCheck %s --check-prefix=OPT
// RUN: not linfuse-opt %s --pass-pipeline='builtin.module(func.func(linfuse-optimize{lift-weights=true}))' 2>&1 | FileCheck %s --check-prefix=LIFT
// RUN: not linfuse-opt %s --pass-pipeline='builtin.module(func.func(linfuse-lower-to-cpu))' 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not linfuse-opt %s --pass-pipeline='builtin.module(func.func(linfuse-lower-to-cuda))' 2>&1 | FileCheck %s --check-prefix=CUDA
// RUN: not %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin %s --pass-pipeline='builtin.module(func.func(linfuse-lower-to-cpu))' 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin %s --pass-pipeline='builtin.module(func.func(linfuse-optimize{lift-weights=true}))' 2>&1 | FileCheck %s --check-prefix=LIFT

// OPT-LABEL: func.func @qkv
// OPT:         linalg.matmul {{.*}} -> tensor<4x6xf32>
// OPT-NOT:     linalg.matmul
// LIFT: error: --linfuse-optimize{lift-weights=true} needs builtin.module (lifting adds packing functions to it), but was nested under 'func.func'; run it as --pass-pipeline='builtin.module(linfuse-optimize{lift-weights=true})'
// LIFT-NOT: error
// CPU: error: --linfuse-lower-to-cpu needs builtin.module (it lowers function signatures and module globals), but was nested under 'func.func'; run it as --pass-pipeline='builtin.module(linfuse-lower-to-cpu)'
// CPU-NOT: error
// CUDA: error: --linfuse-lower-to-cuda needs builtin.module (it outlines kernels into gpu.module), but was nested under 'func.func'
func.func @qkv(%x: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense<1.0> : tensor<8x2xf32>
  %w2 = arith.constant dense<2.0> : tensor<8x4xf32>
  %e1 = tensor.empty() : tensor<4x2xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y1 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f1 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %y2 = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y1, %y2 : tensor<4x2xf32>, tensor<4x4xf32>
}
