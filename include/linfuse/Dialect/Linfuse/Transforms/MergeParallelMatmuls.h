//===- MergeParallelMatmuls.h - horizontal matmul merging ---------*- C++
//-*-===//
//
// The analysis (which matmuls may be merged, and where the merged op goes)
// and the rewrite (one matmul over concatenated operands plus slices), as a
// C++ API for stacks that want them without the pass.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MERGEPARALLELMATMULS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MERGEPARALLELMATMULS_H

#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace linfuse {

struct MergeOptions {
  /// Smallest number of matmuls worth merging.
  unsigned minGroupSize = 2;
  /// Cap on the concatenated operand of a group (weights for shared-LHS
  /// groups, static-shaped inputs for shared-RHS groups), in bytes.
  int64_t maxMergedBytes = int64_t(1) << 30;
  /// Also merge matmuls that share their right-hand side (concat along M).
  bool mergeSharedRhs = true;
};

enum class MergeKind {
  /// Same left operand: weights concatenated along N.
  SharedLhs,
  /// Same right operand: inputs concatenated along M.
  SharedRhs,
};

/// A set of matmuls that can legally become one, and where the merged op is
/// placed: right after `anchor` (the last op in the block defining one of
/// the merged op's operands), or at the block start when `anchor` is null.
struct MergeGroup {
  MergeKind kind = MergeKind::SharedLhs;
  SmallVector<MatmulInfo> members;
  Operation *anchor = nullptr;
  /// The scalar every member's accumulator is filled with; null when the
  /// accumulators differ and are concatenated instead.
  Value fillScalar;
  /// Bytes of the concatenated operand.
  int64_t concatBytes = 0;
};

/// Finds the merge groups among the matmuls of `block` (not nested blocks).
/// Shared-LHS groups come first. Groups are disjoint; no member depends on
/// another, and every user of a member's result follows the anchor.
/// After merging: a remark at every matmul that reads the same input as
/// an earlier one in `block` but was not merged with it, saying why
/// (different K, types, layout, bias-add; the size cap; a dependency; no
/// placement, naming the ops in the way). Shared-LHS candidates only.
void explainMissedMerges(Block &block, const MergeOptions &options);

SmallVector<MergeGroup> findMergeGroups(Block &block,
                                        const MergeOptions &options);

/// Rewrites `group` into one matmul (plus one bias-add when every member had
/// one) over concatenated operands, followed by `tensor.extract_slice`s that
/// replace the members' results. Returns the merged matmul.
FailureOr<linalg::LinalgOp> mergeGroup(RewriterBase &rewriter,
                                       const MergeGroup &group);

/// Observes mergeParallelMatmuls.
struct MergeListener {
  virtual ~MergeListener() = default;
  /// Before `group` is rewritten (its ops are still alive).
  virtual void notifyGroupMerging(const MergeGroup &group) {}
  /// After the rewrite; the members are erased by now.
  virtual void notifyGroupMerged(linalg::LinalgOp merged) {}
};

/// Merges every legal group among the matmuls of `block` (not nested
/// blocks), re-analyzing only when one merge feeds another group.
LogicalResult mergeParallelMatmuls(RewriterBase &rewriter, Block &block,
                                   const MergeOptions &options,
                                   MergeListener *listener = nullptr);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MERGEPARALLELMATMULS_H
