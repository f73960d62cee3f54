//===- Passes.h - linfuse conversion passes -----------------------*- C++
//-*-===//

#ifndef LINFUSE_CONVERSION_PASSES_H
#define LINFUSE_CONVERSION_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseSet.h"

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

/// The weight-packing functions of `module`: those another function names in
/// its `linfuse.pack_function` attribute (--linfuse-lift-weight-packing).
/// They run once and their results are passed back as arguments, so the
/// calling-convention passes leave them alone.
llvm::DenseSet<StringAttr> getWeightPackingFunctions(ModuleOp module);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_CONVERSION_PASSES_H
