//===- HostArray.cpp - element types, conversions and printing ------------===//

#include "linfuse/Tools/HostArray.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>

using namespace mlir;
using namespace mlir::linfuse;

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

namespace {
struct ElementTypeInfo {
  ElementType type;
  llvm::StringRef name;
  int64_t byteSize;
};
} // namespace

static constexpr ElementTypeInfo kElementTypes[] = {
    {ElementType::F32, "f32", 4}, {ElementType::F64, "f64", 8},
    {ElementType::F16, "f16", 2}, {ElementType::BF16, "bf16", 2},
    {ElementType::I32, "i32", 4}, {ElementType::I64, "i64", 8},
    {ElementType::I8, "i8", 1},   {ElementType::I1, "i1", 1},
};

static const ElementTypeInfo &getInfo(ElementType type) {
  for (const ElementTypeInfo &info : kElementTypes)
    if (info.type == type)
      return info;
  llvm_unreachable("unknown ElementType");
}

llvm::StringRef mlir::linfuse::toString(ElementType type) {
  return getInfo(type).name;
}

std::optional<ElementType>
mlir::linfuse::parseElementType(llvm::StringRef name) {
  for (const ElementTypeInfo &info : kElementTypes)
    if (info.name == name)
      return info.type;
  return std::nullopt;
}

int64_t mlir::linfuse::byteSize(ElementType type) {
  return getInfo(type).byteSize;
}

bool mlir::linfuse::isFloat(ElementType type) {
  return type == ElementType::F32 || type == ElementType::F64 ||
         type == ElementType::F16 || type == ElementType::BF16;
}

/// The product of `sizes`, 0 if any is 0 (even when the others overflow).
static int64_t product(llvm::ArrayRef<int64_t> sizes) {
  if (llvm::is_contained(sizes, 0))
    return 0;
  int64_t result = 1;
  for (int64_t size : sizes)
    result *= size;
  return result;
}

std::optional<int64_t>
mlir::linfuse::arrayByteSize(ElementType type, llvm::ArrayRef<int64_t> shape) {
  if (llvm::any_of(shape, [](int64_t size) { return size < 0; }))
    return std::nullopt;
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t bytes = byteSize(type);
  for (int64_t size : shape)
    if (llvm::MulOverflow(bytes, size, bytes))
      return std::nullopt;
  return bytes;
}

//===----------------------------------------------------------------------===//
// Float conversions
//===----------------------------------------------------------------------===//

static uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// `value >> shift` rounded to nearest, ties to even (1 <= shift <= 31).
static uint32_t shiftRightRoundEven(uint32_t value, unsigned shift) {
  uint32_t result = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1)))
    ++result;
  return result;
}

uint16_t mlir::linfuse::floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = (bits >> 16) & 0x8000;
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) // NaN: keep the leading payload bits, quieted.
    return sign | 0x7e00 | ((magnitude >> 13) & 0x3ff);
  if (magnitude >= 0x477ff000) // >= 65520 (halfway to 2^16): infinity.
    return sign | 0x7c00;
  int exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  if (exponent < 113) {
    // Below 2^-14: a half subnormal, in units of 2^-24. The value in those
    // units is mantissa * 2^(exponent - 126); below 2^-25 it rounds to zero.
    unsigned shift = 126 - exponent;
    if (shift > 24)
      return sign;
    // Rounding up to 0x400 gives the smallest normal, as it should.
    return sign | shiftRightRoundEven(mantissa, shift);
  }
  // Normal: rebias the exponent; a carry out of the mantissa bumps it.
  uint32_t half = ((exponent - 112) << 10) | ((mantissa & 0x7fffff) >> 13);
  uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return sign | half;
}

float mlir::linfuse::halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) { // Zero or subnormal: mantissa * 2^-24, exact.
    float magnitude = float(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) // Infinity or NaN (payload kept).
    return bitsToFloat(sign | 0x7f800000 | (mantissa << 13));
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t mlir::linfuse::floatToBF16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) // NaN: truncate, quieted.
    return (bits >> 16) | 0x40;
  // Round to nearest even; a carry may run into the exponent (up to inf).
  return (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
}

float mlir::linfuse::bf16ToFloat(uint16_t bits) {
  return bitsToFloat(uint32_t(bits) << 16);
}

//===----------------------------------------------------------------------===//
// HostArray
//===----------------------------------------------------------------------===//

HostArray HostArray::zeros(ElementType type, llvm::ArrayRef<int64_t> shape) {
  HostArray array;
  array.type = type;
  array.shape.assign(shape.begin(), shape.end());
  array.data.assign(array.numElements() * byteSize(type), 0);
  return array;
}

int64_t HostArray::numElements() const { return product(shape); }

template <typename T> static T load(const HostArray &array, int64_t index) {
  T value;
  std::memcpy(&value, array.data.data() + index * sizeof(T), sizeof(T));
  return value;
}

double HostArray::getAsDouble(int64_t index) const {
  assert(index >= 0 && index < numElements() && "index out of range");
  switch (type) {
  case ElementType::F32:
    return load<float>(*this, index);
  case ElementType::F64:
    return load<double>(*this, index);
  case ElementType::F16:
    return halfToFloat(load<uint16_t>(*this, index));
  case ElementType::BF16:
    return bf16ToFloat(load<uint16_t>(*this, index));
  case ElementType::I32:
    return load<int32_t>(*this, index);
  case ElementType::I64:
    return double(load<int64_t>(*this, index));
  case ElementType::I8:
    return load<int8_t>(*this, index);
  case ElementType::I1:
    return load<uint8_t>(*this, index) != 0;
  }
  llvm_unreachable("unknown ElementType");
}

std::string mlir::linfuse::describeType(const HostArray &array) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (int64_t size : array.shape)
    os << size << 'x';
  os << toString(array.type);
  return text;
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

namespace {
/// Prints an array recursively, dimension by dimension. With `edge` >= 0, a
/// dimension longer than 2 * edge shows only its first and last `edge`
/// entries, with "..." in between.
class ArrayPrinter {
public:
  ArrayPrinter(llvm::raw_ostream &os, const HostArray &array, int64_t edge)
      : os(os), array(array), edge(edge) {}

  void print() {
    os << describeType(array) << '=';
    if (array.shape.empty())
      printElement(0);
    else
      printDimension(0, 0);
  }

private:
  void printElement(int64_t index) {
    if (array.type == ElementType::I64) {
      os << load<int64_t>(array, index);
      return;
    }
    double value = array.getAsDouble(index);
    if (!isFloat(array.type)) {
      os << int64_t(value);
      return;
    }
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%g", value);
    os << buffer;
  }

  /// Prints the slice of dimension `dim` that starts at element `offset`.
  void printDimension(size_t dim, int64_t offset) {
    int64_t size = array.shape[dim];
    int64_t stride = product(llvm::ArrayRef(array.shape).drop_front(dim + 1));
    bool innermost = dim + 1 == array.shape.size();
    bool elide = edge >= 0 && size > 2 * edge;
    os << '[';
    for (int64_t i = 0; i < size; ++i) {
      if (innermost && i > 0)
        os << ' ';
      if (elide && i == edge) {
        os << (innermost ? "... " : "...");
        i = size - edge;
      }
      if (innermost)
        printElement(offset + i);
      else
        printDimension(dim + 1, offset + i * stride);
    }
    os << ']';
  }

  llvm::raw_ostream &os;
  const HostArray &array;
  int64_t edge;
};
} // namespace

/// The number of elements shown when every dimension shows at most 2 * edge
/// entries, or `limit + 1` once that exceeds `limit`.
static int64_t countShown(llvm::ArrayRef<int64_t> shape, int64_t edge,
                          int64_t limit) {
  int64_t count = 1;
  for (int64_t size : shape) {
    if (llvm::MulOverflow(count, std::min(size, 2 * edge), count) ||
        count > limit)
      return limit + 1;
  }
  return count;
}

void mlir::linfuse::printArray(llvm::raw_ostream &os, const HostArray &array,
                               int64_t maxElements) {
  int64_t edge = -1;
  if (maxElements >= 0 && array.numElements() > maxElements) {
    // The largest edge that shows at most maxElements elements (at least 1).
    // Showing every entry of every dimension shows them all, too many, so
    // the answer is below half the longest dimension.
    int64_t low = 1, high = 1;
    for (int64_t size : array.shape)
      high = std::max(high, size / 2 + 1);
    while (high - low > 1) {
      int64_t mid = low + (high - low) / 2;
      if (countShown(array.shape, mid, maxElements) <= maxElements)
        low = mid;
      else
        high = mid;
    }
    edge = low;
  }
  ArrayPrinter(os, array, edge).print();
}
