//===- HostArray.h - host arrays, .npy files and --input specs --*- C++ -*-===//
//
// The arrays linfuse's tools (linfuse-run and friends) pass to and from the
// functions they execute: an element type, a shape and packed row-major
// bytes. They come from .npy files or from `--input=` splat specs such as
// `2x3xf32=1.5`, and are written back as .npy files or printed the way
// iree-run-module prints them (`2x3xf32=[[1 2 3][4 5 6]]`).
//
// bf16 has no numpy dtype; by linfuse's convention a bf16 array is stored in a
// .npy file as its raw bits with dtype '<u2' (uint16), and a '<u2' file reads
// back as bf16.
//
// Every error is an llvm::Error holding one line: for files, the path first
// ("x.npy: truncated data: expected 96 bytes, found 40"); for input specs,
// "bad --input '<spec>': <reason>".
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_TOOLS_HOSTARRAY_H
#define LINFUSE_TOOLS_HOSTARRAY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
namespace linfuse {

/// Element types of host arrays. I1 is stored one byte per element (0 or 1),
/// as numpy stores bool; BF16 and F16 as their 16-bit patterns.
enum class ElementType { F32, F64, F16, BF16, I32, I64, I8, I1 };

/// "f32", "f64", "f16", "bf16", "i32", "i64", "i8", "i1".
llvm::StringRef toString(ElementType type);
/// The inverse of toString; std::nullopt for any other string.
std::optional<ElementType> parseElementType(llvm::StringRef name);
/// Bytes per element (1 for I1).
int64_t byteSize(ElementType type);
/// True for F32, F64, F16 and BF16.
bool isFloat(ElementType type);
/// The bytes an array of `type` and `shape` holds; std::nullopt when a size
/// is negative or the count overflows int64_t.
std::optional<int64_t> arrayByteSize(ElementType type,
                                     llvm::ArrayRef<int64_t> shape);

/// A dense array in host memory.
struct HostArray {
  ElementType type = ElementType::F32;
  /// Rank 0 (a scalar) is allowed; every size is >= 0.
  llvm::SmallVector<int64_t> shape;
  /// Row-major (C order), packed: numElements() * byteSize(type) bytes.
  std::vector<char> data;

  /// A zero-filled array.
  static HostArray zeros(ElementType type, llvm::ArrayRef<int64_t> shape);

  /// The product of the sizes (1 for a scalar).
  int64_t numElements() const;
  /// Element `index` of the flattened array, converted to double (exact for
  /// every type but I64 beyond 2^53).
  double getAsDouble(int64_t index) const;
};

/// Reads a .npy file (format 1.0, 2.0 or 3.0). Supported dtypes: '<f4',
/// '<f8', '<f2', '<u2' (bf16 bits), '<i4', '<i8', '|i1', '|b1'; big-endian
/// ('>') variants are byte-swapped, Fortran-order data is transposed to C
/// order.
llvm::Expected<HostArray> readNpy(llvm::StringRef path);
/// Writes a .npy file, format 1.0 (2.0 if the header needs it), laid out
/// byte for byte as numpy's np.save lays it out (64-byte aligned header).
llvm::Error writeNpy(llvm::StringRef path, const HostArray &array);

/// Parses an `--input=` value: "@path.npy" reads a file; "2x3xf32=1.5" is a
/// 2x3 array of f32 whose elements are all 1.5; "f32=2" a scalar; "4xi32=7".
/// Float values are what strtod reads in full ("1.5", "-2e-3", "0x1p-3",
/// "inf", "nan"), rounded once, straight to the element type; integers are
/// decimal; i1 also takes "true" and "false". A value that does not fit the
/// element type (300 for i8, 1e39 for f32) is an error.
llvm::Expected<HostArray> parseInputSpec(llvm::StringRef spec);

/// "2x3xf32"; "f32" for a scalar.
std::string describeType(const HostArray &array);

/// Prints `2x3xf32=[[1 2 3][4 5 6]]` (a scalar: `f32=1.5`): floats with up to
/// 6 significant digits (printf's %g; f16 and bf16 as their float value),
/// integers in full, i1 as 0 or 1. An array of more than `maxElements`
/// elements (when `maxElements` >= 0) shows only the first and last few
/// entries of its longer dimensions, the middle replaced by "...", at most
/// `maxElements` elements in all when the rank allows it:
/// `2000xf32=[0 1 2 ... 1997 1998 1999]`.
void printArray(llvm::raw_ostream &os, const HostArray &array,
                int64_t maxElements = 1024);

/// IEEE half <-> float. Rounds to nearest, ties to even; overflow gives
/// infinity; NaNs stay NaN with their sign and leading payload bits (quieted
/// when narrowing).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
/// bfloat16 <-> float, with the same rounding and NaN handling.
uint16_t floatToBF16(float value);
float bf16ToFloat(uint16_t bits);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_TOOLS_HOSTARRAY_H
