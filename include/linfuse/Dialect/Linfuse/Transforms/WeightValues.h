//===- WeightValues.h - what a value is computed from -------------*- C++
//-*-===//
//
// Folding may pre-multiply weights only when they are known before the first
// call: constants (folded at compile time) or `linfuse.weight` function
// arguments and what is computed from them alone (folded as IR, which
// `--linfuse-lift-weight-packing` moves into the one-time packing function).
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTVALUES_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTVALUES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

namespace mlir {
namespace linfuse {

/// Argument attribute marking a run-time weight.
inline constexpr llvm::StringLiteral kWeightArgAttr = "linfuse.weight";

enum class ValueOrigin {
  /// Depends on a run-time input (or could not be proven otherwise).
  Runtime,
  /// Computed from constants only.
  Constant,
  /// Computed from `linfuse.weight` arguments (and constants): known at load
  /// time.
  Weights,
};

/// True for an entry-block argument of a function marked `linfuse.weight`.
bool isWeightArgument(Value value);

/// Classifies `value` by looking through side-effect free ops. The search is
/// bounded (weight preprocessing is shallow); past the bound the answer is
/// Runtime, which is always safe.
ValueOrigin getValueOrigin(Value value);

/// True when `value` is known before the first call (Constant or Weights).
inline bool isLoadTimeValue(Value value) {
  return getValueOrigin(value) != ValueOrigin::Runtime;
}

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTVALUES_H
