// Calls a Q/K/V block compiled ahead of time by linfuse-compile:
//
//   build/bin/linfuse-compile examples/aot_qkv/qkv.mlir -o libqkv.so
//   c++ -std=c++17 examples/aot_qkv/main.cpp -I. -Iinclude -L. -lqkv \
//       -Lbuild/lib -llinfuse_runtime -Wl,-rpath,$PWD:$PWD/build/lib -o qkv
//   ./qkv
//
// It packs the weights once (@main__pack), runs @main on a batch of 5 rows,
// compares Q, K and V with a plain loop, and shows a call with a wrong
// shape returning an error.

#include "libqkv.h"
#include "linfuse/Runtime/Runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

namespace {
/// A row-major matrix and the descriptor MLIR code reads it through.
struct Matrix {
  std::vector<float> data;
  linfuse_memref_f32_2d view;
  Matrix(int64_t rows, int64_t cols, float seed) : data(rows * cols) {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = std::sin(seed + 0.37f * i) * 0.5f;
    view = {data.data(), data.data(), 0, {rows, cols}, {cols, 1}};
  }
};
struct Vector {
  std::vector<float> data;
  linfuse_memref_f32_1d view;
  Vector(int64_t n, float seed) : data(n) {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = std::cos(seed + 0.11f * i);
    view = {data.data(), data.data(), 0, {n}, {1}};
  }
};

/// max |result - (x · wᵀ + b)| over the result.
double maxError(const linfuse_memref_f32_2d &r, const Matrix &x,
                const Matrix &w, const Vector &b) {
  double err = 0;
  int64_t m = x.view.sizes[0], k = x.view.sizes[1], n = w.view.sizes[0];
  if (r.sizes[0] != m || r.sizes[1] != n)
    return INFINITY;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = b.data[j];
      for (int64_t p = 0; p < k; ++p)
        ref += double(x.data[i * k + p]) * w.data[j * k + p];
      double got = r.aligned[r.offset + i * r.strides[0] + j * r.strides[1]];
      err = std::fmax(err, std::fabs(got - ref));
    }
  return err;
}
} // namespace

int main() {
  Matrix x(5, 64, 0.1f), wq(64, 64, 1.f), wk(32, 64, 2.f), wv(32, 64, 3.f);
  Vector bq(64, 4.f), bk(32, 5.f), bv(32, 6.f);

  // Once, at load time: the merged (concatenated) weight and bias.
  main__pack_results packed;
  _mlir_ciface_main__pack(&packed, &wq.view, &bq.view, &wk.view, &bk.view,
                          &wv.view, &bv.view);
  // Per call: one GEMM, three slices. linfuse_call_main is
  // _mlir_ciface_main with the shapes checked and an error code instead of
  // an abort when sizes do not fit.
  main_results qkv;
  if (linfuse_call_main(&qkv, &x.view, &packed.r0, &packed.r1) != LINFUSE_OK) {
    std::fprintf(stderr, "error: %s\n", linfuse_last_error_message());
    return 1;
  }
  // A batch whose rows do not match its shape's promise is refused, not
  // read past: x's K (64) is static in the signature.
  Matrix wrong(5, 63, 0.1f);
  main_results unused;
  if (linfuse_call_main(&unused, &wrong.view, &packed.r0, &packed.r1) !=
      LINFUSE_OK)
    std::printf("refused: %s\n", linfuse_last_error_message());
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);

  double eq = maxError(qkv.r0, x, wq, bq), ek = maxError(qkv.r1, x, wk, bk),
         ev = maxError(qkv.r2, x, wv, bv);
  std::printf("q %lldx%lld, k %lldx%lld, v %lldx%lld\n",
              (long long)qkv.r0.sizes[0], (long long)qkv.r0.sizes[1],
              (long long)qkv.r1.sizes[0], (long long)qkv.r1.sizes[1],
              (long long)qkv.r2.sizes[0], (long long)qkv.r2.sizes[1]);
  std::printf("gemm_calls: %lld\n", (long long)stats.gemm_calls);
  double err = std::fmax(eq, std::fmax(ek, ev));
  std::printf("max abs error vs loop: %.3g\n", err);
  // q, k and v are views of the one merged GEMM result (maxError reads
  // them through their strides): each distinct allocation is freed once.
  std::set<void *> allocations = {qkv.r0.allocated, qkv.r1.allocated,
                                  qkv.r2.allocated, packed.r0.allocated,
                                  packed.r1.allocated};
  // A packed result with a weight's `allocated` pointer is that weight, or
  // a view of weights laid out one after the other: not the call's to free.
  for (void *w : {wq.view.allocated, wk.view.allocated, wv.view.allocated,
                  bq.view.allocated, bk.view.allocated, bv.view.allocated})
    allocations.erase(w);
  for (void *p : allocations)
    std::free(p);
  bool ok = err < 1e-4;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
