//===- DeviceMemory.cpp - host buffers become device buffers --------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_DEVICEMEMORYPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
struct DeviceMemoryPass
    : public linfuse::impl::DeviceMemoryPassBase<DeviceMemoryPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (op->getParentOfType<gpu::GPUModuleOp>())
        return WalkResult::skip();
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp>(op))
        ops.push_back(op);
      return WalkResult::advance();
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto device = gpu::AllocOp::create(
            rewriter, op->getLoc(), alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        rewriter.replaceOp(op, device.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, op->getLoc(), /*asyncToken=*/Type(),
                               ValueRange(), dealloc.getMemref());
        rewriter.eraseOp(op);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        linalg::CopyOp::create(rewriter, op->getLoc(), copy.getSource(),
                               copy.getTarget());
        rewriter.eraseOp(op);
      }
    }
  }
};
} // namespace
