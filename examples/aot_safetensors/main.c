/* Runs the LLaMA MLP block that export.py compiled ahead of time, with its
 * weights read from a safetensors file, in a process with neither MLIR nor
 * PyTorch (C, liblinfuse_runtime.so and the library only):
 *
 *   python examples/aot_safetensors/export.py out
 *   cc -std=c11 examples/aot_safetensors/main.c -Iout -Iinclude -Lout -lmlp \
 *      -Lbuild/lib -llinfuse_runtime -Wl,-rpath,$PWD/out:$PWD/build/lib \
 *      -o mlp_demo
 *   ./mlp_demo out
 *
 * It loads the model (open, bind the weights in place, pack once), runs it
 * on out/inputs.safetensors's "x", and compares the result with the JIT's
 * and eager PyTorch's in out/expected.safetensors: exit 0 when they agree.
 */

#include "libmlp.h"
#include "linfuse/Runtime/Runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what) {
  fprintf(stderr, "mlp_demo: %s: %s\n", what, linfuse_last_error_message());
  return 1;
}

/* max |a - b| over two row-major views of the same shape. */
static double maxDifference(const linfuse_memref_f32_2d *a,
                            const linfuse_memref_f32_2d *b) {
  double err = 0;
  if (a->sizes[0] != b->sizes[0] || a->sizes[1] != b->sizes[1])
    return INFINITY;
  for (int64_t i = 0; i < a->sizes[0]; ++i)
    for (int64_t j = 0; j < a->sizes[1]; ++j) {
      double x = a->aligned[a->offset + i * a->strides[0] + j * a->strides[1]];
      double y = b->aligned[b->offset + i * b->strides[0] + j * b->strides[1]];
      err = fmax(err, fabs(x - y));
    }
  return err;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR (what export.py wrote)\n", argv[0]);
    return 2;
  }
  char path[4096];
  forward_model model;
  snprintf(path, sizeof path, "%s/mlp.safetensors", argv[1]);
  if (linfuse_load_forward(&model, path) != LINFUSE_OK)
    return fail("loading the model");
  /* Gate and up (w1, w2) are adjacent in the file: their merged weight
   * (packed result 0) is a view of the mapped file, not a copy. */
  printf("mlp_demo: merged gate/up weight: %s\n",
         model.packed.r0.aligned == model.w1.aligned ? "read in place"
                                                     : "a copy");

  /* Inputs and references come from safetensors files too. */
  static const int64_t anyRows[] = {-1, 64};
  linfuse_memref_f32_2d x, jit, eager, y;
  snprintf(path, sizeof path, "%s/inputs.safetensors", argv[1]);
  linfuse_weights *inputs = linfuse_weights_open(path);
  if (!inputs || linfuse_weights_bind(inputs, "x", "F32", 2, anyRows, &x))
    return fail("reading the inputs");
  snprintf(path, sizeof path, "%s/expected.safetensors", argv[1]);
  linfuse_weights *expected = linfuse_weights_open(path);
  if (!expected ||
      linfuse_weights_bind(expected, "jit", "F32", 2, anyRows, &jit) ||
      linfuse_weights_bind(expected, "eager", "F32", 2, anyRows, &eager))
    return fail("reading the expected results");

  if (linfuse_run_forward(&model, &y, &x) != LINFUSE_OK)
    return fail("running the model");
  double vsJit = maxDifference(&y, &jit), vsEager = maxDifference(&y, &eager);
  printf("mlp_demo: %lldx%lld result; max |aot - jit| = %.3g, "
         "max |aot - eager| = %.3g\n",
         (long long)y.sizes[0], (long long)y.sizes[1], vsJit, vsEager);
  free(y.allocated);
  linfuse_weights_close(expected);
  linfuse_weights_close(inputs);
  linfuse_unload_forward(&model);
  return vsJit <= 1e-6 && vsEager <= 1e-4 ? 0 : 1;
}
