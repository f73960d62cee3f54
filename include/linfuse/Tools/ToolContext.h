//===- ToolContext.h - the MLIR context linfuse's tools use -------*- C++
//-*-===//
//
// linfuse-run, linfuse-compile (and linfuse-opt) read any upstream dialect,
// lower to LLVM IR (kernels included: gpu-module-to-binary translates them),
// and find the CUDA toolkit for ptxas and libdevice.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_TOOLS_TOOLCONTEXT_H
#define LINFUSE_TOOLS_TOOLCONTEXT_H

namespace mlir {
class DialectRegistry;
namespace linfuse {

/// Every upstream dialect, extension and LLVM IR translation, the linfuse
/// dialect; also points CUDA_ROOT at the configured toolkit if unset.
void registerToolDialects(DialectRegistry &registry);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_TOOLS_TOOLCONTEXT_H
