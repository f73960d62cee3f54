//===- RuntimeInternal.h - Helpers shared by the runtime's files -*- C++
//-*-===//
//
// Not installed and not exported: the library is built with hidden
// visibility, so these stay private to liblinfuse_runtime.so.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define LINFUSE_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "linfuse/Runtime/Runtime.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

namespace linfuse::runtime {

/// Whether the environment variable `name` is "0": how the runtime's
/// on-by-default choices are switched off ($LINFUSE_REORDER_WEIGHTS,
/// $LINFUSE_DNNL3_BF16).
inline bool switchedOff(const char *name) {
  const char *value = std::getenv(name);
  return value && std::strcmp(value, "0") == 0;
}

/// A library the runtime loads on first use: the file $`variable` names if
/// set (and nothing else), else the first of `names` (sonames on the
/// library path, or paths; empty ones skipped) that opens. Null if none.
inline void *openLibrary(const char *variable,
                         std::initializer_list<const char *> names) {
  const char *env = std::getenv(variable);
  if (env && *env)
    return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  for (const char *name : names)
    if (*name)
      if (void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))
        return lib;
  return nullptr;
}

/// linfuse_cpu_set_weight_reorder's mode (a linfuse_weight_reorder).
int32_t weightReorder();

/// Whether the host backend may keep a second copy of a constant weight
/// (LINFUSE_GEMM_CONSTANT_B): oneDNN's reordered layouts, the fallback's
/// widened f32 copies. LINFUSE_REORDER_NEVER keeps none.
inline bool keepsWeightCopies() {
  return weightReorder() != LINFUSE_REORDER_NEVER;
}

/// Whether `data` lies in a range handed over
/// (linfuse_cpu_hand_over_weights): its copies outlive
/// linfuse_cpu_release_packed_weights.
bool handedOver(const void *data);

/// Whether any of [data, data + bytes) was dropped after its reordering
/// (a handed-over range's): only reordered copies may be read there.
bool plainValuesGone(const void *data, size_t bytes);

/// Called once `bytes` at `data` were reordered from their plain values:
/// the whole pages among them leave memory where they lie in a mapped
/// weights file (releaseMappedPages) or in a handed-over range (they are
/// then recorded as gone).
void reorderedFrom(const void *data, size_t bytes);

/// Whether every byte of [data, data + bytes) was handed over, its plain
/// values are all there, and it lies in private writable memory, so that
/// the runtime may write its reordered copy over them (OneDnnCommon.h's
/// InPlace) instead of into new memory.
bool mayOverwrite(const void *data, size_t bytes);

/// Called once [data, data + bytes), handed over, holds a reordered copy
/// written over its plain values (or, after a failure, part of one): the
/// plain values are recorded as gone and the pages stay (reorderedFrom
/// leaves them).
void overwritten(const void *data, size_t bytes);

/// The source ranges [begin, end) of the weights oneDNN 2 and 3 keep
/// reordered copies of, appended to `out` (OneDnnGemm.cpp,
/// OneDnn3Gemm.cpp), and their copies made from weights in [begin, end)
/// destroyed (linfuse_cpu_forget_weights).
using ByteRanges = std::vector<std::pair<uintptr_t, uintptr_t>>;
void oneDnnReorderedSources(ByteRanges &out);
void oneDnn3ReorderedSources(ByteRanges &out);
void forgetOneDnnCopies(uintptr_t begin, uintptr_t end,
                        bool keepHandedOver = false);
void forgetOneDnn3Copies(uintptr_t begin, uintptr_t end,
                         bool keepHandedOver = false);
/// The same for oneMKL's packed weights (MklGemm.cpp).
void mklPackedSources(ByteRanges &out);
void forgetMklCopies(uintptr_t begin, uintptr_t end,
                     bool keepHandedOver = false);

/// Called once a weight is read from a copy of its own (oneDNN's reordered
/// layout): where its `bytes` at `data` lie in a weights file mapped by
/// linfuse_weights_open, the whole pages among them leave this process's
/// memory (madvise MADV_DONTNEED). The mapping is read-only and private, so
/// a later read (a one-row GEMM, which reads the plain layout, or another
/// reorder) maps them again from the file, unchanged. Elsewhere: nothing.
void releaseMappedPages(const void *data, size_t bytes);

/// Formats a one-line message, records it with `status` as the process's
/// error (if no earlier error is pending) and returns `status`, so that
/// entry points can `return fail(...)`.
int32_t fail(linfuse_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/// How many failures this thread has had (recorded or not, because an
/// earlier error was pending): a caller compares two readings to learn
/// whether anything failed in between, whatever the error state was.
uint64_t failureCount();

/// "f32", "f16", "bf16", "i8", "i32" for a linfuse_dtype code ("?"
/// otherwise).
const char *dtypeName(int32_t dtype);

/// Bytes per element of a linfuse_dtype code (a valid one: see
/// validateGemmCodes).
int64_t dtypeBytes(int32_t dtype);

/// The checks every backend's GEMM entry point makes on its scalar
/// arguments (dtype codes, the C type rule, flags, epilogue code, and an
/// integer GEMM's alpha 1 and beta 0 or 1), with messages naming `fn`:
/// LINFUSE_OK or the recorded error.
int32_t validateGemmCodes(const char *fn, int32_t abType, int32_t cType,
                          int32_t flags, int32_t epilogue, float alpha,
                          float beta);

/// Stats counters (atomic; see linfuse_get_stats).
/// OpenBLAS's thread count (HostGemm.cpp), for linfuse_set_num_threads.
void setBlasThreads(int n);

void countGemmCall();
void countKernelLaunches(int64_t launches);
void countFallbackGemmCall();
void countLoopCall(bool threaded);
void countWeightReorder();
void countMklGemmCall();
void countFewRowGemmCall();

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_RUNTIMEINTERNAL_H
