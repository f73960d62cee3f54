//===- AssertionsTest.cpp - failed checks as errors of linfuse_call ------===//
//
// linfuse_call turns a failed cf.assert of compiled code (its puts and
// abort routed to linfuse_assert_message / linfuse_assert_abort) into an
// error of the call; linfuse_check_argument_sizes guards the static sizes
// compiled code trusts. These stand in for compiled code with plain
// functions that do what cf.assert's lowering does.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace {

/// What a failed run-time check of the lowering does.
void failedCheck(void **args) {
  *static_cast<int *>(args[0]) += 1;
  linfuse_assert_message(
      "ERROR: Runtime op verification failed\n^ dimension #0 of operand #1 "
      "is incompatible with inferred dimension size\nLocation: "
      "loc(\"model.mlir\":12:8)");
  linfuse_assert_abort();
}

void passingCall(void **args) { *static_cast<int *>(args[0]) += 1; }

TEST(Assertions, FailedCheckIsAnErrorOfTheCall) {
  int ran = 0;
  void *args[] = {&ran};
  EXPECT_EQ(LINFUSE_ERROR_CHECK_FAILED, linfuse_call(failedCheck, args));
  EXPECT_EQ(1, ran);
  EXPECT_EQ(LINFUSE_ERROR_CHECK_FAILED, linfuse_last_error());
  EXPECT_STREQ("run-time check failed at model.mlir:12:8: dimension #0 of "
               "operand #1 is incompatible with inferred dimension size",
               linfuse_last_error_message());
  // The next call starts clean.
  EXPECT_EQ(LINFUSE_OK, linfuse_call(passingCall, args));
  EXPECT_EQ(2, ran);
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
}

void programAssertion(void **) {
  linfuse_assert_message("x must be positive\nsecond line");
  linfuse_assert_abort();
}

TEST(Assertions, ProgramAssertionsKeepTheirTextOnOneLine) {
  EXPECT_EQ(LINFUSE_ERROR_CHECK_FAILED,
            linfuse_call(programAssertion, nullptr));
  EXPECT_STREQ("an assertion in the compiled code failed: x must be positive; "
               "second line",
               linfuse_last_error_message());
  linfuse_clear_error();
}

/// A call inside a call (a packing function called from a driver's call):
/// the inner failure returns to the inner linfuse_call.
void nested(void **args) {
  int32_t *inner = static_cast<int32_t *>(args[0]);
  *inner = linfuse_call(failedCheck, args + 1);
  linfuse_clear_error();
}

TEST(Assertions, CallsNest) {
  int32_t inner = 0;
  int ran = 0;
  void *args[] = {&inner, &ran};
  EXPECT_EQ(LINFUSE_OK, linfuse_call(nested, args));
  EXPECT_EQ(LINFUSE_ERROR_CHECK_FAILED, inner);
  EXPECT_EQ(1, ran);
}

TEST(Assertions, EachThreadHasItsOwnTrap) {
  const int threads = 8;
  std::vector<int32_t> status(threads, -1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &status] {
      int ran = 0;
      void *args[] = {&ran};
      status[t] = t % 2 ? linfuse_call(failedCheck, args)
                        : linfuse_call(passingCall, args);
    });
  for (std::thread &th : pool)
    th.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(t % 2 ? LINFUSE_ERROR_CHECK_FAILED : LINFUSE_OK, status[t]) << t;
}

TEST(Assertions, OutsideACallTheProcessAborts) {
  EXPECT_DEATH(
      {
        int ran = 0;
        void *args[] = {&ran};
        failedCheck(args);
      },
      "linfuse: run-time check failed at model.mlir:12:8");
}

TEST(Assertions, ArgumentSizes) {
  const int64_t expected[] = {-1, 64};
  const int64_t fits[] = {5, 64}, wrongK[] = {5, 63}, negative[] = {-2, 64};
  linfuse_clear_error();
  EXPECT_EQ(LINFUSE_OK,
            linfuse_check_argument_sizes("main", 0, 2, fits, expected));
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_check_argument_sizes("main", 0, 2, wrongK, expected));
  EXPECT_STREQ("@main: argument 0 is 5x63, but @main takes ?x64",
               linfuse_last_error_message());
  linfuse_clear_error();
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_check_argument_sizes("f", 3, 2, negative, expected));
  EXPECT_STREQ("@f: argument 3 is -2x64, but @f takes ?x64",
               linfuse_last_error_message());
  linfuse_clear_error();
  // Rank 0 has no sizes to check.
  EXPECT_EQ(LINFUSE_OK,
            linfuse_check_argument_sizes("f", 0, 0, nullptr, nullptr));
}

} // namespace
