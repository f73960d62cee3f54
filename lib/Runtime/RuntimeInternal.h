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

#include <cstdint>

namespace linfuse::runtime {

/// Formats a one-line message, records it with `status` as the process's
/// error (if no earlier error is pending) and returns `status`, so that
/// entry points can `return fail(...)`.
int32_t fail(linfuse_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/// Stats counters (atomic; see linfuse_get_stats).
void countGemmCall();
void countKernelLaunches(int64_t launches);

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_RUNTIMEINTERNAL_H
