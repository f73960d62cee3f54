//===- DynamicExpandShape.cpp - avoid MLIR 22's dynamic expand crash ------===//
//
// See --linfuse-dynamic-expand-shape in Passes.td: expand_shapes with two or
// more dynamic sizes in one reassociation group become tensor.reshape.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_DYNAMICEXPANDSHAPEPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
/// True when some reassociation group of `op` has several dynamic sizes.
bool hasGroupWithSeveralDynamicSizes(tensor::ExpandShapeOp op) {
  ArrayRef<int64_t> shape = op.getResultType().getShape();
  for (const ReassociationIndices &group : op.getReassociationIndices())
    if (llvm::count_if(group, [&](int64_t d) {
          return ShapedType::isDynamic(shape[d]);
        }) > 1)
      return true;
  return false;
}

struct DynamicExpandShapeToReshape
    : public OpRewritePattern<tensor::ExpandShapeOp> {
  DynamicExpandShapeToReshape(MLIRContext *ctx,
                              std::function<void()> onRewrite = {})
      : OpRewritePattern(ctx), onRewrite(std::move(onRewrite)) {}

  LogicalResult matchAndRewrite(tensor::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasGroupWithSeveralDynamicSizes(op))
      return rewriter.notifyMatchFailure(
          op, "at most one dynamic size per group: lowers as a view");
    Location loc = op.getLoc();
    SmallVector<Value> sizes;
    for (OpFoldResult size : op.getMixedOutputShape()) {
      if (auto value = dyn_cast<Value>(size))
        sizes.push_back(value);
      else
        sizes.push_back(arith::ConstantIndexOp::create(
            rewriter, loc, cast<IntegerAttr>(cast<Attribute>(size)).getInt()));
    }
    Value shape = tensor::FromElementsOp::create(rewriter, loc, sizes);
    rewriter.replaceOpWithNewOp<tensor::ReshapeOp>(op, op.getResultType(),
                                                   op.getSrc(), shape);
    if (onRewrite)
      onRewrite();
    return success();
  }

  std::function<void()> onRewrite;
};

struct DynamicExpandShapePass
    : public linfuse::impl::DynamicExpandShapePassBase<DynamicExpandShapePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DynamicExpandShapeToReshape>(&getContext(),
                                              [this] { ++numRewritten; });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }

  linfuse::PassStatistic numRewritten{
      this, "expand-shapes-rewritten",
      "expand_shapes with several dynamic sizes in a group written as "
      "tensor.reshape"};
};
} // namespace

void mlir::linfuse::populateDynamicExpandShapePatterns(
    RewritePatternSet &patterns) {
  patterns.add<DynamicExpandShapeToReshape>(patterns.getContext());
}
