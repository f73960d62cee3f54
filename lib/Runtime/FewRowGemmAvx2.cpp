//===- FewRowGemmAvx2.cpp - the few-row f16 kernels for AVX2 --------------===//
//
// Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt); called only where the
// CPU has them and no AVX-512 (FewRowGemm.cpp).
//
//===----------------------------------------------------------------------===//

#include <immintrin.h>

namespace {
struct Isa {
  using V = __m256;
  static constexpr long kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  static V loadHalves(const unsigned short *p) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(V v) {
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float half(unsigned short h) { return _cvtsh_ss(h); }
};
} // namespace

#include "FewRowGemmKernels.h"

void linfuse::runtime::fewRowColumnsAvx2(const FewRowTask &task, int64_t begin,
                                         int64_t end) {
  columnsForRows(task, begin, end);
}
