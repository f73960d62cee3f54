//===- LinfuseDialect.h - linfuse dialect -------------------------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_IR_LINFUSEDIALECT_H
#define LINFUSE_DIALECT_LINFUSE_IR_LINFUSEDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.h.inc"

#endif // LINFUSE_DIALECT_LINFUSE_IR_LINFUSEDIALECT_H
