//===- Assertions.cpp - failed run-time checks as errors of the call ------===//
//
// Lowered cf.assert prints its message and aborts the process. A compiled
// function takes arrays from users (Python, a C program calling a library),
// so a size that does not fit must end the call with an error instead. The
// drivers route cf.assert's puts and abort here: the message is kept, and
// the abort longjmps back to the innermost linfuse_call of this thread.
// Between that setjmp and the longjmp lie only frames of compiled MLIR code
// (no destructors to skip); what those allocated is leaked.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
thread_local std::jmp_buf *trap = nullptr;
thread_local std::string pendingMessage;

/// One line from upstream's assertion message. Run-time verification
/// writes "ERROR: Runtime op verification failed\n^ <reason>\nLocation:
/// loc(<where>)"; that becomes "run-time check failed at <where>:
/// <reason>", with <where> as file:line:col. Other assertions (the
/// program's own cf.assert) keep their text, newlines turned into "; ".
std::string oneLine(const std::string &message) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos)
      end = message.size();
    std::string line = message.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
      line.pop_back();
    if (!line.empty())
      lines.push_back(line);
    start = end + 1;
  }
  std::string reason, where;
  const std::string locPrefix = "Location: loc(";
  for (const std::string &line : lines) {
    if (line.rfind("^ ", 0) == 0)
      reason = line.substr(2);
    else if (line.rfind(locPrefix, 0) == 0 && line.back() == ')')
      where = line.substr(locPrefix.size(), line.size() - locPrefix.size() - 1);
  }
  if (!reason.empty() && !where.empty()) {
    // "file.mlir":5:8 -> file.mlir:5:8
    if (where.size() > 1 && where.front() == '"') {
      size_t close = where.find('"', 1);
      if (close != std::string::npos)
        where = where.substr(1, close - 1) + where.substr(close + 1);
    }
    return "run-time check failed at " + where + ": " + reason;
  }
  std::string joined;
  for (const std::string &line : lines)
    joined += (joined.empty() ? "" : "; ") + line;
  return "an assertion in the compiled code failed: " + joined;
}
} // namespace

void linfuse_assert_message(const char *message) {
  pendingMessage = message ? message : "";
}

void linfuse_assert_abort(void) {
  std::string line = oneLine(pendingMessage);
  pendingMessage.clear();
  if (trap) {
    linfuse::runtime::fail(LINFUSE_ERROR_CHECK_FAILED, "%s", line.c_str());
    std::longjmp(*trap, 1);
  }
  std::fprintf(stderr, "linfuse: %s\n", line.c_str());
  std::abort();
}

int32_t linfuse_call(void (*fn)(void **), void **args) {
  linfuse_clear_error();
  std::jmp_buf env;
  std::jmp_buf *outer = trap;
  trap = &env;
  if (setjmp(env) != 0) {
    trap = outer;
#ifdef LINFUSE_ENABLE_CUDA
    // The function's end, which would have ended a CUDA graph capture or
    // replay, was not reached.
    linfuse_cuda_function_abandon();
#endif
    return linfuse_last_error();
  }
  fn(args);
  trap = outer;
  return linfuse_last_error();
}

int32_t linfuse_check_argument_sizes(const char *function, int32_t argument,
                                     int64_t rank, const int64_t *sizes,
                                     const int64_t *expected) {
  bool fits = rank == 0 || (sizes && expected);
  for (int64_t i = 0; fits && i < rank; ++i)
    fits = sizes[i] >= 0 && (expected[i] < 0 || sizes[i] == expected[i]);
  if (fits)
    return LINFUSE_OK;
  auto shape = [&](const int64_t *dims, bool dynamicMark) {
    std::string s;
    for (int64_t i = 0; i < rank && dims; ++i) {
      if (i)
        s += "x";
      s += dynamicMark && dims[i] < 0 ? "?" : std::to_string(dims[i]);
    }
    return s.empty() ? std::string("a scalar") : s;
  };
  return linfuse::runtime::fail(
      LINFUSE_ERROR_INVALID_ARGUMENT,
      "@%s: argument %d is %s, but @%s takes %s", function ? function : "?",
      argument, shape(sizes, false).c_str(), function ? function : "?",
      shape(expected, true).c_str());
}
