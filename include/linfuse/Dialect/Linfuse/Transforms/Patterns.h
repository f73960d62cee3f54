//===- Patterns.h - linfuse rewrite pattern sets ------------------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PATTERNS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PATTERNS_H

#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;
namespace linfuse {

/// Folds `tensor.concat` of constants and `linalg.transpose` of a constant
/// into one `arith.constant` (raw-buffer copies). Results of at least
/// `resourceThreshold` bytes become `dense_resource` blobs.
void populateFoldConstantWeightsPatterns(RewritePatternSet &patterns,
                                         int64_t resourceThreshold = 4096);

/// The three rewrites of --linfuse-fold-matmul-chains: linear chains
/// (re-associated by a FLOPs-per-row dynamic program unless `policy` is
/// Always), sums of linear branches of one input (LoRA), and constant input
/// scales moved into weights.
void populateFoldMatmulChainsPatterns(RewritePatternSet &patterns,
                                      FoldPolicy policy = FoldPolicy::Cost,
                                      int64_t resourceThreshold = 4096);

/// Part of --linfuse-merge-parallel-matmuls: when every column slice of a
/// tensor (a merged matmul's result) feeds the same element-wise
/// `linalg.generic`, differing only in per-column vectors, one generic runs
/// over the whole tensor with those vectors concatenated, and the slices
/// move after it (per-channel dequantization scales, biases, activations).
/// `counter`, if given, counts the epilogues that merging removed.
void populateMergeSlicedEpiloguesPatterns(RewritePatternSet &patterns,
                                          unsigned *counter = nullptr);

/// --linfuse-raise-to-gemm: `linalg.matmul` / `linalg.batch_matmul` on
/// tensors (plain or transposed operand maps) become `linfuse.gemm`; with
/// `epilogues`, a following single-use bias-add and activation are absorbed
/// (with `cudaEpilogues`, only those cuBLASLt has: relu and gelu_tanh).
void populateRaiseToGemmPatterns(RewritePatternSet &patterns,
                                 bool epilogues = true,
                                 bool cudaEpilogues = false);

/// --linfuse-specialize-contractions: linalg ops computing a (batch) matmul
/// in another spelling (`linalg.generic` with an exact multiply-add body,
/// `linalg.contract`, matvec/vecmat and their batch forms) become
/// `linalg.matmul` / `linalg.batch_matmul` with explicit indexing maps,
/// element types kept.
void populateSpecializeContractionsPatterns(RewritePatternSet &patterns);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PATTERNS_H
