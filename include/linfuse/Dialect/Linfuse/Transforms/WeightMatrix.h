//===- WeightMatrix.h - constant weights as f64 matrices ----------*- C++
//-*-===//
//
// Folding matmul chains pre-multiplies constant weights at compile time. The
// products accumulate in f64 whatever the weights' type (f32, f16, bf16) and
// are rounded once, when written back.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTMATRIX_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTMATRIX_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include <vector>

namespace mlir {
namespace linfuse {

/// A dense row-major f64 matrix (a vector is a 1 x n matrix).
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;

  Matrix() = default;
  Matrix(int64_t rows, int64_t cols)
      : rows(rows), cols(cols), data(rows * cols, 0.0) {}
  double &at(int64_t r, int64_t c) { return data[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return data[r * cols + c]; }
};

/// `a * b`, accumulated in f64 (cache-friendly i-k-j order).
Matrix multiply(const Matrix &a, const Matrix &b);
/// `a + scale * b` (same shapes).
Matrix addScaled(const Matrix &a, const Matrix &b, double scale);
Matrix transpose(const Matrix &m);

/// The value of a constant rank-1 or rank-2 float tensor (`arith.constant`
/// with `dense<...>` or `dense_resource<...>`, possibly behind a
/// `linalg.transpose` of a constant) as a matrix (rank 1 -> 1 x n). Fails for
/// non-constants and non-float element types.
FailureOr<Matrix> readConstantMatrix(Value value);

/// True when readConstantMatrix(value) would succeed; reads no data.
bool isConstantMatrix(Value value);

/// Multiplies row k of `m` by `factor[k]` (a 1 x rows vector) or by the
/// scalar `factor` (1 x 1): `diag(g) · m`.
void scaleRows(Matrix &m, const Matrix &factor);

/// The scalar of a splat float constant (a `f32` constant or a splat tensor).
std::optional<double> readConstantScalar(Value value);

/// `m` as a constant of `type` (same number of elements, rank 1 or 2, element
/// type f32, f16, bf16 or f64), rounded to nearest-even once; a
/// `dense_resource` blob at or above `resourceThreshold` bytes.
ElementsAttr writeConstantMatrix(const Matrix &m, RankedTensorType type,
                                 int64_t resourceThreshold);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTMATRIX_H
