//===- ReassociateReductions.cpp - vectorizable float reductions ----------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_REASSOCIATEREDUCTIONSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

/// The op that folds a new value into the output of `op`: yielded, with the
/// output's block argument as an operand.
static Operation *getCombiner(linalg::GenericOp op, unsigned result) {
  Value yielded = op.getBody()->getTerminator()->getOperand(result);
  Operation *combiner = yielded.getDefiningOp();
  if (!combiner || combiner->getBlock() != op.getBody())
    return nullptr;
  Value output = op.getRegionOutputArgs()[result];
  return llvm::is_contained(combiner->getOperands(), output) ? combiner
                                                             : nullptr;
}

namespace {
struct ReassociateReductionsPass
    : public linfuse::impl::ReassociateReductionsPassBase<
          ReassociateReductionsPass> {
  void runOnOperation() override {
    getOperation()->walk([](linalg::GenericOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      for (unsigned i = 0, e = op.getNumDpsInits(); i < e; ++i) {
        Operation *combiner = getCombiner(op, i);
        if (!isa_and_nonnull<arith::AddFOp, arith::MulFOp>(combiner))
          continue;
        auto fastmath = cast<arith::ArithFastMathInterface>(combiner);
        arith::FastMathFlags flags = fastmath.getFastMathFlagsAttr().getValue();
        combiner->setAttr(
            fastmath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op.getContext(), flags | arith::FastMathFlags::reassoc));
      }
    });
  }
};
} // namespace
