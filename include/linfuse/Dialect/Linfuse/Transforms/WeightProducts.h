//===- WeightProducts.h - weight algebra emitted as IR ------------*- C++
//-*-===//
//
// Folding a chain whose weights are run-time `linfuse.weight` arguments
// cannot compute `A·B` at compile time; it emits the product as IR instead,
// which depends on weights only, so `--linfuse-lift-weight-packing` moves it
// into the one-time packing function. The products are computed in an
// accumulation type (f64 for f32/f64 weights, as the compile-time fold does;
// f32 for f16/bf16) and rounded once, by `store`.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTPRODUCTS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTPRODUCTS_H

#include "mlir/IR/Builders.h"

namespace mlir {
namespace linfuse {

/// Builds rank-2 matrix algebra on tensors in the accumulation type.
class WeightProductBuilder {
public:
  /// `weightType` is the element type of the weights (f16, bf16, f32, f64).
  WeightProductBuilder(OpBuilder &b, Location loc, Type weightType);

  /// The accumulation type for `weightType`.
  static Type accumulationType(Type weightType);

  /// `v` (rank 1 becomes 1 x n) in the accumulation type, transposed when
  /// `transposed`.
  Value load(Value v, bool transposed = false);
  /// `a · b`.
  Value multiply(Value a, Value b);
  /// `a + s · b` (same shapes).
  Value addScaled(Value a, Value b, double s);
  /// `s · a`.
  Value scale(Value a, double s);
  /// `diag(g) · m`: row k of `m` times `g[0, k]` (`g` is 1 x rows).
  Value scaleRows(Value m, Value g);
  /// `m` rounded once to `type`'s element type, transposed when
  /// `transposed`, as rank 1 when `type` has rank 1.
  Value store(Value m, RankedTensorType type, bool transposed = false);

private:
  Value
  elementwise(Value a, Value b, AffineMap bMap,
              function_ref<Value(OpBuilder &, Location, Value, Value)> combine);
  Value convert(Value v, Type elementType);
  Value transpose(Value v);

  OpBuilder &b;
  Location loc;
  Type acc;
};

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTPRODUCTS_H
