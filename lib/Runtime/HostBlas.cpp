//===- HostBlas.cpp - the final pass of the host's BLAS-style GEMMs -------===//
//
// Bias, activation and rounding over an f32 accumulator: what HostGemm.cpp's
// BLAS fallback and MklGemm.cpp do after the product (oneDNN fuses them
// into its matmul instead). One instance per output type; the arithmetic
// runs over chunks of a row, in loops the compiler vectorizes for the CPU
// the runtime runs on.
//
//===----------------------------------------------------------------------===//

#include "HostBlas.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace linfuse::runtime;

namespace {

// The activations in straight-line float arithmetic, without calls into
// libm, so that the compiler vectorizes the loops below (glibc's scalar
// erff/tanhf/expf were 10% of a bf16 BERT layer's time on the MKL path:
// 5 ns per element). The approximations are the ones oneDNN's and
// PyTorch's vectorized kernels use, so the MKL path rounds like the oneDNN
// path it stands in for.
#define LINFUSE_INLINE inline __attribute__((always_inline))

/// e^x: x = n ln2 + r, |r| <= ln2 / 2, e^r by its degree-6 Taylor
/// polynomial (relative error < 2 ulp), 2^n built in the exponent bits.
/// The polynomial sees x clamped to [-87.33, 88.37], where n stays a normal
/// exponent; beyond, the result is Inf above 88.72 (where e^x overflows)
/// and 0 below -87.33 (where it would be subnormal). NaN stays NaN.
LINFUSE_INLINE float expApprox(float input) {
  float x = input > 88.3762626647949f ? 88.3762626647949f : input;
  x = x < -87.3365447505531f ? -87.3365447505531f : x;
  // Round x / ln2 to an integer with the 1.5 * 2^23 trick: its low bits
  // are then n (no float-to-int conversion, which NaN would make undefined).
  constexpr float kShifter = 12582912.0f;
  float shifted = x * 1.44269504088896341f + kShifter;
  float n = shifted - kShifter;
  // ln2 in two parts, so that r is exact to float precision.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t exponent = int32_t(bitsOf(shifted) - bitsOf(kShifter)) + 127;
  float result = p * floatOf(uint32_t(exponent) << 23);
  result = input > 88.7228391116729996f ? __builtin_inff() : result;
  return input < -87.3365447505531f ? 0.0f : result;
}

/// tanh(x) = sign(x) (1 - e) / (1 + e) with e = e^{-2|x|}: absolute error
/// of a few 1e-8 (relative error grows near 0, where GELU multiplies it
/// by a small x).
LINFUSE_INLINE float tanhApprox(float x) {
  float e = expApprox(-2.0f * __builtin_fabsf(x));
  float t = (1.0f - e) / (1.0f + e);
  return __builtin_copysignf(t, x);
}

/// erf(x) by Abramowitz and Stegun 7.1.26 (absolute error <= 1.5e-7).
LINFUSE_INLINE float erfApprox(float x) {
  float ax = __builtin_fabsf(x);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float y = 1.0f - p * t * expApprox(-ax * ax);
  return __builtin_copysignf(y, x);
}

template <int Epilogue> LINFUSE_INLINE float applyEpilogue(float x) {
  switch (Epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return x < 0.0f ? 0.0f : x; // NaN stays NaN.
  case LINFUSE_EPILOGUE_GELU_ERF: {
    constexpr float kSqrtHalf = 0.7071067811865476f; // 1 / sqrt(2)
    return 0.5f * x * (1.0f + erfApprox(x * kSqrtHalf));
  }
  case LINFUSE_EPILOGUE_GELU_TANH: {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x *
           (1.0f + tanhApprox(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
  case LINFUSE_EPILOGUE_SILU:
    return x / (1.0f + expApprox(-x));
  default:
    return x;
  }
}

/// The elements of one row a chunk holds: a stack buffer between the f32
/// arithmetic and the store, so that neither loop reads what it writes
/// (acc may be C itself, which would keep the compiler's aliasing check
/// from ever taking the vector loop).
constexpr int64_t kChunk = 256;

/// tmp[j] = epilogue(acc[j] + bias[j]) for unit-stride rows.
template <int Epilogue>
LINFUSE_INLINE void epilogueChunk(const float *acc, const float *bias,
                                  float *tmp, int64_t n) {
  if (bias)
    for (int64_t j = 0; j < n; ++j)
      tmp[j] = applyEpilogue<Epilogue>(acc[j] + bias[j]);
  else
    for (int64_t j = 0; j < n; ++j)
      tmp[j] = applyEpilogue<Epilogue>(acc[j]);
}

LINFUSE_INLINE void epilogueChunkFor(int32_t epilogue, const float *acc,
                                     const float *bias, float *tmp, int64_t n) {
  switch (epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return epilogueChunk<LINFUSE_EPILOGUE_RELU>(acc, bias, tmp, n);
  case LINFUSE_EPILOGUE_GELU_ERF:
    return epilogueChunk<LINFUSE_EPILOGUE_GELU_ERF>(acc, bias, tmp, n);
  case LINFUSE_EPILOGUE_GELU_TANH:
    return epilogueChunk<LINFUSE_EPILOGUE_GELU_TANH>(acc, bias, tmp, n);
  case LINFUSE_EPILOGUE_SILU:
    return epilogueChunk<LINFUSE_EPILOGUE_SILU>(acc, bias, tmp, n);
  default:
    return epilogueChunk<LINFUSE_EPILOGUE_NONE>(acc, bias, tmp, n);
  }
}

// The same loops compiled for AVX-512 and AVX2 besides the baseline
// (x86-64: SSE2), chosen by the CPU at run time: the runtime is built for
// any x86-64, and the activations are arithmetic-bound.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) void
epilogueChunkAvx512(int32_t epilogue, const float *acc, const float *bias,
                    float *tmp, int64_t n) {
  epilogueChunkFor(epilogue, acc, bias, tmp, n);
}
__attribute__((target("avx2,fma"))) void
epilogueChunkAvx2(int32_t epilogue, const float *acc, const float *bias,
                  float *tmp, int64_t n) {
  epilogueChunkFor(epilogue, acc, bias, tmp, n);
}
#endif

void epilogueChunkBase(int32_t epilogue, const float *acc, const float *bias,
                       float *tmp, int64_t n) {
  epilogueChunkFor(epilogue, acc, bias, tmp, n);
}

using EpilogueChunkFn = void (*)(int32_t, const float *, const float *, float *,
                                 int64_t);

/// The widest variant this CPU runs, or a narrower one that
/// $LINFUSE_EPILOGUE_ISA names ("avx2", "baseline"; for tests and A/B
/// runs: a wider one than the CPU has is not taken).
EpilogueChunkFn epilogueChunkForCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const EpilogueChunkFn fn = [] {
    const char *env = std::getenv("LINFUSE_EPILOGUE_ISA");
    std::string wanted = env ? env : "";
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl");
    if (avx512 && wanted != "avx2" && wanted != "baseline")
      return &epilogueChunkAvx512;
    if (avx2 && wanted != "baseline")
      return &epilogueChunkAvx2;
    return &epilogueChunkBase;
  }();
  return fn;
#else
  return &epilogueChunkBase;
#endif
}

template <typename T>
void finishLoop(int32_t epilogue, const FinishRows &f, int64_t begin,
                int64_t end) {
  T *c = reinterpret_cast<T *>(f.c);
  if (f.accCol != 1 || f.cCol != 1) {
    // Strided rows (a transposed C): element by element.
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < f.cols; ++j) {
        float x = f.acc[i * f.accRow + j * f.accCol];
        float y;
        epilogueChunkBase(epilogue, &x, f.bias ? f.bias + j : nullptr, &y, 1);
        c[i * f.cRow + j * f.cCol] = fromFloat<T>(y);
      }
    return;
  }
  EpilogueChunkFn chunkFn = epilogueChunkForCpu();
  alignas(64) float tmp[kChunk];
  for (int64_t i = begin; i < end; ++i) {
    const float *acc = f.acc + i * f.accRow;
    T *out = c + i * f.cRow;
    for (int64_t j0 = 0; j0 < f.cols; j0 += kChunk) {
      int64_t n = std::min(kChunk, f.cols - j0);
      chunkFn(epilogue, acc + j0, f.bias ? f.bias + j0 : nullptr, tmp, n);
      for (int64_t j = 0; j < n; ++j)
        out[j0 + j] = fromFloat<T>(tmp[j]);
    }
  }
}

} // namespace

void linfuse::runtime::finishRows(int32_t cType, int32_t epilogue,
                                  const FinishRows &f, int64_t begin,
                                  int64_t end) {
  withStorageType(cType, [&](auto tag) {
    finishLoop<decltype(tag)>(epilogue, f, begin, end);
  });
}
