//===- FewRowGemm.cpp - f16 products of a few rows at memory speed --------===//
//
// An f16 GEMM with 1 to 4 rows (a decode step) is bound by reading the
// weight, once. oneDNN 3.2's f16 brgemm, the only f16 matmul linfuse has on
// the CPU, reads it at about half the machine's bandwidth there: at hidden
// 4096, M = 1, merged Q/K/V took 7.9 ms against PyTorch's 6.5 and
// torch.compile's 2.1 (Benchmarks.md). These products therefore run on the
// kernels of FewRowGemmKernels.h (AVX-512 or AVX2 with F16C, chosen by the
// CPU): the weight's halves widened in registers, f32 accumulation, the
// columns split over the GEMMs' OpenMP pool, then the usual final pass
// (bias, activation, rounding: HostBlas.h) on each thread's columns.
//
// $LINFUSE_FEW_ROW_GEMM=0 leaves them to oneDNN, =avx2 takes the AVX2
// kernel on an AVX-512 CPU (for A/B runs and tests).
//
//===----------------------------------------------------------------------===//

#include "FewRowGemm.h"
#include "HostBlas.h"
#include "OneDnnCommon.h"
#include "OneDnnGemm.h"
#include "RuntimeInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

using namespace linfuse::runtime;

namespace {

/// The widest kernel this CPU runs, null if it has neither (then oneDNN
/// computes these products, as before).
FewRowColumnsFn columnsForCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const FewRowColumnsFn fn = []() -> FewRowColumnsFn {
    const char *env = std::getenv("LINFUSE_FEW_ROW_GEMM");
    std::string wanted = env ? env : "";
    if (wanted == "0")
      return nullptr;
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avx512f") && wanted != "avx2")
      return &fewRowColumnsAvx512;
    return avx2 ? &fewRowColumnsAvx2 : nullptr;
  }();
  return fn;
#else
  return nullptr;
#endif
}

/// Products smaller than this (M * K * N multiply-adds) run on the calling
/// thread (as kSerialFlops for oneDNN's).
constexpr int64_t kSerialMacs = int64_t(1) << 16;

struct Shared {
  FewRowColumnsFn columns;
  FewRowTask task;
  int32_t cType, epilogue;
  const GemmMatrix *c;
  const float *bias; // f32, N values, or null
  const OpenMp *omp;
};

/// Columns [begin, end): the products, then their final pass.
void computeColumns(const Shared &s, int64_t begin, int64_t end) {
  if (begin >= end)
    return;
  s.columns(s.task, begin, end);
  int64_t cBytes = dtypeBytes(s.cType);
  FinishRows f{s.task.acc + begin,
               s.task.n,
               1,
               s.c->data + begin * s.c->colStride * cBytes,
               s.c->rowStride,
               s.c->colStride,
               end - begin,
               s.bias ? s.bias + begin : nullptr};
  finishRows(s.cType, s.epilogue, f, 0, s.task.m);
}

/// One thread's share of the columns, in whole kFewRowColumnUnit blocks.
void runShare(void *data) {
  const Shared &s = *static_cast<const Shared *>(data);
  int64_t threads = s.omp->numThreads(), me = s.omp->threadNum();
  int64_t units = (s.task.n + kFewRowColumnUnit - 1) / kFewRowColumnUnit;
  int64_t begin = std::min(s.task.n, units * me / threads * kFewRowColumnUnit);
  int64_t end =
      std::min(s.task.n, units * (me + 1) / threads * kFewRowColumnUnit);
  computeColumns(s, begin, end);
}

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};

} // namespace

bool linfuse::runtime::fewRowGemm(int32_t abType, int32_t cType,
                                  const GemmMatrix &a, bool transA,
                                  const GemmMatrix &b, bool transB,
                                  const GemmMatrix *bias, const GemmMatrix &c,
                                  int32_t epilogue, bool constantB) {
  int64_t m = transA ? a.cols : a.rows, k = transA ? a.rows : a.cols;
  int64_t n = transB ? b.rows : b.cols;
  if (abType != LINFUSE_F16 || a.batch != 1 || m < 1 || m > kFewRowsMax ||
      k < 1 || n < 1)
    return false;
  FewRowColumnsFn columns = columnsForCpu();
  if (!columns)
    return false;
  // op(B)(q, j) = B[q + j * strideN]: B's rows (or a K x 1 B) are op(B)'s
  // columns. A K x N B (x @ W, JAX's layout) stays on oneDNN: read a few
  // columns at a time across K it was slower (Benchmarks.md).
  int64_t strideK = transB ? b.colStride : b.rowStride;
  int64_t strideN = transB ? b.rowStride : b.colStride;
  if ((strideK != 1 && k > 1) || strideN < 0)
    return false;
  // A handed-over weight may have only its oneDNN copy left.
  if (constantB && plainValuesGone(b.data, b.spanBytes(2)))
    return false;

  // One allocation: x (M x K), acc (M x N), the bias in f32 (N).
  // Sizes come from descriptors (a B with stride 0 may claim any N), so
  // the count is computed without overflow.
  size_t xFloats, accFloats, floats;
  if (__builtin_mul_overflow(size_t(m), size_t(k), &xFloats) ||
      __builtin_mul_overflow(size_t(m), size_t(n), &accFloats) ||
      __builtin_add_overflow(xFloats, accFloats, &floats) ||
      __builtin_add_overflow(floats, size_t(bias ? n : 0), &floats) ||
      floats > SIZE_MAX / sizeof(float))
    return false;
  std::unique_ptr<float[], FreeDeleter> scratch(
      static_cast<float *>(std::malloc(floats * sizeof(float))));
  if (!scratch)
    return false; // oneDNN may still manage; else the caller reports it.
  float *x = scratch.get(), *acc = x + m * k, *biasF = acc + m * n;
  const auto *aHalves = reinterpret_cast<const Half *>(a.data);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q)
      x[i * k + q] =
          toFloat(aHalves[transA ? q * a.rowStride + i * a.colStride
                                 : i * a.rowStride + q * a.colStride]);
  if (bias)
    withStorageType(cType, [&](auto tag) {
      const auto *values = reinterpret_cast<const decltype(tag) *>(bias->data);
      for (int64_t j = 0; j < n; ++j)
        biasF[j] = toFloat(values[j * bias->colStride]);
    });

  Shared s{
      columns,
      {reinterpret_cast<const uint16_t *>(b.data), strideN, x, k, m, k, acc, n},
      cType,
      epilogue,
      &c,
      bias ? biasF : nullptr,
      nullptr};
  int64_t units = (n + kFewRowColumnUnit - 1) / kFewRowColumnUnit;
  int64_t threads = 1;
  if (double(m) * double(k) * double(n) >= double(kSerialMacs) && units > 1)
    if ((s.omp = hostOpenMp()) && s.omp->parallel && s.omp->threadNum &&
        s.omp->numThreads)
      threads = std::min<int64_t>(configuredThreads(), units);
  if (threads > 1)
    s.omp->parallel(runShare, &s, unsigned(threads), 0);
  else
    computeColumns(s, 0, n);
  countFewRowGemmCall();
  return true;
}
