// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime -verify-diagnostics
// RUN: not linfuse-opt %s --linfuse-convert-gemm-to-runtime=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET

// TARGET: error: linfuse-convert-gemm-to-runtime: unknown target 'tpu' (expected cpu or cuda)

func.func @tensor_form(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{must be bufferized before --linfuse-convert-gemm-to-runtime}}
  %r = linfuse.gemm ins(%a, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
