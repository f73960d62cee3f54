//===- WeightMatrix.cpp - constant weights as f64 matrices ----------------===//

#include "linfuse/Dialect/Linfuse/Transforms/WeightMatrix.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

using namespace mlir;
using namespace mlir::linfuse;

Matrix mlir::linfuse::multiply(const Matrix &a, const Matrix &b) {
  assert(a.cols == b.rows && "shape mismatch");
  Matrix c(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i) {
    double *crow = &c.data[i * c.cols];
    for (int64_t k = 0; k < a.cols; ++k) {
      double aik = a.data[i * a.cols + k];
      if (aik == 0.0)
        continue;
      const double *brow = &b.data[k * b.cols];
      for (int64_t j = 0; j < b.cols; ++j)
        crow[j] += aik * brow[j];
    }
  }
  return c;
}

Matrix mlir::linfuse::addScaled(const Matrix &a, const Matrix &b,
                                double scale) {
  assert(a.rows == b.rows && a.cols == b.cols && "shape mismatch");
  Matrix c = a;
  for (size_t i = 0; i < c.data.size(); ++i)
    c.data[i] += scale * b.data[i];
  return c;
}

Matrix mlir::linfuse::transpose(const Matrix &m) {
  Matrix t(m.cols, m.rows);
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j)
      t.at(j, i) = m.at(i, j);
  return t;
}

/// Decodes one element of a float type from its little-endian bytes.
static double decode(FloatType type, const char *bytes) {
  if (type.isF32()) {
    float f;
    std::memcpy(&f, bytes, 4);
    return f;
  }
  if (type.isF64()) {
    double d;
    std::memcpy(&d, bytes, 8);
    return d;
  }
  if (type.isBF16()) {
    uint16_t h;
    std::memcpy(&h, bytes, 2);
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // f16 and anything else byte-sized: through APFloat.
  unsigned width = type.getWidth();
  uint64_t raw = 0;
  std::memcpy(&raw, bytes, width / 8);
  llvm::APFloat value(type.getFloatSemantics(), llvm::APInt(width, raw));
  bool lost;
  value.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
  return value.convertToDouble();
}

/// Rounds `value` to `type` (nearest-even) and stores its bytes.
static void encode(FloatType type, double value, char *bytes) {
  if (type.isF64()) {
    std::memcpy(bytes, &value, 8);
    return;
  }
  if (type.isF32()) {
    float f = static_cast<float>(value);
    std::memcpy(bytes, &f, 4);
    return;
  }
  llvm::APFloat f(value);
  bool lost;
  f.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  uint64_t raw = f.bitcastToAPInt().getZExtValue();
  std::memcpy(bytes, &raw, type.getWidth() / 8);
}

namespace {
/// A constant rank-1/2 float tensor, possibly behind a [1, 0] transpose.
struct ConstantMatrixRef {
  ElementsAttr attr;
  bool transposed = false;
};
} // namespace

/// Recognizes what readConstantMatrix can read, without touching the data.
static std::optional<ConstantMatrixRef> matchConstantMatrix(Value value) {
  ConstantMatrixRef ref;
  if (auto t = value.getDefiningOp<linalg::TransposeOp>()) {
    if (!t.hasPureTensorSemantics() ||
        t.getPermutation() != ArrayRef<int64_t>{1, 0})
      return std::nullopt;
    ref.transposed = true;
    value = t.getInput();
  }
  if (!matchPattern(value, m_Constant(&ref.attr)))
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(ref.attr.getType());
  auto eltType = type ? dyn_cast<FloatType>(type.getElementType()) : nullptr;
  if (!eltType || type.getRank() < 1 || type.getRank() > 2 ||
      eltType.getWidth() % 8 != 0)
    return std::nullopt;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(ref.attr))
    if (!resource.getRawHandle().getBlob())
      return std::nullopt;
  return ref;
}

bool mlir::linfuse::isConstantMatrix(Value value) {
  return matchConstantMatrix(value).has_value();
}

FailureOr<Matrix> mlir::linfuse::readConstantMatrix(Value value) {
  std::optional<ConstantMatrixRef> ref = matchConstantMatrix(value);
  if (!ref)
    return failure();
  auto type = cast<RankedTensorType>(ref->attr.getType());
  auto eltType = cast<FloatType>(type.getElementType());
  FailureOr<ConstantBytes> bytes = getConstantBytes(ref->attr);
  if (failed(bytes))
    return failure();
  int64_t rows = type.getRank() == 2 ? type.getDimSize(0) : 1;
  int64_t cols = type.getDimSize(type.getRank() - 1);
  Matrix m(rows, cols);
  size_t width = eltType.getWidth() / 8;
  for (size_t i = 0; i < m.data.size(); ++i)
    m.data[i] = decode(eltType, bytes->data.data() + i * width);
  return ref->transposed ? transpose(m) : m;
}

void mlir::linfuse::scaleRows(Matrix &m, const Matrix &factor) {
  for (int64_t k = 0; k < m.rows; ++k) {
    double g = factor.cols == 1 ? factor.at(0, 0) : factor.at(0, k);
    for (int64_t j = 0; j < m.cols; ++j)
      m.at(k, j) *= g;
  }
}

std::optional<double> mlir::linfuse::readConstantScalar(Value value) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

ElementsAttr mlir::linfuse::writeConstantMatrix(const Matrix &m,
                                                RankedTensorType type,
                                                int64_t resourceThreshold) {
  auto eltType = dyn_cast<FloatType>(type.getElementType());
  if (!eltType || type.getNumElements() != static_cast<int64_t>(m.data.size()))
    return {};
  size_t width = eltType.getWidth() / 8;
  return makeConstant(type, resourceThreshold, [&](MutableArrayRef<char> out) {
    for (size_t i = 0; i < m.data.size(); ++i)
      encode(eltType, m.data[i], out.data() + i * width);
    return success();
  });
}
