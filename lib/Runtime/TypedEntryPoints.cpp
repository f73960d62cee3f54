//===- TypedEntryPoints.cpp - linfuse_cpu_gemm_<ab>_<c> -------------------===//
//
// One exported symbol per element-type combination (lowered code cannot
// pass differently typed unranked memrefs to one symbol); each forwards to
// linfuse_cpu_gemm with the dtype codes.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#define LINFUSE_DEFINE_CPU_GEMM(AB, C, AB_CODE, C_CODE)                        \
  int32_t linfuse_cpu_gemm_##AB##_##C(                                         \
      int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,     \
      void *bias, int64_t c_rank, void *c, int32_t flags, int32_t epilogue,    \
      float alpha, float beta) {                                               \
    return linfuse_cpu_gemm(a_rank, a, b_rank, b, bias_rank, bias, c_rank, c,  \
                            AB_CODE, C_CODE, flags, epilogue, alpha, beta);    \
  }

extern "C" {
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DEFINE_CPU_GEMM)
}
