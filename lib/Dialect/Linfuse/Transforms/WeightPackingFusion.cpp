//===- WeightPackingFusion.cpp - one loop per packed weight ---------------===//
//
// Folding a norm's scale into the next weights leaves, in the packing
// function, W widened to f64, transposed, scaled, transposed back and
// narrowed: five passes over every weight, two of them strided, with f64
// temporaries twice the weight's size. Packing a 415 MB model took 1.1 s
// that way. As linalg.generic ops these are element-wise maps of W, which
// upstream's element-wise fusion turns into one loop reading W once and
// writing the packed weight once.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace {
bool isElementwiseOnTensors(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         linalgOp.getNumParallelLoops() == linalgOp.getNumLoops();
}

/// Element-wise named ops (linalg.add, linalg.transpose, ...) next to
/// another element-wise op, as linalg.generic, the form fusion works on. A
/// lone one stays as it reads best; contractions and reductions stay named
/// (the lowering hands them to the GEMM library).
struct GeneralizeElementwise
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<linalg::GenericOp>(op) || !isElementwiseOnTensors(op))
      return failure();
    bool fusable =
        llvm::any_of(op.getDpsInputs(),
                     [](Value in) {
                       return isElementwiseOnTensors(in.getDefiningOp());
                     }) ||
        llvm::any_of(op->getUsers(), isElementwiseOnTensors);
    if (!fusable)
      return failure();
    return linalg::generalizeNamedOp(rewriter, op);
  }
};
} // namespace

void mlir::linfuse::populateWeightPackingFusionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GeneralizeElementwise>(patterns.getContext());
  // Fuse a producer into its element-wise consumers even where it has other
  // users (the widened norm scale feeds every weight it folds into): it is
  // recomputed per element, which is cheaper than a pass over memory.
  linalg::populateElementwiseOpsFusionPatterns(
      patterns, [](OpOperand *operand) {
        Operation *producer = operand->get().getDefiningOp();
        return producer && isa<linalg::GenericOp>(producer) &&
               isa<linalg::GenericOp>(operand->getOwner());
      });
}
