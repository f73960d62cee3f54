//===- FewRowGemmKernels.h - the few-row f16 kernels over an ISA -*- C++ -*-=//
//
// Not installed. Included once by each of FewRowGemmAvx512.cpp and
// FewRowGemmAvx2.cpp, after they define `Isa` (vector type, width, and
// the handful of intrinsics below), and compiled with that file's -m
// flags. Everything is in an unnamed namespace and uses no standard
// library, so that nothing compiled for one ISA is shared with code that
// runs on another (FewRowGemm.h).
//
// The loop reads each weight element once, each of B's rows (op(B)'s
// columns: a Linear's N x K weight) as one contiguous stream: the products
// are bound by memory bandwidth, which is the point (oneDNN 3.2's f16
// brgemm computes a row at about half that speed, Benchmarks.md).
//
//===----------------------------------------------------------------------===//

#include "FewRowGemm.h"

namespace {

using linfuse::runtime::FewRowTask;
using V = Isa::V;
constexpr int64_t W = Isa::kWidth;

/// Columns [j, j + R): R x M dot products over K, W lanes at a time, each
/// of B's rows read as one contiguous stream.
template <int M, int R>
inline void dotColumns(const FewRowTask &t, int64_t j, bool accumulate) {
  const uint16_t *w[R];
  for (int r = 0; r < R; ++r)
    w[r] = t.w + (j + r) * t.strideN;
  V acc[M][R];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r)
      acc[i][r] = Isa::zero();
  int64_t kVector = t.k - t.k % W;
  for (int64_t q = 0; q < kVector; q += W) {
    V wv[R];
    for (int r = 0; r < R; ++r)
      wv[r] = Isa::loadHalves(w[r] + q);
    for (int i = 0; i < M; ++i) {
      V xv = Isa::load(t.x + i * t.ldx + q);
      for (int r = 0; r < R; ++r)
        acc[i][r] = Isa::fma(wv[r], xv, acc[i][r]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) {
      float sum = Isa::sum(acc[i][r]);
      for (int64_t q = kVector; q < t.k; ++q)
        sum += Isa::half(w[r][q]) * t.x[i * t.ldx + q];
      float &out = t.acc[i * t.n + j + r];
      out = accumulate ? out + sum : sum;
    }
}

/// Floats of x one pass of the dot products reads: 16 KB, so that x stays
/// in L1 while the weight streams past (at M = 4 and K = 4096 all of x is
/// 64 KB, and reading it from L2 for every 4 columns made merged gate/up
/// slower than the two GEMMs apart).
constexpr int64_t kDotChunk = 4096;

template <int M> void columns(const FewRowTask &t, int64_t begin, int64_t end) {
  int64_t chunk = kDotChunk / M / W * W;
  for (int64_t q = 0; q < t.k; q += chunk) {
    FewRowTask part = t;
    part.w = t.w + q;
    part.x = t.x + q;
    part.k = t.k - q < chunk ? t.k - q : chunk;
    int64_t j = begin;
    for (; j + 4 <= end; j += 4)
      dotColumns<M, 4>(part, j, q > 0);
    for (; j < end; ++j)
      dotColumns<M, 1>(part, j, q > 0);
  }
}

/// The kernel for the task's M (1 to kFewRowsMax).
void columnsForRows(const FewRowTask &t, int64_t begin, int64_t end) {
  switch (t.m) {
  case 1:
    return columns<1>(t, begin, end);
  case 2:
    return columns<2>(t, begin, end);
  case 3:
    return columns<3>(t, begin, end);
  default:
    return columns<4>(t, begin, end);
  }
}

} // namespace
