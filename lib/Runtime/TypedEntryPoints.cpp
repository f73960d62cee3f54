//===- TypedEntryPoints.cpp - linfuse_<target>_gemm_<ab>_<c> --------------===//
//
// One exported symbol per target and element-type combination (lowered code
// cannot pass differently typed unranked memrefs to one symbol); each
// forwards to linfuse_<target>_gemm with the dtype codes.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#define LINFUSE_DEFINE_TYPED_GEMM(TARGET, AB, C, AB_CODE, C_CODE)              \
  int32_t linfuse_##TARGET##_gemm_##AB##_##C(                                  \
      int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,     \
      void *bias, int64_t c_rank, void *c, int32_t flags, int32_t epilogue,    \
      float alpha, float beta) {                                               \
    return linfuse_##TARGET##_gemm(a_rank, a, b_rank, b, bias_rank, bias,      \
                                   c_rank, c, AB_CODE, C_CODE, flags,          \
                                   epilogue, alpha, beta);                     \
  }
#define LINFUSE_DEFINE_CPU_GEMM(AB, C, AB_CODE, C_CODE)                        \
  LINFUSE_DEFINE_TYPED_GEMM(cpu, AB, C, AB_CODE, C_CODE)
#define LINFUSE_DEFINE_CUDA_GEMM(AB, C, AB_CODE, C_CODE)                       \
  LINFUSE_DEFINE_TYPED_GEMM(cuda, AB, C, AB_CODE, C_CODE)

extern "C" {
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DEFINE_CPU_GEMM)
#ifdef LINFUSE_ENABLE_CUDA
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DEFINE_CUDA_GEMM)
#endif
}
