//===- Passes.h - linfuse transformation passes -------------------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace linfuse {

/// `--linfuse-fold-matmul-chains{policy=...}`.
enum class FoldPolicy { Cost, Always, Never };

#define GEN_PASS_DECL
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H
