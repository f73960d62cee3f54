//===- TileParallelLoops.cpp - blocks of threads for scf.parallel ---------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_TILEPARALLELLOOPSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
struct TileParallelLoopsPass
    : public linfuse::impl::TileParallelLoopsPassBase<TileParallelLoopsPass> {
  using TileParallelLoopsPassBase::TileParallelLoopsPassBase;

  void runOnOperation() override {
    if (blockSize < 1) {
      emitError(getOperation()->getLoc())
          << "linfuse-tile-parallel-loops: block-size must be positive";
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation()->walk([&](scf::ParallelOp op) {
      if (!op->getParentOfType<scf::ParallelOp>())
        outermost.push_back(op);
    });
    for (scf::ParallelOp op : outermost) {
      SmallVector<int64_t> sizes(op.getNumLoops(), 1);
      sizes.back() = blockSize;
      scf::tileParallelLoop(op, sizes, /*noMinMaxBounds=*/true);
    }
  }
};
} // namespace
