/*===- Runtime.h - liblinfuse_runtime C ABI ------------------------*- C -*-===//
 *
 * The functions that code lowered by linfuse calls (and that drivers such as
 * linfuse-run use). Plain C, no MLIR dependency: liblinfuse_runtime.so must
 * load where no MLIR is installed.
 *
 * Memrefs are passed the way MLIR's LLVM lowering passes an unranked memref
 * (`memref<*xT>`): the rank and a pointer to the ranked descriptor
 *
 *   struct { T *allocated; T *aligned; int64_t offset;
 *            int64_t sizes[rank]; int64_t strides[rank]; }
 *
 * (see linfuse_memref_view below). Strides are in elements; a column slice
 * of a wider buffer (a merged GEMM's output) has a leading dimension larger
 * than its width and is used in place.
 *
 * Errors never abort: a failing call returns a non-zero linfuse_status and
 * records it with a one-line message, kept until read or cleared (so code
 * that ignores the return value still lets its driver report the first
 * error after the call).
 *
 *===----------------------------------------------------------------------===*/

#ifndef LINFUSE_RUNTIME_RUNTIME_H
#define LINFUSE_RUNTIME_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LINFUSE_RUNTIME_EXPORT __declspec(dllexport)
#else
#define LINFUSE_RUNTIME_EXPORT __attribute__((visibility("default")))
#endif

typedef enum linfuse_status {
  LINFUSE_OK = 0,
  LINFUSE_ERROR_INVALID_ARGUMENT = 1, /* shapes, ranks, strides, dtypes */
  LINFUSE_ERROR_UNSUPPORTED = 2,      /* valid but not implemented */
  LINFUSE_ERROR_OUT_OF_MEMORY = 3,
  LINFUSE_ERROR_NO_DEVICE = 4,        /* no CUDA device / driver */
  LINFUSE_ERROR_BACKEND = 5,          /* CUDA, cuBLAS(Lt) or BLAS failure */
} linfuse_status;

/* Element type codes. */
typedef enum linfuse_dtype {
  LINFUSE_F32 = 0,
  LINFUSE_F16 = 1,
  LINFUSE_BF16 = 2,
} linfuse_dtype;

/* Same order as #linfuse.epilogue<...>. */
typedef enum linfuse_epilogue {
  LINFUSE_EPILOGUE_NONE = 0,
  LINFUSE_EPILOGUE_RELU = 1,
  LINFUSE_EPILOGUE_GELU_ERF = 2,
  LINFUSE_EPILOGUE_GELU_TANH = 3,
  LINFUSE_EPILOGUE_SILU = 4,
} linfuse_epilogue;

/* Bits of the `flags` argument. */
enum {
  LINFUSE_GEMM_TRANSPOSE_A = 1,
  LINFUSE_GEMM_TRANSPOSE_B = 2,
  LINFUSE_GEMM_HAS_BIAS = 4,
};

/* A ranked memref descriptor as MLIR lays it out (rank known at run time). */
typedef struct linfuse_memref_view {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes_and_strides[]; /* sizes[rank], then strides[rank] */
} linfuse_memref_view;

/* C = epilogue(alpha * op(A) * op(B) + beta * C + bias), on the host.
 *
 * A, B: rank 2 (M x K / K x N, transposed when the flag says so) or rank 3
 * (batch first), element type `ab_type`. C: same rank, M x N, element type
 * `c_type` (ab_type or f32). Bias: rank 1, length N, element type c_type;
 * read only when LINFUSE_GEMM_HAS_BIAS is set (pass any memref otherwise,
 * e.g. C again). With beta == 0, C's incoming values are not read (they may
 * be uninitialized, NaN included). Products accumulate in f32; f16/bf16
 * results are rounded once, after the epilogue.
 *
 * Returns LINFUSE_OK or an error (also recorded, see linfuse_last_error). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_gemm(
    int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,
    void *bias, int64_t c_rank, void *c, int32_t ab_type, int32_t c_type,
    int32_t flags, int32_t epilogue, float alpha, float beta);

/* Typed entry points, the ones lowered code calls: MLIR cannot pass
 * memref<*xf16> and memref<*xf32> to one function symbol, so
 * `linfuse.gemm` with A/B of type AB and C of type C calls
 * linfuse_cpu_gemm_<AB>_<C> (see --linfuse-convert-gemm-to-runtime), which
 * forwards to linfuse_cpu_gemm with the dtype codes. */
#define LINFUSE_GEMM_TYPE_COMBINATIONS(X)                                      \
  X(f32, f32, LINFUSE_F32, LINFUSE_F32)                                        \
  X(f16, f16, LINFUSE_F16, LINFUSE_F16)                                        \
  X(f16, f32, LINFUSE_F16, LINFUSE_F32)                                        \
  X(bf16, bf16, LINFUSE_BF16, LINFUSE_BF16)                                    \
  X(bf16, f32, LINFUSE_BF16, LINFUSE_F32)

#define LINFUSE_DECLARE_TYPED_GEMM(TARGET, AB, C)                              \
  LINFUSE_RUNTIME_EXPORT int32_t linfuse_##TARGET##_gemm_##AB##_##C(           \
      int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,     \
      void *bias, int64_t c_rank, void *c, int32_t flags, int32_t epilogue,    \
      float alpha, float beta);
#define LINFUSE_DECLARE_CPU_GEMM(AB, C, AB_CODE, C_CODE)                       \
  LINFUSE_DECLARE_TYPED_GEMM(cpu, AB, C)
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DECLARE_CPU_GEMM)
#undef LINFUSE_DECLARE_CPU_GEMM

/* The first error recorded since the last clear (LINFUSE_OK if none), and
 * its one-line message ("" if none). Per process, thread-safe. The message
 * is a per-thread copy, valid until the same thread asks again. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_last_error(void);
LINFUSE_RUNTIME_EXPORT const char *linfuse_last_error_message(void);
LINFUSE_RUNTIME_EXPORT void linfuse_clear_error(void);

/* Counters for `linfuse-run --runtime-stats`. gemm_calls counts
 * linfuse_*_gemm calls; kernel_launches counts BLAS calls on the host (one
 * per batch element) and kernel launches on the device. */
typedef struct linfuse_runtime_stats {
  int64_t gemm_calls;
  int64_t kernel_launches;
} linfuse_runtime_stats;

LINFUSE_RUNTIME_EXPORT void linfuse_get_stats(linfuse_runtime_stats *out);
LINFUSE_RUNTIME_EXPORT void linfuse_reset_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* LINFUSE_RUNTIME_RUNTIME_H */
