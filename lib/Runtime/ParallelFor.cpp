//===- ParallelFor.cpp - the host's element-wise loops on the GEMMs' pool -===//
//
// --linfuse-thread-parallel-loops outlines each outermost parallel loop of
// the host's element-wise code (norms, activations, residual adds, casts,
// the weight copies of a pack function) into a function of an iteration
// range and calls linfuse_parallel_for with it. The loops run on the same
// OpenMP pool as oneDNN's GEMMs (libgomp, which under PyTorch is PyTorch's
// own): one pool, one thread count (linfuse_set_num_threads), no
// oversubscription between GEMMs and the code around them.
//
// The runtime does not link OpenMP: its functions come from the oneDNN
// library's dependencies (OneDnnCommon.h), so without oneDNN the loops run
// on the calling thread.
//
//===----------------------------------------------------------------------===//

#include "OneDnnCommon.h"
#include "RuntimeInternal.h"

#include <algorithm>
#include <cstdint>

using namespace linfuse::runtime;

namespace {

/// Loops with less work than this (iterations times work per iteration,
/// about one element each) run on the calling thread: waking the pool
/// costs about as much as 32K simple element operations take.
constexpr int64_t kSerialWork = int64_t(1) << 15;

/// Each thread is given at least this much work.
constexpr int64_t kWorkPerThread = kSerialWork / 2;

/// Chunks start at multiples of this many iterations, so that a 1-d loop's
/// vectorized body keeps whole vectors and its cache lines to one thread.
constexpr int64_t kChunkAlign = 16;

struct Region {
  void (*body)(int64_t, int64_t, void *);
  void *context;
  int64_t iterations;
  int64_t align;
  const OpenMp *omp;
};

/// One thread's contiguous share of the iterations.
void runShare(void *data) {
  const Region &r = *static_cast<const Region *>(data);
  int64_t threads = r.omp->numThreads(), me = r.omp->threadNum();
  int64_t units = (r.iterations + r.align - 1) / r.align;
  int64_t lo = std::min(r.iterations, units * me / threads * r.align);
  int64_t hi = std::min(r.iterations, units * (me + 1) / threads * r.align);
  if (lo < hi)
    r.body(lo, hi, r.context);
}

} // namespace

void linfuse_parallel_for(void (*body)(int64_t, int64_t, void *), void *context,
                          int64_t iterations, int64_t workPerIteration) {
  if (!body || iterations <= 0)
    return;
  int64_t perIteration = std::max<int64_t>(workPerIteration, 1);
  int64_t work = iterations < INT64_MAX / perIteration
                     ? iterations * perIteration
                     : INT64_MAX;
  int64_t threads = 1;
  const OpenMp *omp = nullptr;
  if (iterations > 1 && work >= kSerialWork) {
    omp = hostOpenMp();
    if (omp && omp->parallel && omp->threadNum && omp->numThreads)
      threads = std::min<int64_t>(
          {int64_t(configuredThreads()), iterations, work / kWorkPerThread});
  }
  countLoopCall(threads > 1);
  if (threads <= 1) {
    body(0, iterations, context);
    return;
  }
  // A loop of few iterations, each a lot of work (rows of a norm), is split
  // by iteration; a long 1-d loop in aligned chunks.
  int64_t align = iterations >= threads * kChunkAlign * 4 ? kChunkAlign : 1;
  Region region{body, context, iterations, align, omp};
  omp->parallel(runShare, &region, unsigned(threads), 0);
}
