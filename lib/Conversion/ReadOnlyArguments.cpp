//===- ReadOnlyArguments.cpp - keep callers' inputs intact ----------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_READONLYARGUMENTSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {
struct ReadOnlyArgumentsPass
    : public linfuse::impl::ReadOnlyArgumentsPassBase<ReadOnlyArgumentsPass> {
  void runOnOperation() override {
    StringRef name = bufferization::BufferizationDialect::kWritableAttrName;
    BoolAttr no = BoolAttr::get(&getContext(), false);
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn.isPublic() || fn.isExternal())
        continue;
      for (auto [i, type] : llvm::enumerate(fn.getArgumentTypes()))
        if (isa<TensorType>(type) && !fn.getArgAttr(i, name))
          fn.setArgAttr(i, name, no);
    }
  }
};
} // namespace
