// Calls a CUDA library built by linfuse-compile where there is no GPU: the
// calls must fail cleanly (recorded LINFUSE_ERROR_NO_DEVICE), not crash.
#include "libqkv_cuda.h"
#include "linfuse/Runtime/Runtime.h"
#include <cstdio>
#include <vector>
int main() {
  std::vector<float> w(64 * 64), b(64), w2(32 * 64), b2(32), x(5 * 64);
  linfuse_memref_f32_2d Wq{w.data(), w.data(), 0, {64, 64}, {64, 1}},
      Wk{w2.data(), w2.data(), 0, {32, 64}, {64, 1}},
      X{x.data(), x.data(), 0, {5, 64}, {64, 1}};
  linfuse_memref_f32_1d Bq{b.data(), b.data(), 0, {64}, {1}},
      Bk{b2.data(), b2.data(), 0, {32}, {1}};
  std::printf("cuda available: %d\n", linfuse_cuda_available());
  std::printf("reason: %s\n", linfuse_last_error_message());
  linfuse_clear_error();
  main__pack_results p;
  _mlir_ciface_main__pack(&p, &Wq, &Bq, &Wk, &Bk, &Wk, &Bk);
  std::printf("after pack: status %d: %s\n", linfuse_last_error(),
              linfuse_last_error_message());
  return linfuse_last_error() == LINFUSE_ERROR_NO_DEVICE ? 0 : 1;
}
