//===- ActivationMatcher.h - recognize GEMM epilogue activations --*- C++
//-*-===//
//
// Importers spell the same activation many ways (torch-mlir's GELU is a
// dozen arith/math ops whose order depends on the version; ReLU is a
// maximumf, or a cmpf + select). Instead of matching op sequences, linfuse
// evaluates the element-wise body on sample points and compares it with
// each epilogue's function: any spelling that computes the function is
// recognized, and anything else (unsupported ops, another function) is not.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_ACTIVATIONMATCHER_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_ACTIVATIONMATCHER_H

#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"

#include <optional>

namespace mlir {
namespace linfuse {

/// The epilogue `op` computes when it is an element-wise unary
/// `linalg.generic` (one input and one init with identity maps, all loops
/// parallel, the init unused) whose body is relu, gelu (erf or tanh form)
/// or silu of its input; std::nullopt otherwise. The body may compute in a
/// wider type (extf/truncf around it).
std::optional<Epilogue> matchActivation(Operation *op);

/// The value of the epilogue's function at `x` (the reference semantics of
/// `#linfuse.epilogue`).
double evaluateEpilogue(Epilogue epilogue, double x);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_ACTIVATIONMATCHER_H
