//===- PackFunctions.cpp - which functions pack weights -------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

llvm::DenseSet<StringAttr>
mlir::linfuse::getWeightPackingFunctions(ModuleOp module) {
  llvm::DenseSet<StringAttr> names;
  for (auto fn : module.getOps<func::FuncOp>())
    if (auto ref =
            fn->getAttrOfType<FlatSymbolRefAttr>("linfuse.pack_function"))
      names.insert(ref.getAttr());
  return names;
}
