/* Calls the library linfuse-compile built from shared-weight.mlir through
 * linfuse_call_main (errors come back as status codes) and, with "abort"
 * as argument, through _mlir_ciface_main with sizes that do not fit (the
 * process aborts with the failed check on stderr). */
#include "libshared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float ones[3 * 5];

static linfuse_memref_f32_2d matrix(int64_t rows, int64_t cols) {
  linfuse_memref_f32_2d m = {ones, ones, 0, {rows, cols}, {cols, 1}};
  return m;
}

static void call(const char *what, int64_t rows1, int64_t rows2, int64_t k) {
  linfuse_memref_f32_2d x1 = matrix(rows1, 4), x2 = matrix(rows2, 4),
                        w = matrix(k, 3);
  main_results r;
  memset(&r, 0, sizeof(r));
  int32_t status = linfuse_call_main(&r, &x1, &x2, &w);
  printf("%s: status %d", what, status);
  if (status != 0) {
    printf(": %s\n", linfuse_last_error_message());
    return;
  }
  printf(", results %lldx%lld and %lldx%lld, r0[0][0] = %g\n",
         (long long)r.r0.sizes[0], (long long)r.r0.sizes[1],
         (long long)r.r1.sizes[0], (long long)r.r1.sizes[1],
         r.r0.aligned[r.r0.offset]);
  free(r.r0.allocated);
  if (r.r1.allocated != r.r0.allocated)
    free(r.r1.allocated);
}

int main(int argc, char **argv) {
  for (int i = 0; i < 3 * 5; ++i)
    ones[i] = 1.0f;
  if (argc > 1 && strcmp(argv[1], "abort") == 0) {
    linfuse_memref_f32_2d x1 = matrix(2, 4), x2 = matrix(3, 4),
                          w = matrix(4, 3);
    main_results r;
    _mlir_ciface_main(&r, &x1, &x2, &w);
    printf("not reached\n");
    return 0;
  }
  call("fits", 2, 2, 4);
  call("rows differ", 2, 3, 4);
  call("static size differs", 2, 2, 5);
  call("negative size", -1, -1, 4);
  call("fits again", 1, 1, 4);
  return 0;
}
