//===- ApproximateMath.cpp - vectorizable math functions ------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

/// The functions whose approximation is accurate to a few ulp over the whole
/// f32 range (upstream's tests check them against libm); the rest (pow,
/// rsqrt, sqrt, ...) lower to LLVM intrinsics that vectorize already or stay
/// libm calls.
static bool isApproximated(StringRef name) {
  return llvm::is_contained(
      {math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
       math::TanhOp::getOperationName(), math::ErfOp::getOperationName(),
       math::LogOp::getOperationName(), math::Log1pOp::getOperationName(),
       math::Log2Op::getOperationName(), math::SinOp::getOperationName(),
       math::CosOp::getOperationName(), math::AtanOp::getOperationName(),
       math::Atan2Op::getOperationName(), math::AsinOp::getOperationName(),
       math::AcosOp::getOperationName()},
      name);
}

namespace {
struct ApproximateMathPass
    : public linfuse::impl::ApproximateMathPassBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, isApproximated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
