//===- AttachCInterface.cpp - C entry points for public functions ---------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_ATTACHCINTERFACEPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
struct AttachCInterfacePass
    : public linfuse::impl::AttachCInterfacePassBase<AttachCInterfacePass> {
  void runOnOperation() override {
    UnitAttr unit = UnitAttr::get(&getContext());
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal())
        fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), unit);
  }
};
} // namespace
