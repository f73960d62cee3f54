//===- FewRowGemm.h - f16 products of a few rows, per ISA -------*- C++ -*-===//
//
// Not installed. What FewRowGemm.cpp (the entry, compiled for any x86-64)
// shares with its kernels (FewRowGemmKernels.h), each compiled in a file of
// its own for one ISA. Plain data and declarations only: an inline function
// here would be compiled for AVX-512 in one file and could be the copy the
// linker keeps for every caller.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_FEWROWGEMM_H
#define LINFUSE_LIB_RUNTIME_FEWROWGEMM_H

#include <cstdint>

namespace linfuse::runtime {

/// The most rows (M) the kernels take: one decode step of a batch of up to
/// this many sequences. Each row adds a register accumulator per column
/// block; past 4 the brgemm kernels of oneDNN are the better choice.
constexpr int64_t kFewRowsMax = 4;

/// acc = x * op(B) in f32 for f16 B: x is M x K (f32, row i at x + i * ldx),
/// acc M x N (row i at acc + i * n), op(B)(q, j) = w[q + j * strideN]
/// (B's rows are op(B)'s columns: a Linear's N x K weight).
struct FewRowTask {
  const uint16_t *w;
  int64_t strideN;
  const float *x;
  int64_t ldx, m, k;
  float *acc;
  int64_t n;
};

/// Columns [begin, end) of `task`'s acc.
using FewRowColumnsFn = void (*)(const FewRowTask &task, int64_t begin,
                                 int64_t end);

/// Threads are given columns in multiples of this (whole cache lines of
/// C's f32 rows, and few threads' worth of columns for small N).
constexpr int64_t kFewRowColumnUnit = 64;

void fewRowColumnsAvx512(const FewRowTask &task, int64_t begin, int64_t end);
void fewRowColumnsAvx2(const FewRowTask &task, int64_t begin, int64_t end);

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_FEWROWGEMM_H
