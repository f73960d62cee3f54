//===- Passes.h - linfuse transformation passes -------------------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
}

namespace mlir {
namespace linfuse {

/// `--linfuse-fold-matmul-chains{policy=...}`.
enum class FoldPolicy { Cost, Always, Never };

/// Patterns that turn a weight-packing function's element-wise work
/// (widen, transpose, scale, narrow: a folded norm scale) into one loop per
/// packed weight: element-wise named ops and transposes become
/// linalg.generic and chains of them fuse. Contractions (a folded LoRA
/// product) are left alone for the GEMM library.
void populateWeightPackingFusionPatterns(RewritePatternSet &patterns);

#define GEN_PASS_DECL
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_H
