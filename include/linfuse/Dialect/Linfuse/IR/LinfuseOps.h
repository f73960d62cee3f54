//===- LinfuseOps.h - linfuse operations and attributes -----------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_H
#define LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_H

#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "linfuse/Dialect/Linfuse/IR/LinfuseEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "linfuse/Dialect/Linfuse/IR/LinfuseAttrs.h.inc"

#define GET_OP_CLASSES
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h.inc"

#endif // LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_H
