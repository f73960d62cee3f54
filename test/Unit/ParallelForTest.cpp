//===- ParallelForTest.cpp - linfuse_parallel_for -------------------------===//
//
// Every iteration runs exactly once, in contiguous chunks, whatever the
// thread count and the work; small loops stay on the calling thread; and
// degenerate calls do nothing (run under ASan + UBSan by scripts/test.sh).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> chunks{0};
  explicit Counts(int64_t n) : hits(n) {}
};

void body(int64_t lo, int64_t hi, void *context) {
  auto *c = static_cast<Counts *>(context);
  c->chunks.fetch_add(1);
  for (int64_t i = lo; i < hi; ++i)
    c->hits[i].fetch_add(1);
}

int64_t loops(linfuse_runtime_stats &s) {
  linfuse_get_stats(&s);
  return s.loop_calls;
}

TEST(ParallelFor, EveryIterationOnceAtAnyThreadCount) {
  for (int32_t threads : {1, 2, 3}) {
    linfuse_set_num_threads(threads);
    for (int64_t n : {1, 7, 100, 1000, 100003}) {
      for (int64_t work : {1, 64, 100000}) {
        Counts c(n);
        linfuse_parallel_for(body, &c, n, work);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(c.hits[i].load(), 1) << "threads " << threads << " n " << n
                                         << " work " << work << " index " << i;
        EXPECT_LE(c.chunks.load(), threads);
      }
    }
  }
  linfuse_set_num_threads(0);
}

TEST(ParallelFor, SmallLoopsStayOnTheCallingThread) {
  linfuse_set_num_threads(2);
  linfuse_reset_stats();
  Counts c(1000);
  linfuse_parallel_for(body, &c, 1000, 1); // 1000 elements of work
  EXPECT_EQ(c.chunks.load(), 1);
  linfuse_runtime_stats s;
  EXPECT_EQ(loops(s), 1);
  EXPECT_EQ(s.threaded_loop_calls, 0);
  linfuse_set_num_threads(0);
}

TEST(ParallelFor, LargeLoopsRunOnThePool) {
  linfuse_set_num_threads(2);
  linfuse_reset_stats();
  Counts c(100000);
  linfuse_parallel_for(body, &c, 100000, 1);
  linfuse_runtime_stats s;
  EXPECT_EQ(loops(s), 1);
  // oneDNN (and with it libgomp) is installed wherever the runtime's tests
  // run: the loop is split between two threads.
  EXPECT_EQ(s.threaded_loop_calls, 1);
  EXPECT_EQ(c.chunks.load(), 2);
  linfuse_set_num_threads(0);
}

TEST(ParallelFor, DegenerateCallsDoNothing) {
  Counts c(1);
  linfuse_parallel_for(body, &c, 0, 1000);
  linfuse_parallel_for(body, &c, -5, 1000);
  linfuse_parallel_for(nullptr, &c, 10, 1000);
  EXPECT_EQ(c.chunks.load(), 0);
  // Work that overflows int64 is simply "a lot".
  Counts big(4);
  linfuse_parallel_for(body, &big, 4, INT64_MAX);
  for (auto &h : big.hits)
    EXPECT_EQ(h.load(), 1);
}

TEST(ParallelFor, CallsFromSeveralThreadsAtOnce) {
  std::vector<std::thread> callers;
  std::vector<Counts *> counts;
  for (int t = 0; t < 4; ++t)
    counts.push_back(new Counts(50000));
  for (int t = 0; t < 4; ++t)
    callers.emplace_back(
        [&, t] { linfuse_parallel_for(body, counts[t], 50000, 1); });
  for (auto &t : callers)
    t.join();
  for (Counts *c : counts) {
    for (auto &h : c->hits)
      ASSERT_EQ(h.load(), 1);
    delete c;
  }
}

} // namespace
