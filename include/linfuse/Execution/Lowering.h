//===- Lowering.h - optimize and lower a module for a target ------*- C++
//-*-===//
//
// The two steps every driver (linfuse-run, linfuse-compile, the Python
// bindings) runs on linalg-on-tensors input, with errors as one line.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_EXECUTION_LOWERING_H
#define LINFUSE_EXECUTION_LOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace mlir {
namespace linfuse {

enum class Target { CPU, CUDA };

/// "cpu" or "cuda" (a `--target=` value); anything else is a one-line
/// error.
llvm::Expected<Target> parseTarget(llvm::StringRef name);

/// --linfuse-optimize, lifting weight packing when `liftWeights` (functions
/// with `linfuse.weight` arguments get `@f__pack`).
llvm::Error optimizeModule(ModuleOp module, bool liftWeights);

/// --linfuse-lower-to-cpu or --linfuse-lower-to-cuda (an error in builds
/// without the CUDA toolkit).
llvm::Error lowerModule(ModuleOp module, Target target);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_LOWERING_H
