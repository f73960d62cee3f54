//===- HostBlas.cpp - the final pass of the host's BLAS-style GEMMs -------===//
//
// Bias, activation and rounding over an f32 accumulator: what HostGemm.cpp's
// BLAS fallback and MklGemm.cpp do after the product (oneDNN fuses them
// into its matmul instead). One template instance per output type and
// epilogue, so that the inner loop is a plain loop the compiler vectorizes.
//
//===----------------------------------------------------------------------===//

#include "HostBlas.h"

#include <cmath>

using namespace linfuse::runtime;

namespace {

template <int Epilogue> float applyEpilogue(float x) {
  switch (Epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return x < 0.0f ? 0.0f : x; // NaN stays NaN.
  case LINFUSE_EPILOGUE_GELU_ERF: {
    constexpr float kSqrtHalf = 0.7071067811865476f; // 1 / sqrt(2)
    return 0.5f * x * (1.0f + std::erf(x * kSqrtHalf));
  }
  case LINFUSE_EPILOGUE_GELU_TANH: {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
  case LINFUSE_EPILOGUE_SILU:
    return x / (1.0f + std::exp(-x));
  default:
    return x;
  }
}

template <typename T, int Epilogue>
void finishLoop(const FinishRows &f, int64_t begin, int64_t end) {
  T *c = reinterpret_cast<T *>(f.c);
  for (int64_t i = begin; i < end; ++i) {
    const float *acc = f.acc + i * f.accRow;
    T *out = c + i * f.cRow;
    for (int64_t j = 0; j < f.cols; ++j) {
      float x = acc[j * f.accCol];
      if (f.bias)
        x += f.bias[j];
      out[j * f.cCol] = fromFloat<T>(applyEpilogue<Epilogue>(x));
    }
  }
}

} // namespace

void linfuse::runtime::finishRows(int32_t cType, int32_t epilogue,
                                  const FinishRows &f, int64_t begin,
                                  int64_t end) {
  withStorageType(cType, [&](auto tag) {
    using T = decltype(tag);
    switch (epilogue) {
    case LINFUSE_EPILOGUE_RELU:
      return finishLoop<T, LINFUSE_EPILOGUE_RELU>(f, begin, end);
    case LINFUSE_EPILOGUE_GELU_ERF:
      return finishLoop<T, LINFUSE_EPILOGUE_GELU_ERF>(f, begin, end);
    case LINFUSE_EPILOGUE_GELU_TANH:
      return finishLoop<T, LINFUSE_EPILOGUE_GELU_TANH>(f, begin, end);
    case LINFUSE_EPILOGUE_SILU:
      return finishLoop<T, LINFUSE_EPILOGUE_SILU>(f, begin, end);
    default:
      return finishLoop<T, LINFUSE_EPILOGUE_NONE>(f, begin, end);
    }
  });
}
