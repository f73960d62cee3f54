// Debian's own mlir-opt (not linfuse-opt) with linfuse loaded as a plugin:
// the dialect parses and prints, its bufferization model is attached, and the
// pipelines resolve through --pass-pipeline.
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin \
// RUN:   --pass-pipeline="builtin.module(linfuse-optimize)" %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries" %s | FileCheck %s --check-prefix=BUF
// RUN: %mlir-opt --load-pass-plugin=%linfuse_plugin --help | FileCheck %s --check-prefix=HELP

// ROUNDTRIP-LABEL: func.func @gemm
// ROUNDTRIP:         linfuse.gemm ins(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<32x64xf32>) bias(%{{.*}} : tensor<32xf32>) outs(%{{.*}} : tensor<?x32xf32>) transpose_b epilogue = <gelu_tanh> -> tensor<?x32xf32>

// BUF-LABEL: func.func @gemm
// BUF-SAME:    (%[[A:.*]]: memref<?x64xf32, strided<[?, ?], offset: ?>>, %[[B:.*]]: memref<32x64xf32, strided<[?, ?], offset: ?>>, %[[BIAS:.*]]: memref<32xf32, strided<[?], offset: ?>>, %[[C:.*]]: memref<?x32xf32, strided<[?, ?], offset: ?>>)
// BUF:         linfuse.gemm ins(%[[A]], %[[B]] : {{.*}}) bias(%[[BIAS]] : {{.*}}) outs(%[[C]] : memref<?x32xf32, strided<[?, ?], offset: ?>>) transpose_b epilogue = <gelu_tanh>{{$}}
// BUF:         return %[[C]]

// HELP: linfuse-optimize
func.func @gemm(%a: tensor<?x64xf32>, %w: tensor<32x64xf32>, %bias: tensor<32xf32>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %0 = linfuse.gemm ins(%a, %w : tensor<?x64xf32>, tensor<32x64xf32>) bias(%bias : tensor<32xf32>) outs(%c : tensor<?x32xf32>) transpose_b epilogue = <gelu_tanh> -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}
