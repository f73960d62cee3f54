//===- ConcatInPlace.cpp - producers of a concat write into its result ----===//
//
// See --linfuse-concat-in-place in Passes.td: tensor.concat as insert_slices
// into one tensor.empty, which empty-tensor elimination then lets each
// operand's producer write directly.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_CONCATINPLACEPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
struct ConcatInPlacePass
    : public linfuse::impl::ConcatInPlacePassBase<ConcatInPlacePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    // Only the concats: other ops keep the form the later passes expect.
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    SmallVector<Operation *> concats;
    getOperation()->walk([&](tensor::ConcatOp op) { concats.push_back(op); });
    if (concats.empty())
      return;
    if (failed(applyOpPatternsGreedily(concats, std::move(patterns), config)))
      return signalPassFailure();
  }
};
} // namespace
