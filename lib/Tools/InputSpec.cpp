//===- InputSpec.cpp - parsing --input= values ----------------------------===//

#include "linfuse/Tools/HostArray.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SwapByteOrder.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace mlir;
using namespace mlir::linfuse;
using llvm::StringRef;
using llvm::Twine;

static const llvm::fltSemantics &floatSemantics(ElementType type) {
  switch (type) {
  case ElementType::F64:
    return llvm::APFloat::IEEEdouble();
  case ElementType::F16:
    return llvm::APFloat::IEEEhalf();
  case ElementType::BF16:
    return llvm::APFloat::BFloat();
  default:
    return llvm::APFloat::IEEEsingle();
  }
}

/// Stores the low `size` bytes of `value` in host byte order.
static void storeLowBytes(uint64_t value, int64_t size, char *element) {
  const char *bytes = reinterpret_cast<const char *>(&value);
  if (llvm::sys::IsBigEndianHost)
    bytes += sizeof(value) - size;
  std::memcpy(element, bytes, size);
}

namespace {
/// Parses "[<dim>x]*<type>=<value>" into a splat array.
class SplatParser {
public:
  explicit SplatParser(StringRef spec) : spec(spec) {}

  llvm::Expected<HostArray> parse() {
    auto [typeText, valueText] = spec.split('=');
    if (typeText.size() == spec.size())
      return error("missing '=value' (expected e.g. 2x3xf32=1.5, f32=2 or "
                   "@file.npy)");
    llvm::SmallVector<StringRef> parts;
    typeText.split(parts, 'x');
    std::optional<ElementType> type = parseElementType(parts.back());
    if (!type)
      return error("unknown element type '" + parts.back() +
                   "' (expected f32, f64, f16, bf16, i32, i64, i8 or i1)");
    llvm::SmallVector<int64_t> shape;
    for (StringRef part : llvm::ArrayRef(parts).drop_back()) {
      int64_t size;
      if (part.empty() || !llvm::all_of(part, llvm::isDigit) ||
          part.getAsInteger(10, size))
        return error("bad dimension '" + part + "'");
      shape.push_back(size);
    }
    std::optional<int64_t> bytes = arrayByteSize(*type, shape);
    if (!bytes)
      return error("shape too large");
    // Allocating more than the machine has would abort (LLVM's new
    // handler), not fail: refuse it here.
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && pageSize > 0 && *bytes / pageSize >= pages)
      return error(llvm::Twine(*bytes) + " bytes exceed the machine's " +
                   llvm::Twine(int64_t(pages) * pageSize) + " bytes of memory");
    if (valueText.empty())
      return error("missing value after '='");

    char element[8] = {};
    if (llvm::Error err = isFloat(*type)
                              ? parseFloat(*type, valueText, element)
                              : parseInteger(*type, valueText, element))
      return std::move(err);
    HostArray array = HostArray::zeros(*type, shape);
    int64_t elementSize = byteSize(*type);
    for (size_t offset = 0; offset < array.data.size(); offset += elementSize)
      std::memcpy(array.data.data() + offset, element, elementSize);
    return array;
  }

private:
  llvm::Error error(const Twine &reason) {
    return llvm::createStringError("bad --input '" + spec + "': " + reason);
  }

  llvm::Error unparsable(ElementType type, StringRef value) {
    return error("unparsable value '" + value + "' for " + toString(type));
  }

  /// Rounds `value` to `type` (to nearest, ties to even) into `element`.
  /// strtod decides what is a number (all of `value` must be one); APFloat
  /// rounds it, straight from the decimal digits.
  llvm::Error parseFloat(ElementType type, StringRef value, char *element) {
    std::string text = value.str();
    char *end = nullptr;
    errno = 0;
    double parsed = std::strtod(text.c_str(), &end);
    if (llvm::isSpace(text.front()) || end != text.c_str() + text.size())
      return unparsable(type, value);
    const llvm::fltSemantics &semantics = floatSemantics(type);
    llvm::APFloat result(semantics);
    if (std::isnan(parsed)) {
      result = llvm::APFloat::getNaN(semantics, std::signbit(parsed));
    } else if (std::isinf(parsed) && errno != ERANGE) { // "inf", "Infinity"
      result = llvm::APFloat::getInf(semantics, parsed < 0);
    } else {
      auto status =
          result.convertFromString(value, llvm::APFloat::rmNearestTiesToEven);
      if (!status) {
        llvm::consumeError(status.takeError());
        return unparsable(type, value);
      }
      if (*status & llvm::APFloat::opOverflow)
        return error("value " + value + " out of range for " + toString(type));
    }
    storeLowBytes(result.bitcastToAPInt().getZExtValue(), byteSize(type),
                  element);
    return llvm::Error::success();
  }

  llvm::Error parseInteger(ElementType type, StringRef value, char *element) {
    int64_t low = 0, high = 1;
    if (type != ElementType::I1) {
      unsigned bits = 8 * byteSize(type);
      low = llvm::minIntN(bits);
      high = llvm::maxIntN(bits);
    }
    int64_t result;
    if (type == ElementType::I1 && (value == "true" || value == "false")) {
      result = value == "true";
    } else if (value.getAsInteger(10, result)) {
      // Digits that do not fit in 64 bits are a range error.
      StringRef digits = value;
      digits.consume_front("-");
      if (digits.empty() || !llvm::all_of(digits, llvm::isDigit))
        return unparsable(type, value);
      return rangeError(type, value, low, high);
    }
    if (result < low || result > high)
      return rangeError(type, value, low, high);
    storeLowBytes(result, byteSize(type), element);
    return llvm::Error::success();
  }

  llvm::Error rangeError(ElementType type, StringRef value, int64_t low,
                         int64_t high) {
    return error("value " + value + " out of range for " + toString(type) +
                 " [" + Twine(low) + ", " + Twine(high) + "]");
  }

  StringRef spec;
};
} // namespace

llvm::Expected<HostArray> mlir::linfuse::parseInputSpec(StringRef spec) {
  if (spec.starts_with("@")) {
    if (spec.size() == 1)
      return llvm::createStringError("bad --input '@': missing file path");
    return readNpy(spec.drop_front());
  }
  return SplatParser(spec).parse();
}
