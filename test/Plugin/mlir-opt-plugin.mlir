// Debian's own mlir-opt (not linfuse-opt) with linfuse loaded as a plugin:
// the dialect parses and prints, its bufferization model is attached, and the
// pipelines resolve through --pass-pipeline.
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin \
// RUN:   --pass-pipeline="builtin.module(linfuse-optimize)" %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries" %s | FileCheck %s --check-prefix=BUF
// RUN: %mlir-opt --load-pass-plugin=%linfuse_plugin --help | FileCheck %s --check-prefix=HELP
// -mlir-pass-statistics: linfuse's counters (which Debian's release libMLIR
// would not count) follow mlir-opt's own report, printed at exit.
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin \
// RUN:   --pass-pipeline="builtin.module(linfuse-optimize)" %s -mlir-pass-statistics -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATS
// RUN: %mlir-opt --load-dialect-plugin=%linfuse_plugin --load-pass-plugin=%linfuse_plugin \
// RUN:   --pass-pipeline="builtin.module(linfuse-optimize)" %s -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOSTATS --allow-empty
// STATS: ... Pass statistics report ...
// STATS: ... linfuse pass statistics report ...
// STATS: linfuse-merge-parallel-matmuls
// STATS-NEXT: (S) 1 groups-merged
// NOSTATS-NOT: statistics

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

// Two projections of %x: merged (what the statistics count).
func.func @pair(%x: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>) {
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
