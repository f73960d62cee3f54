//===- HostBlas.h - what the host's BLAS-style GEMM paths share -*- C++ -*-===//
//
// Not installed. The host GEMM paths that call BLAS-style libraries and
// compute into an f32 accumulator (HostGemm.cpp's OpenBLAS fallback,
// MklGemm.cpp) share the f16/bf16 storage types and their rounding, how a
// strided matrix is passed to BLAS, and the pass that adds the bias,
// applies the epilogue and rounds into C.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_HOSTBLAS_H
#define LINFUSE_LIB_RUNTIME_HOSTBLAS_H

#include "linfuse/Runtime/Runtime.h"

#include <algorithm>
#include <cstdint>

namespace linfuse::runtime {

/// Storage of one IEEE binary16 / bfloat16 element (distinct types, so that
/// templates can dispatch on them).
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

// std::bit_cast is C++20; the builtin is in GCC >= 11 and Clang.
inline uint32_t bitsOf(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float floatOf(uint32_t u) { return __builtin_bit_cast(float, u); }

inline float toFloat(float v) { return v; }

inline float toFloat(Half h) {
  uint32_t sign = uint32_t(h.bits & 0x8000) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1f;
  uint32_t mantissa = h.bits & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32.
    float magnitude = float(mantissa) * 0x1p-24f;
    return floatOf(sign | bitsOf(magnitude));
  }
  if (exponent == 0x1f) // Inf, or NaN with its payload kept.
    return floatOf(sign | 0x7f800000 | (mantissa << 13));
  return floatOf(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

inline float toFloat(BFloat b) { return floatOf(uint32_t(b.bits) << 16); }

template <typename T> T fromFloat(float v);

template <> inline float fromFloat<float>(float v) { return v; }

/// Round to nearest even, in integer arithmetic so that it does not depend
/// on the floating-point environment (flush-to-zero, rounding mode).
template <> inline Half fromFloat<Half>(float v) {
  uint32_t x = bitsOf(v);
  uint16_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x > 0x7f800000) // NaN: stays a (quiet) NaN, top payload bits kept.
    return {uint16_t(sign | 0x7e00 | ((x >> 13) & 0x3ff))};
  if (x >= 0x477ff000) // >= 65520 (half-way to 2^16) and Inf round to Inf.
    return {uint16_t(sign | 0x7c00)};
  if (x >= 0x38800000) { // Normal half (>= 2^-14).
    // Rebias the exponent; adding 0xfff plus the lowest kept bit rounds the
    // 13 dropped bits to nearest even (a carry may bump the exponent).
    uint32_t keptOdd = (x >> 13) & 1;
    x += (uint32_t(15 - 127) << 23) + 0xfff + keptOdd;
    return {uint16_t(sign | (x >> 13))};
  }
  if (x < 0x33000000) // < 2^-25: rounds to zero (2^-25 itself ties to 0).
    return {sign};
  // Subnormal half: the value in units of 2^-24 is significand >> shift.
  uint32_t significand = (x & 0x7fffff) | 0x800000;
  uint32_t shift = 126 - (x >> 23); // 14 .. 24
  uint32_t result = significand >> shift;
  uint32_t rest = significand & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (result & 1)))
    ++result; // May carry into the smallest normal, which is still right.
  return {uint16_t(sign | result)};
}

template <> inline BFloat fromFloat<BFloat>(float v) {
  uint32_t x = bitsOf(v);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: keep it one, quiet.
    return {uint16_t((x >> 16) | 0x40)};
  x += 0x7fff + ((x >> 16) & 1); // Round to nearest even; overflow -> Inf.
  return {uint16_t(x >> 16)};
}

/// Calls `fn` with a value of the storage type of `dtype` (already
/// validated to be a known code).
template <typename Fn> inline void withStorageType(int32_t dtype, Fn &&fn) {
  switch (dtype) {
  case LINFUSE_F16:
    return fn(Half{});
  case LINFUSE_BF16:
    return fn(BFloat{});
  default:
    return fn(float{});
  }
}

/// The leading dimension with which a rows x cols matrix with these strides
/// (in elements) can be passed to BLAS as row-major, or 0 if it cannot
/// (a column stride other than 1, or a leading dimension over `maxLd`,
/// the largest the library's integer type holds).
inline int64_t rowMajorLd(int64_t rows, int64_t cols, int64_t rowStride,
                          int64_t colStride, int64_t maxLd) {
  if (colStride != 1)
    return 0;
  // A single row's stride is never used, so any value may come in (MLIR
  // canonicalizes it freely); BLAS still wants ld >= max(cols, 1).
  int64_t ld = rows == 1 ? std::max({rowStride, cols, int64_t(1)}) : rowStride;
  if (ld < std::max<int64_t>(cols, 1) || ld > maxLd)
    return 0;
  return ld;
}

/// How a rows x cols matrix with these strides is passed to BLAS in
/// row-major order: as row-major (`transposed` false) or as the transpose of
/// a row-major matrix (`transposed` true), with leading dimension `ld` (at
/// most `maxLd`). False if neither.
inline bool blasLayout(int64_t rows, int64_t cols, int64_t rowStride,
                       int64_t colStride, int64_t maxLd, int64_t &ld,
                       bool &transposed) {
  if ((ld = rowMajorLd(rows, cols, rowStride, colStride, maxLd))) {
    transposed = false;
    return true;
  }
  if ((ld = rowMajorLd(cols, rows, colStride, rowStride, maxLd))) {
    transposed = true;
    return true;
  }
  return false;
}

/// One batch element's final pass: C(i, j) = round(epilogue(acc(i, j) +
/// bias[j])). acc(i, j) is acc[i * accRow + j * accCol] (f32); C(i, j) the
/// element i * cRow + j * cCol of `c`, of the GEMM's c_type; `bias` holds
/// `cols` values or is null. acc may be C itself.
struct FinishRows {
  const float *acc;
  int64_t accRow, accCol;
  char *c;
  int64_t cRow, cCol, cols;
  const float *bias;
};

/// Rows [begin, end) of that pass (`epilogue` a linfuse_epilogue code).
void finishRows(int32_t cType, int32_t epilogue, const FinishRows &f,
                int64_t begin, int64_t end);

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_HOSTBLAS_H
