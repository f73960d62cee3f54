//===- Stats.cpp - Runtime call counters ---------------------------------===//
//
// Relaxed atomics: the counters are only summed, never used to order other
// memory, and calls may come from any thread.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <atomic>

namespace {
std::atomic<int64_t> gemmCalls{0};
std::atomic<int64_t> kernelLaunches{0};
std::atomic<int64_t> fallbackGemmCalls{0};
std::atomic<int64_t> loopCalls{0};
std::atomic<int64_t> threadedLoopCalls{0};
std::atomic<int64_t> weightReorders{0};
std::atomic<int64_t> mklGemmCalls{0};
std::atomic<int64_t> fewRowGemmCalls{0};
} // namespace

void linfuse::runtime::countGemmCall() {
  gemmCalls.fetch_add(1, std::memory_order_relaxed);
}

void linfuse::runtime::countKernelLaunches(int64_t launches) {
  kernelLaunches.fetch_add(launches, std::memory_order_relaxed);
}

void linfuse::runtime::countFallbackGemmCall() {
  fallbackGemmCalls.fetch_add(1, std::memory_order_relaxed);
}

void linfuse::runtime::countLoopCall(bool threaded) {
  loopCalls.fetch_add(1, std::memory_order_relaxed);
  if (threaded)
    threadedLoopCalls.fetch_add(1, std::memory_order_relaxed);
}

void linfuse::runtime::countWeightReorder() {
  weightReorders.fetch_add(1, std::memory_order_relaxed);
}

void linfuse::runtime::countMklGemmCall() {
  mklGemmCalls.fetch_add(1, std::memory_order_relaxed);
}

void linfuse::runtime::countFewRowGemmCall() {
  fewRowGemmCalls.fetch_add(1, std::memory_order_relaxed);
}

void linfuse_get_stats(linfuse_runtime_stats *out) {
  if (!out)
    return;
  out->gemm_calls = gemmCalls.load(std::memory_order_relaxed);
  out->kernel_launches = kernelLaunches.load(std::memory_order_relaxed);
  out->fallback_gemm_calls = fallbackGemmCalls.load(std::memory_order_relaxed);
  out->loop_calls = loopCalls.load(std::memory_order_relaxed);
  out->threaded_loop_calls = threadedLoopCalls.load(std::memory_order_relaxed);
  out->weight_reorders = weightReorders.load(std::memory_order_relaxed);
  out->mkl_gemm_calls = mklGemmCalls.load(std::memory_order_relaxed);
  out->few_row_gemm_calls = fewRowGemmCalls.load(std::memory_order_relaxed);
}

void linfuse_reset_stats(void) {
  gemmCalls.store(0, std::memory_order_relaxed);
  kernelLaunches.store(0, std::memory_order_relaxed);
  fallbackGemmCalls.store(0, std::memory_order_relaxed);
  loopCalls.store(0, std::memory_order_relaxed);
  threadedLoopCalls.store(0, std::memory_order_relaxed);
  weightReorders.store(0, std::memory_order_relaxed);
  mklGemmCalls.store(0, std::memory_order_relaxed);
  fewRowGemmCalls.store(0, std::memory_order_relaxed);
}
