//===- FoldConstantWeights.cpp - weight concat/transpose at compile time --===//
//
// After merging, constant weights reach the merged matmul through
// `tensor.concat` (and, for mixed layouts or torch-mlir imports,
// `linalg.transpose`). Folding them here means the packed weight is built
// once by the compiler instead of on every call.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_FOLDCONSTANTWEIGHTSPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

namespace {
/// Replaces `op`'s result with a constant of `type` whose bytes `fill`
/// writes.
LogicalResult
replaceWithConstant(PatternRewriter &rewriter, Operation *op,
                    RankedTensorType type, int64_t threshold,
                    function_ref<LogicalResult(MutableArrayRef<char>)> fill) {
  ElementsAttr value = makeConstant(type, threshold, fill);
  if (!value)
    return rewriter.notifyMatchFailure(op, "unsupported constant data");
  rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, value);
  return success();
}

struct FoldConcatOfConstants : OpRewritePattern<tensor::ConcatOp> {
  FoldConcatOfConstants(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(tensor::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getResultType();
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic result shape");
    SmallVector<ElementsAttr> parts;
    for (Value input : op.getInputs()) {
      ElementsAttr attr;
      if (!matchPattern(input, m_Constant(&attr)))
        return rewriter.notifyMatchFailure(op, "non-constant input");
      parts.push_back(attr);
    }
    int64_t dim = op.getDim();
    return replaceWithConstant(
        rewriter, op, type, threshold, [&](MutableArrayRef<char> out) {
          return concatConstantBytes(parts, dim, type, out);
        });
  }

  int64_t threshold;
};

struct FoldTransposeOfConstant : OpRewritePattern<linalg::TransposeOp> {
  FoldTransposeOfConstant(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    ElementsAttr input;
    if (!matchPattern(op.getInput(), m_Constant(&input)))
      return rewriter.notifyMatchFailure(op, "non-constant input");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    ArrayRef<int64_t> perm = op.getPermutation();
    return replaceWithConstant(
        rewriter, op, type, threshold, [&](MutableArrayRef<char> out) {
          return transposeConstantBytes(input, perm, out);
        });
  }

  int64_t threshold;
};

struct FoldConstantWeightsPass
    : public linfuse::impl::FoldConstantWeightsPassBase<
          FoldConstantWeightsPass> {
  using FoldConstantWeightsPassBase::FoldConstantWeightsPassBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFoldConstantWeightsPatterns(patterns, resourceThreshold);
    // Count what gets folded through the rewriter's notifications.
    struct Counter : public RewriterBase::Listener {
      void notifyOperationReplaced(Operation *op, ValueRange) override {
        if (!isa<tensor::ConcatOp, linalg::TransposeOp>(op))
          return;
        ++folded;
        bytes += getByteSize(cast<ShapedType>(op->getResult(0).getType()));
      }
      int64_t folded = 0, bytes = 0;
    } counter;
    GreedyRewriteConfig config;
    config.setListener(&counter);
    // Only the ops the patterns rewrite: a full canonicalization belongs to
    // the pipeline, not to this pass.
    config.setStrictness(GreedyRewriteStrictness::AnyOp);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    numFolded += counter.folded;
    numBytesFolded += counter.bytes;
  }

  PassStatistic numFolded{this, "constants-folded",
                          "Number of concat/transpose ops folded into "
                          "constants"};
  PassStatistic numBytesFolded{this, "bytes-folded",
                               "Bytes of constant data produced by folding"};
};
} // namespace

void mlir::linfuse::populateFoldConstantWeightsPatterns(
    RewritePatternSet &patterns, int64_t resourceThreshold) {
  patterns.add<FoldConcatOfConstants, FoldTransposeOfConstant>(
      patterns.getContext(), resourceThreshold);
}
