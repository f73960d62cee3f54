//===- GemmCodes.cpp - checks shared by the GEMM entry points -------------===//

#include "RuntimeInternal.h"

namespace linfuse::runtime {

const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case LINFUSE_F32:
    return "f32";
  case LINFUSE_F16:
    return "f16";
  case LINFUSE_BF16:
    return "bf16";
  case LINFUSE_I8:
    return "i8";
  case LINFUSE_I32:
    return "i32";
  default:
    return "?";
  }
}

int64_t dtypeBytes(int32_t dtype) {
  switch (dtype) {
  case LINFUSE_F16:
  case LINFUSE_BF16:
    return 2;
  case LINFUSE_I8:
    return 1;
  default: // f32, i32
    return 4;
  }
}

int32_t validateGemmCodes(const char *fn, int32_t abType, int32_t cType,
                          int32_t flags, int32_t epilogue, float alpha,
                          float beta) {
  auto known = [](int32_t dtype) {
    return dtype >= LINFUSE_F32 && dtype <= LINFUSE_I32;
  };
  if (!known(abType))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: unknown ab_type code %d",
                fn, abType);
  if (!known(cType))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: unknown c_type code %d",
                fn, cType);
  bool integer = abType == LINFUSE_I8;
  if (integer != (cType == LINFUSE_I32) || abType == LINFUSE_I32)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: integer GEMMs multiply i8 into i32, not %s into %s", fn,
                dtypeName(abType), dtypeName(cType));
  if (!integer && cType != abType && cType != LINFUSE_F32)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: c_type %s must be ab_type (%s) or f32", fn,
                dtypeName(cType), dtypeName(abType));
  constexpr int32_t kKnownFlags =
      LINFUSE_GEMM_TRANSPOSE_A | LINFUSE_GEMM_TRANSPOSE_B |
      LINFUSE_GEMM_HAS_BIAS | LINFUSE_GEMM_CONSTANT_B;
  if (flags & ~kKnownFlags)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn,
                unsigned(flags & ~kKnownFlags));
  if (epilogue < LINFUSE_EPILOGUE_NONE || epilogue > LINFUSE_EPILOGUE_SILU)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: unknown epilogue code %d",
                fn, epilogue);
  if (integer && epilogue != LINFUSE_EPILOGUE_NONE)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: an integer GEMM takes no activation", fn);
  // Integer scalars have no float scale to apply: C = A*B or C += A*B.
  if (integer && (alpha != 1.0f || (beta != 0.0f && beta != 1.0f)))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: an integer GEMM takes alpha 1 and beta 0 or 1, not %g "
                "and %g",
                fn, double(alpha), double(beta));
  return LINFUSE_OK;
}

} // namespace linfuse::runtime
