/*===- Runtime.h - liblinfuse_runtime C ABI ------------------------*- C
 *-*-===//
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
  LINFUSE_ERROR_NO_DEVICE = 4,    /* no CUDA device / driver */
  LINFUSE_ERROR_BACKEND = 5,      /* CUDA, cuBLAS(Lt) or BLAS failure */
  LINFUSE_ERROR_CHECK_FAILED = 6, /* a run-time check (or an assertion of
                                     the program) failed: the arguments do
                                     not fit the function */
} linfuse_status;

/* Element type codes. */
typedef enum linfuse_dtype {
  LINFUSE_F32 = 0,
  LINFUSE_F16 = 1,
  LINFUSE_BF16 = 2,
  LINFUSE_I8 = 3,  /* A and B of integer GEMMs (signed) */
  LINFUSE_I32 = 4, /* their C and bias (accumulated, wrapping) */
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
  /* B is a weight: the same values at the same address on every call until
   * linfuse_cpu_release_packed_weights (or
   * linfuse_cpu_release_packed_weights_in over its address). The host backend
   * then reorders it once into its GEMM library's preferred layout, or where no
   * library kernel takes its type (f16 without AVX512-FP16) widens it once to
   * f32, and keeps that copy (a second copy of the weight;
   * linfuse_cpu_set_weight_reorder says which products use one). */
  LINFUSE_GEMM_CONSTANT_B = 8,
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
  X(bf16, f32, LINFUSE_BF16, LINFUSE_F32)                                      \
  X(i8, i32, LINFUSE_I8, LINFUSE_I32)

#define LINFUSE_DECLARE_TYPED_GEMM(TARGET, AB, C)                              \
  LINFUSE_RUNTIME_EXPORT int32_t linfuse_##TARGET##_gemm_##AB##_##C(           \
      int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,     \
      void *bias, int64_t c_rank, void *c, int32_t flags, int32_t epilogue,    \
      float alpha, float beta);
#define LINFUSE_DECLARE_CPU_GEMM(AB, C, AB_CODE, C_CODE)                       \
  LINFUSE_DECLARE_TYPED_GEMM(cpu, AB, C)
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DECLARE_CPU_GEMM)
#undef LINFUSE_DECLARE_CPU_GEMM

/* The first error recorded on the calling thread since that thread's last
 * clear (LINFUSE_OK if none), and its one-line message ("" if none). Per
 * thread: the lowered code calls the runtime on its caller's thread, so
 * concurrent calls neither see nor clear each other's errors. The message
 * stays valid until the thread records or clears an error. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_last_error(void);
LINFUSE_RUNTIME_EXPORT const char *linfuse_last_error_message(void);
LINFUSE_RUNTIME_EXPORT void linfuse_clear_error(void);

/* Calling compiled functions so that a failed run-time check is an error
 * of the call, not the end of the process.
 *
 * linfuse_call runs fn(args) (the JIT's packed form of a function, or a
 * thunk that unpacks `args` for a library's _mlir_ciface_<fn>; the headers
 * of linfuse-compile define linfuse_call_<fn> that way) after clearing this
 * thread's error, and returns LINFUSE_OK or the first error the call
 * recorded. A failed cf.assert in the compiled code (the run-time checks of
 * the lowerings, or the program's own) ends the call there: the status is
 * LINFUSE_ERROR_CHECK_FAILED and the message one line, "run-time check
 * failed at <file:line:col>: <reason>". What the call allocated before the
 * failed check is leaked, and its results are not written. Calls nest; each
 * thread has its own.
 *
 * linfuse_assert_message and linfuse_assert_abort are what the drivers
 * (linfuse-run, linfuse.compile, linfuse-compile) make cf.assert's lowering
 * call instead of libc's puts and abort. Outside linfuse_call, a failed
 * check prints its message to stderr and aborts, like upstream's lowering.
 */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_call(void (*fn)(void **), void **args);
LINFUSE_RUNTIME_EXPORT void linfuse_assert_message(const char *message);
LINFUSE_RUNTIME_EXPORT void linfuse_assert_abort(void)
    __attribute__((noreturn));

/* Checks the sizes of argument `argument` of `function` (rank `rank`,
 * `sizes` from its descriptor) against `expected` (-1 where the function
 * takes any size): compiled code trusts the static sizes of its types and
 * does not read them from descriptors, so a C caller passing another shape
 * would make it read past a buffer. Returns LINFUSE_OK, or records and
 * returns LINFUSE_ERROR_INVALID_ARGUMENT ("@main: argument 0 is 5x63, but
 * @main takes ?x64"). The linfuse_call_<fn> of linfuse-compile's headers
 * call it for every argument; negative sizes are refused too. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_check_argument_sizes(
    const char *function, int32_t argument, int64_t rank, const int64_t *sizes,
    const int64_t *expected);

/* Frees the host backend's reordered (and widened) copies of
 * LINFUSE_GEMM_CONSTANT_B weights (all of them, made again on next use). Call
 * it whenever weights passed as constant change or are freed; the executables
 * of linfuse-run, the Python package and linfuse-compile's libraries do. */
LINFUSE_RUNTIME_EXPORT void linfuse_cpu_release_packed_weights(void);

/* The same for the weights that start in [data, data + bytes) only: the
 * others keep their copies. For a caller that knows which memory it packs
 * into or frees (the JIT's executables; linfuse-compile's packing functions
 * call the function above). Handed-over weights keep theirs, as above. */
LINFUSE_RUNTIME_EXPORT void
linfuse_cpu_release_packed_weights_in(const void *data, int64_t bytes);

/* Which constant weights (LINFUSE_GEMM_CONSTANT_B) the host backend reads
 * from a copy in oneDNN's own layout, made once per weight. */
typedef enum linfuse_weight_reorder {
  /* None: one copy of each weight, the caller's (slower at M > 1). */
  LINFUSE_REORDER_NEVER = 0,
  /* Products with more than one row of output (the default): a one-row
   * product (decode) reads the plain layout fastest (oneDNN 2's gemm:jit). */
  LINFUSE_REORDER_ABOVE_ONE_ROW = 1,
  /* Every product, one-row ones too, from one copy per weight: once each
   * weight has been read, its plain values are not read again, so the
   * caller may give them up (linfuse_cpu_hand_over_weights). */
  LINFUSE_REORDER_ALWAYS = 2,
} linfuse_weight_reorder;

/* Sets the mode for later GEMMs (copies already made stay) and returns the
 * previous one, or -1 (nothing changed) for a code outside the enum. The
 * default is $LINFUSE_REORDER_WEIGHTS: 0 for NEVER, "all" for ALWAYS,
 * ABOVE_ONE_ROW otherwise. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_set_weight_reorder(int32_t mode);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_get_weight_reorder(void);

/* Whether host GEMMs on weights (LINFUSE_GEMM_CONSTANT_B: f32 or bf16, of
 * 2^22 elements and 1024 columns or more, in single products with more
 * than one row of output, or any in LINFUSE_REORDER_ALWAYS) run on oneMKL
 * over weights packed for it, instead of on oneDNN. oneMKL is loaded on first
 * use ($LINFUSE_MKL_LIBRARY, else libmkl_rt.so.3, else the project venv's);
 * where it cannot be, oneDNN serves every mode. */
typedef enum linfuse_mkl_mode {
  LINFUSE_MKL_NEVER = 0,
  /* On Intel CPUs, where it was measured faster (the default). */
  LINFUSE_MKL_AUTO = 1,
  /* On any CPU. */
  LINFUSE_MKL_ALWAYS = 2,
} linfuse_mkl_mode;

/* Sets the mode for later GEMMs (weights packed already stay packed) and
 * returns the previous one, or -1 (nothing changed) for a code outside the
 * enum. The default is $LINFUSE_MKL: 0 for NEVER, 1 for ALWAYS, AUTO
 * otherwise. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_set_mkl(int32_t mode);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_get_mkl(void);
/* 1 if oneMKL can be loaded and set to run on GNU OpenMP (it is loaded
 * now if it was not), else 0. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_mkl_available(void);

/* 1 if every byte of [data, data + bytes) belongs to a weight that oneDNN
 * or oneMKL reads from a copy of its own (a GEMM has run on it), else 0. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_weights_reordered(const void *data,
                                                             int64_t bytes);

/* Hands the plain values at [data, data + bytes), memory of the caller's
 * that only GEMMs read (as constant B), over to the runtime, so that
 * memory holds one copy of the weights: a weight there whose reordered
 * layout takes exactly its bytes, in private writable memory (anonymous or
 * a MAP_PRIVATE mapping; never a shared one, whose file would change), has
 * its copy written over its plain values (no new memory); any other, once
 * its copy exists elsewhere, has its whole
 * pages returned to the system (madvise MADV_DONTNEED: private anonymous
 * memory then reads as zeros). The caller neither reads nor writes the
 * range until linfuse_cpu_forget_weights. GEMMs there read
 * only the copies (use LINFUSE_REORDER_ALWAYS, or one-row products would
 * need the plain values); one that would need dropped values fails with
 * LINFUSE_ERROR_INVALID_ARGUMENT instead of reading them. The copies
 * outlive linfuse_cpu_release_packed_weights, and the addresses must stay
 * reserved (mapped, not reused for other data) until
 * linfuse_cpu_forget_weights. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cpu_hand_over_weights(void *data,
                                                             int64_t bytes);

/* Destroys the reordered copies of weights that lie in [data, data + bytes)
 * and ends a hand-over there: the addresses may then be reused. */
LINFUSE_RUNTIME_EXPORT void linfuse_cpu_forget_weights(const void *data,
                                                       int64_t bytes);

/* Threads of the host GEMMs (oneDNN's OpenMP pool, and OpenBLAS's for
 * what oneDNN does not take), for every later call from any thread: n > 0
 * sets the count; n <= 0 restores the default, $LINFUSE_NUM_THREADS if set,
 * else OpenMP's (OMP_NUM_THREADS, or every core). Returns the count now in
 * effect. GEMMs under 64 KFLOP run on the calling thread alone, whatever
 * the count: waking the pool costs more than it saves. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_set_num_threads(int32_t n);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_get_num_threads(void);

/* Runs body(lo, hi, context) over [0, iterations) in contiguous chunks, on
 * the GEMMs' thread pool (OpenMP's, shared with oneDNN and, under PyTorch,
 * with PyTorch) with linfuse_get_num_threads() threads, or on the calling
 * thread alone when iterations * work_per_iteration is under 32768 (waking
 * the pool would cost more) or no OpenMP runtime is loaded. What
 * --linfuse-thread-parallel-loops makes of the host's element-wise loops:
 * the body must not call back into the runtime's error state. */
LINFUSE_RUNTIME_EXPORT void
linfuse_parallel_for(void (*body)(int64_t lo, int64_t hi, void *context),
                     void *context, int64_t iterations,
                     int64_t work_per_iteration);

/* Weights from a safetensors file (https://huggingface.co/docs/safetensors:
 * an 8-byte little-endian header length, a JSON header naming each tensor's
 * dtype, shape and byte range, then the raw data), for libraries made by
 * linfuse-compile: `linfuse.torch.export_library` writes the library and
 * the model's weights as such a file, and the library's header defines
 * linfuse_bind_<fn>(weights, ...) filling the weight arguments of <fn>.
 *
 * linfuse_weights_open maps the file read-only (the data are read in place,
 * not copied; a tensor whose offset is not a multiple of its element size
 * is copied once into an aligned buffer owned by the handle). It returns
 * NULL and records LINFUSE_ERROR_INVALID_ARGUMENT (a missing file, a
 * header that is not safetensors JSON, byte ranges outside the file or not
 * matching the shape) with a one-line message naming the file.
 * linfuse_weights_bind fills the ranked memref descriptor at `descriptor`
 * (rank `rank`: allocated, aligned, offset, sizes[rank], strides[rank],
 * row-major) with tensor `name`, after checking its dtype (safetensors'
 * spelling: "F32", "F16", "BF16", "F64", "I64", "I32", "I8", "BOOL") and
 * shape (`expected[i]`, or -1 for any size). The views stay valid until
 * linfuse_weights_close; compiled code never writes its arguments. */
#ifndef LINFUSE_WEIGHTS_DECLARED
#define LINFUSE_WEIGHTS_DECLARED
typedef struct linfuse_weights linfuse_weights;
#endif
LINFUSE_RUNTIME_EXPORT linfuse_weights *linfuse_weights_open(const char *path);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_weights_bind(
    linfuse_weights *weights, const char *name, const char *dtype, int64_t rank,
    const int64_t *expected, void *descriptor);
/* The number of tensors in the file, and the name of tensor i (sorted by
 * name; NULL past the end). */
LINFUSE_RUNTIME_EXPORT int64_t
linfuse_weights_count(const linfuse_weights *weights);
LINFUSE_RUNTIME_EXPORT const char *
linfuse_weights_name(const linfuse_weights *weights, int64_t i);
LINFUSE_RUNTIME_EXPORT void linfuse_weights_close(linfuse_weights *weights);

/* Counters for `linfuse-run --runtime-stats`. gemm_calls counts
 * linfuse_*_gemm calls; kernel_launches counts BLAS calls on the host (one
 * per batch element) and kernel launches on the device;
 * fallback_gemm_calls counts host GEMMs no oneDNN kernel took, computed
 * with OpenBLAS in f32 (f16/bf16 widened): alpha != 1, beta != 0, K = 0, a
 * strided bias, f16 where oneDNN 3 is not installed. */
typedef struct linfuse_runtime_stats {
  int64_t gemm_calls;
  int64_t kernel_launches;
  int64_t fallback_gemm_calls;
  /* linfuse_parallel_for calls, and those of them that ran on more than
   * one thread (the rest were too small, or threads were set to 1). */
  int64_t loop_calls;
  int64_t threaded_loop_calls;
  /* Weights reordered into a copy in oneDNN's layout or packed for oneMKL:
   * a weight's first GEMM in a layout, and again after
   * linfuse_cpu_release_packed_weights. */
  int64_t weight_reorders;
  /* Host GEMMs computed by oneMKL on a packed weight (f32 and large bf16
   * weights on Intel CPUs; among gemm_calls, not fallback_gemm_calls). */
  int64_t mkl_gemm_calls;
  /* Host f16 GEMMs of 1 to 4 rows computed by linfuse's own kernels
   * (decode steps; FewRowGemm.cpp), among gemm_calls. */
  int64_t few_row_gemm_calls;
} linfuse_runtime_stats;

LINFUSE_RUNTIME_EXPORT void linfuse_get_stats(linfuse_runtime_stats *out);
LINFUSE_RUNTIME_EXPORT void linfuse_reset_stats(void);

/*===----------------------------------------------------------------------===*
 * CUDA backend
 *
 * Defined only when liblinfuse_runtime is built with LINFUSE_ENABLE_CUDA.
 * The library never links the CUDA driver or cuBLASLt: it dlopen's
 * libcuda.so.1 and cuBLASLt (the file named by $LINFUSE_CUBLASLT_LIBRARY if
 * set, else libcublasLt.so.13 or libcublasLt.so) on the first CUDA call,
 * and needs no CUDA runtime (cudart). Where either is
 * missing, or there is no device, every CUDA entry point fails with
 * LINFUSE_ERROR_NO_DEVICE and a one-line message ("linfuse_cuda_gemm: no
 * CUDA driver (libcuda.so.1: cannot open shared object file: ...)"); the
 * host backend keeps working.
 *
 * The backend uses the primary context of one device (0, or the one named
 * by mgpuSetDefaultDevice before the first CUDA call) and one stream, the
 * runtime's stream (linfuse_cuda_stream). Everything is ordered on that
 * stream: the GEMMs, and the kernels, copies and events of lowered code
 * through the mgpu* functions that upstream MLIR's --gpu-to-llvm emits
 * (mgpuModuleLoad, mgpuLaunchKernel, mgpuMemAlloc, mgpuMemcpy, ...; the
 * runtime defines them with upstream's C signatures, see
 * lib/Runtime/CudaWrappers.cpp). mgpuStreamCreate returns the runtime's
 * stream, and a null stream argument means it too. On a thread that
 * captures a CUDA graph, every handle of the runtime's stream (null, one
 * obtained before the capture) means the capture's own stream; a handle
 * obtained during a capture means the runtime's stream everywhere else
 * and afterwards (see linfuse_cuda_graph_begin). A stream of the caller's
 * is used as it is. GEMM calls are asynchronous: synchronize
 * (linfuse_cuda_synchronize) before the host reads results.
 *===----------------------------------------------------------------------===*/

/* 1 if the CUDA backend can run here (driver, device and cuBLASLt all
 * load), else 0 with the reason recorded (see linfuse_last_error). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_available(void);

/* The runtime's stream (a CUstream), created on first use as a
 * non-blocking stream of the device's primary context; NULL, with the
 * error recorded, without a device. Never destroy it. On a thread that is
 * capturing a graph: the stream that capture records, which stands for
 * the runtime's stream wherever it is passed once the capture is over. */
LINFUSE_RUNTIME_EXPORT void *linfuse_cuda_stream(void);

/* Waits until everything enqueued on the runtime's stream has run; returns
 * LINFUSE_OK or the (recorded) error, e.g. a kernel's fault. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_synchronize(void);

/* The ordinal of the device the backend uses (initializing it), or -1 with
 * the error recorded. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_device(void);

/* Makes the runtime's stream wait for the work enqueued so far on `stream`,
 * a CUstream of the same device (a framework's current stream), without
 * blocking the host: work the runtime enqueues next reads what that work
 * wrote. A null `stream`, or any handle of the runtime's own (also one
 * from before this thread's capture, or a capture's stream), is a no-op.
 * On a thread that captures a graph, waiting for another stream
 * invalidates the capture (CUDA allows no dependency across its
 * boundary). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_wait_for_stream(void *stream);

/* Frees device memory from mgpuMemAlloc once the work enqueued so far on
 * `stream` (which may still read it) is done: the free is ordered after
 * it on the runtime's stream (see linfuse_cuda_wait_for_stream). For
 * results handed to a framework that uses them on its own stream. */
LINFUSE_RUNTIME_EXPORT void linfuse_cuda_free_after(void *ptr, void *stream);

/* linfuse_cpu_gemm on the device, with cuBLASLt, enqueued on the runtime's
 * stream (returns before the result is ready). Same arguments and
 * semantics, except:
 * - The memref descriptors live on the host but point to DEVICE memory
 *   (mgpuMemAlloc, or memory the device can address).
 * - C must be row-major: unit column stride and a row stride >= N (a
 *   column slice of a wider buffer is written in place). A and B may be
 *   row-major or column-major (a transposed view), each with any leading
 *   dimension; the bias must be contiguous. Other layouts return
 *   LINFUSE_ERROR_UNSUPPORTED.
 * - Epilogues: none, relu and gelu_tanh (cuBLASLt's RELU, GELU and their
 *   _BIAS forms; cuBLASLt's GELU is the tanh approximation). gelu_erf and
 *   silu have no cuBLASLt epilogue and return LINFUSE_ERROR_UNSUPPORTED:
 *   the compiler fuses only the supported epilogues for the cuda target.
 * - K == 0 with a non-empty C returns LINFUSE_ERROR_UNSUPPORTED.
 * - f32 inputs are multiplied in exact FP32 unless the environment sets
 *   LINFUSE_CUDA_ALLOW_TF32=1 (then TF32 tensor cores).
 * - i8 x i8 -> i32 runs on cuBLASLt's int8 kernels, which take only A
 *   stored M x K and B stored N x K, both row-major (cuBLASLt's "TN"
 *   format: pass B with LINFUSE_GEMM_TRANSPOSE_B), N, K and the leading
 *   dimensions multiples of 4, 4-byte aligned data, and no bias; anything
 *   else returns LINFUSE_ERROR_UNSUPPORTED. Alpha 1, beta 0 or 1, as on
 *   the host.
 * Arguments are validated before the device is touched, so bad arguments
 * get the same error with or without a GPU. The first call with a given
 * problem (shapes, types, transposes, leading dimensions, batch strides,
 * epilogue, pointer alignments) asks cuBLASLt's heuristic for an
 * algorithm; later calls reuse it (see linfuse_cuda_heuristic_queries).
 * Counts one gemm call and one kernel launch per call (batches included). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_gemm(
    int64_t a_rank, void *a, int64_t b_rank, void *b, int64_t bias_rank,
    void *bias, int64_t c_rank, void *c, int32_t ab_type, int32_t c_type,
    int32_t flags, int32_t epilogue, float alpha, float beta);

/* linfuse_cuda_gemm_<AB>_<C>: the typed entry points lowered code calls
 * for the cuda target (see the cpu ones). */
#define LINFUSE_DECLARE_CUDA_GEMM(AB, C, AB_CODE, C_CODE)                      \
  LINFUSE_DECLARE_TYPED_GEMM(cuda, AB, C)
LINFUSE_GEMM_TYPE_COMBINATIONS(LINFUSE_DECLARE_CUDA_GEMM)
#undef LINFUSE_DECLARE_CUDA_GEMM

/* How many times linfuse_cuda_gemm has asked cuBLASLt's heuristic for an
 * algorithm (once per distinct problem; process-wide, never reset). */
LINFUSE_RUNTIME_EXPORT int64_t linfuse_cuda_heuristic_queries(void);

/* CUDA graphs: record once, replay with one launch.
 *
 * linfuse_cuda_graph_begin(key) starts capturing the runtime's stream;
 * every GEMM, kernel launch, copy and memset enqueued on it until
 * linfuse_cuda_graph_end() is recorded, NOT executed. _end instantiates
 * the recording and stores it under `key` (replacing an earlier graph of
 * that key); it does not run it either. linfuse_cuda_graph_launch(key)
 * runs the graph on the runtime's stream, asynchronously, as often as
 * wanted. A driver that captures on the first call and replays afterwards:
 *
 *   if (!linfuse_cuda_graph_exists(key)) {
 *     linfuse_cuda_graph_begin(key);
 *     run_the_function(...);      // enqueues, computes nothing yet
 *     if (linfuse_cuda_graph_end() != LINFUSE_OK) ...  // fall back
 *   }
 *   linfuse_cuda_graph_launch(key);  // also on the first call
 *   linfuse_cuda_synchronize();
 *
 * A graph replays exactly what was captured: the same device pointers,
 * shapes and scalars (alpha, beta). So the key must identify all of them
 * (e.g. function name + buffer addresses + shapes); new input DATA in the
 * same buffers is fine (copy it in before the launch).
 *
 * Inside a capture: mgpuMemAlloc becomes the graph's allocation node (an
 * allocation has the same address at every launch, and a launch frees what
 * the previous one left allocated) and mgpuMemFree of such an allocation
 * its free node; mgpuMemFree of any other memory (allocated before the
 * capture, by another graph, host-shared) is deferred: the graph may read
 * that memory at every launch, so it stays allocated while the graph is
 * stored and is freed, on the runtime's stream, when the graph is dropped
 * (replaced under its key, after the old graph's launches, or destroyed),
 * or at _end if _end stores nothing. No host reads of results (nothing
 * has run); on the capturing thread linfuse_cuda_synchronize,
 * mgpuStreamSynchronize of the runtime's stream and mgpuEventSynchronize of
 * an event recorded in the capture return at once, while a stream of the
 * caller's and an event recorded before the capture are waited for. Waiting
 * (mgpuStreamWaitEvent) in the capture for an event recorded outside it
 * invalidates the capture (CUDA allows no dependency across the capture's
 * boundary). Host<->device copies need pinned host memory
 * (mgpuMemHostRegister). The GEMM workspace is allocated by _begin. A call that
 * cannot be captured invalidates the capture, and a call that fails while
 * recorded (a GEMM's arguments) would be missing from the graph: either way
 * _end fails and stores nothing, and the capture is over. One capture at a
 * time: _begin waits while another thread captures or runs a function graph,
 * and _end must come from the thread that began (capture mode
 * CU_STREAM_CAPTURE_MODE_THREAD_LOCAL). The capture records a stream of its own
 * that stands in for the runtime's stream on the capturing thread only: other
 * threads' calls (GEMMs, launches, copies, frees, synchronizations, graph
 * launches) run on the runtime's stream meanwhile, as usual, and are never
 * recorded. Stats: work recorded in a capture is not counted then; each launch
 * counts the graph's GEMM calls and kernel launches.
 *
 * Each returns LINFUSE_OK or an error (also recorded): _begin while a
 * capture is active, _end without one, and _launch of an unknown key are
 * LINFUSE_ERROR_INVALID_ARGUMENT. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_graph_begin(const char *key);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_graph_end(void);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_graph_launch(const char *key);
/* 1 if a graph is stored under `key`, else 0 (records nothing). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_graph_exists(const char *key);
/* Frees the graph stored under `key`, or all graphs when `key` is NULL,
 * after the runtime's stream has finished, and the memory freed inside
 * their captures that they kept. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_graph_destroy(const char *key);

/* Function graphs: what `--linfuse-cuda-graph` (linfuse-compile and
 * linfuse-run --cuda-graph, --linfuse-lower-to-cuda=cuda-graph=true) puts
 * around the body of each public function; not meant to be called by hand.
 *
 * linfuse_cuda_function_begin(slot, key, key_length) at the function's
 * entry: `slot` is the address of a private global of the compiled module
 * (one per function), `key` the function's arguments as key_length
 * integers (each memref's address, offset, sizes and strides; each
 * scalar's bits). The first call with a key CAPTURES: the body's
 * allocations, GEMMs, kernel launches, copies and frees are recorded into
 * a graph, not run. A later call with the same key REPLAYS: the body's host
 * code runs again (it computes the shapes and result descriptors), but
 * enqueues nothing, and mgpuMemAlloc hands back the addresses the capture's
 * allocations have. linfuse_cuda_function_end(slot), before the function
 * returns, launches the graph and waits for it: the caller sees what a
 * call without a graph gives, at the cost of one launch.
 *
 * Results live in the graph's memory: the same addresses at every call
 * with the same key, valid until that function's next call with the same
 * key (its launch frees and reuses them). Copy them out, and free them with
 * mgpuMemFree when done: optional before the next call with the same key,
 * whose launch frees what is left, but a result still allocated when its
 * graph is dropped (16 graphs are kept per function, the least recently
 * used dropped first; linfuse_cuda_graph_destroy(NULL) drops all) stays
 * allocated. A failed call's results must not be read or freed.
 * Calls with a graph are serialized across threads (one capture or replay
 * at a time); other threads' calls without a graph are not held up and
 * never recorded. A call inside another (or inside this thread's
 * linfuse_cuda_graph_begin) is part of the outer one. Frees in the body of
 * memory the graph did not allocate run after the graph's launch. If the
 * capture fails (the body failed while recorded, or did something a
 * capture cannot record), the graph is not kept, the call fails, and later
 * calls with that key run without a graph (until
 * linfuse_cuda_graph_destroy(NULL)); a transient failure (out of memory
 * instantiating the graph) is not held against the key. The slot
 * is zero-initialized and the first call writes a generation number into
 * it, so the graphs of a module unloaded from the same address are never
 * replayed for a new one. Host-shared (managed) allocations cannot be part
 * of a graph.
 *
 * linfuse_cuda_function_abandon() ends this thread's call after its body
 * was left without reaching _end (a failed assertion the caller trapped),
 * discarding a capture in progress. */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_function_begin(uintptr_t slot,
                                                           const int64_t *key,
                                                           int64_t key_length);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_function_end(uintptr_t slot);
LINFUSE_RUNTIME_EXPORT void linfuse_cuda_function_abandon(void);

/* Times work on the runtime's stream with CUDA events: _start records a
 * start event, _stop a stop event, waits for it and writes the
 * milliseconds between the two (per thread). */
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_timer_start(void);
LINFUSE_RUNTIME_EXPORT int32_t linfuse_cuda_timer_stop(float *milliseconds);

#ifdef __cplusplus
}
#endif

#endif /* LINFUSE_RUNTIME_RUNTIME_H */
