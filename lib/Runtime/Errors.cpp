//===- Errors.cpp - The runtime's recorded error ------------------------===//
//
// One error per process: the first one since the last clear wins, because
// it is usually the cause and later ones its consequences (lowered code may
// ignore return values and keep calling).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace {
constexpr size_t kMessageSize = 512;

std::mutex errorMutex;
int32_t errorStatus = LINFUSE_OK; // guarded by errorMutex
char errorMessage[kMessageSize];  // guarded by errorMutex
} // namespace

int32_t linfuse::runtime::fail(linfuse_status status, const char *fmt, ...) {
  // Format outside the lock; the message is truncated rather than failing.
  char message[kMessageSize];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);

  std::lock_guard<std::mutex> lock(errorMutex);
  if (errorStatus == LINFUSE_OK) {
    errorStatus = status;
    std::memcpy(errorMessage, message, sizeof(message));
  }
  return status;
}

int32_t linfuse_last_error(void) {
  std::lock_guard<std::mutex> lock(errorMutex);
  return errorStatus;
}

const char *linfuse_last_error_message(void) {
  // A per-thread copy: the returned pointer stays valid and unchanged while
  // other threads record or clear errors (until this thread calls again).
  thread_local char copy[kMessageSize];
  std::lock_guard<std::mutex> lock(errorMutex);
  if (errorStatus == LINFUSE_OK)
    copy[0] = '\0';
  else
    std::memcpy(copy, errorMessage, sizeof(copy));
  return copy;
}

void linfuse_clear_error(void) {
  std::lock_guard<std::mutex> lock(errorMutex);
  errorStatus = LINFUSE_OK;
  errorMessage[0] = '\0';
}
