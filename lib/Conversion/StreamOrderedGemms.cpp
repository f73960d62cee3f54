//===- StreamOrderedGemms.cpp - no host waits before runtime GEMMs --------===//
//
// Every device operation of the CUDA lowering runs on the runtime's one
// stream: kernels, copies, stream-ordered allocations and frees (the mgpu*
// wrappers map every stream to it) and the cuBLASLt GEMMs the runtime
// enqueues. `--gpu-async-region` does not know that a `linfuse_cuda_gemm_*`
// call enqueues device work and treats it like host code that reads device
// memory, so it waits for the stream before each one. Stream order already
// gives the GEMM what it needs; only the function's return must wait, so
// that the caller gets computed results.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_STREAMORDEREDGEMMSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

static constexpr StringLiteral kSynchronize = "linfuse_cuda_synchronize";

static bool isRuntimeGemmCall(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  return call && call.getCallee().starts_with("linfuse_cuda_gemm_");
}

/// A host synchronization: `gpu.wait [...]` without `async`.
static bool isHostWait(Operation *op) {
  auto wait = dyn_cast<gpu::WaitOp>(op);
  return wait && !wait.getAsyncToken();
}

/// Whether the next op after `op` in its block with memory effects is a
/// runtime GEMM call.
static bool guardsGemmCall(Operation *op) {
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (isRuntimeGemmCall(next))
      return true;
    if (!isMemoryEffectFree(next))
      return false;
  }
  return false;
}

namespace {
struct StreamOrderedGemmsPass
    : public linfuse::impl::StreamOrderedGemmsPassBase<StreamOrderedGemmsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      bool callsGemm = false;
      SmallVector<Operation *> waits;
      fn.walk([&](Operation *op) {
        if (op->getParentOfType<gpu::GPUModuleOp>())
          return WalkResult::skip();
        callsGemm |= isRuntimeGemmCall(op);
        if (isHostWait(op) && guardsGemmCall(op))
          waits.push_back(op);
        return WalkResult::advance();
      });
      if (!callsGemm)
        continue;
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      FailureOr<func::FuncOp> synchronize = func::lookupOrCreateFnDecl(
          mb, module, kSynchronize, {}, nullptr, mb.getI32Type());
      if (failed(synchronize)) {
        module.emitError("linfuse-stream-ordered-gemms: the module declares ")
            << kSynchronize << " with another type";
        return signalPassFailure();
      }
      for (Operation *wait : waits)
        wait->erase();
      fn.walk([&](func::ReturnOp ret) {
        // The synchronization below covers a wait for the last work.
        if (Operation *prev = ret->getPrevNode(); prev && isHostWait(prev))
          prev->erase();
        OpBuilder b(ret);
        func::CallOp::create(b, ret.getLoc(), *synchronize, ValueRange());
      });
    }
  }
};
} // namespace
