//===- FewRowGemmAvx512.cpp - the few-row f16 kernels for AVX-512 ---------===//
//
// Compiled with -mavx512f -mavx2 -mfma -mf16c (CMakeLists.txt); called only
// where the CPU has them (FewRowGemm.cpp).
//
//===----------------------------------------------------------------------===//

#include <immintrin.h>

namespace {
struct Isa {
  using V = __m512;
  static constexpr long kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float *p) { return _mm512_loadu_ps(p); }
  static V loadHalves(const unsigned short *p) {
    // The zero-masked forms of this and the extract below: GCC 12's
    // unmasked ones start from an "undefined" vector and warn about it.
    return _mm512_maskz_cvtph_ps(
        0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(V v) {
    __m512d d = _mm512_castps_pd(v);
    __m256 s8 = _mm256_add_ps(
        _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, d, 0)),
        _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, d, 1)));
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float half(unsigned short h) { return _cvtsh_ss(h); }
};
} // namespace

#include "FewRowGemmKernels.h"

void linfuse::runtime::fewRowColumnsAvx512(const FewRowTask &task,
                                           int64_t begin, int64_t end) {
  columnsForRows(task, begin, end);
}
