//===- Errors.cpp - The runtime's recorded error ------------------------===//
//
// One error per thread: the first one since the thread's last clear wins,
// because it is usually the cause and later ones its consequences (lowered
// code may ignore return values and keep calling). Per thread, because the
// lowered code calls the runtime on the thread that called it: concurrent
// calls (two Python threads, two server requests) must neither see nor
// clear each other's errors.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace {
constexpr size_t kMessageSize = 1024;

thread_local int32_t errorStatus = LINFUSE_OK;
thread_local char errorMessage[kMessageSize];
thread_local uint64_t failures = 0;
} // namespace

uint64_t linfuse::runtime::failureCount() { return failures; }

int32_t linfuse::runtime::fail(linfuse_status status, const char *fmt, ...) {
  ++failures;
  if (errorStatus != LINFUSE_OK)
    return status;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(errorMessage, sizeof(errorMessage), fmt, args);
  va_end(args);
  errorStatus = status;
  return status;
}

int32_t linfuse_last_error(void) { return errorStatus; }

const char *linfuse_last_error_message(void) {
  if (errorStatus == LINFUSE_OK)
    errorMessage[0] = '\0';
  return errorMessage;
}

void linfuse_clear_error(void) {
  errorStatus = LINFUSE_OK;
  errorMessage[0] = '\0';
}
