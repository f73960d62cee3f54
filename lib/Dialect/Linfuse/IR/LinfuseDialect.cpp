//===- LinfuseDialect.cpp - linfuse dialect registration ------------------===//

#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.h"
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::linfuse;

#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.cpp.inc"
#include "linfuse/Dialect/Linfuse/IR/LinfuseEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "linfuse/Dialect/Linfuse/IR/LinfuseAttrs.cpp.inc"

void LinfuseDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "linfuse/Dialect/Linfuse/IR/LinfuseAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.cpp.inc"
      >();
}
