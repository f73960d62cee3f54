//===- Passes.h - linfuse conversion passes -----------------------*- C++
//-*-===//

#ifndef LINFUSE_CONVERSION_PASSES_H
#define LINFUSE_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace linfuse {

#define GEN_PASS_DECL
#include "linfuse/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "linfuse/Conversion/Passes.h.inc"

/// The patterns of --linfuse-dynamic-expand-shape.
void populateDynamicExpandShapePatterns(RewritePatternSet &patterns);

/// The symbol `linfuse.gemm` with these element types calls on `target`
/// ("cpu" or "cuda"): `linfuse_<target>_gemm_<ab>_<c>`.
std::string getGemmRuntimeFunctionName(StringRef target, Type abElementType,
                                       Type cElementType);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_CONVERSION_PASSES_H
