//===- WeightCopies.cpp - which copies of weights the host keeps ----------===//
//
// The host backend reads a constant weight (LINFUSE_GEMM_CONSTANT_B) from a
// copy in oneDNN's layout, made on its first use (OneDnnCommon.h's
// PackedWeights). Which products do is a process-wide mode; with every
// product on the copies, the caller may hand the plain values over: each
// weight's pages are dropped as soon as its copy exists, so that memory
// holds one copy of the weights even while the first call makes them, and
// the copies, the only ones then, outlive
// linfuse_cpu_release_packed_weights until linfuse_cpu_forget_weights.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

using namespace linfuse::runtime;

namespace {

int32_t modeFromEnvironment() {
  const char *value = std::getenv("LINFUSE_REORDER_WEIGHTS");
  if (value && std::strcmp(value, "0") == 0)
    return LINFUSE_REORDER_NEVER;
  if (value && std::strcmp(value, "all") == 0)
    return LINFUSE_REORDER_ALWAYS;
  return LINFUSE_REORDER_ABOVE_ONE_ROW;
}

std::atomic<int32_t> &mode() {
  static std::atomic<int32_t> m{modeFromEnvironment()};
  return m;
}

/// Handed-over ranges [begin, end), the parts of them whose plain values
/// are gone (whole pages dropped once reordered, or ranges overwritten by
/// their copy), and of those the ones overwritten, whose pages stay.
std::mutex handedMutex;
ByteRanges handed, dropped, overwrittenRanges; // guarded by handedMutex

bool overlapsAny(const ByteRanges &ranges, uintptr_t begin, uintptr_t end) {
  for (auto [b, e] : ranges)
    if (begin < e && b < end)
      return true;
  return false;
}

/// Whether the union of `ranges` covers [begin, end).
bool covers(ByteRanges ranges, uintptr_t begin, uintptr_t end) {
  std::sort(ranges.begin(), ranges.end());
  uintptr_t reached = begin;
  for (auto [b, e] : ranges) {
    if (b > reached)
      break;
    reached = std::max(reached, e);
    if (reached >= end)
      return true;
  }
  return reached >= end;
}

} // namespace

int32_t linfuse::runtime::weightReorder() {
  return mode().load(std::memory_order_relaxed);
}

bool linfuse::runtime::handedOver(const void *data) {
  auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(handedMutex);
  return overlapsAny(handed, p, p + 1);
}

bool linfuse::runtime::plainValuesGone(const void *data, size_t bytes) {
  auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(handedMutex);
  return overlapsAny(dropped, p, p + bytes);
}

void linfuse::runtime::reorderedFrom(const void *data, size_t bytes) {
  releaseMappedPages(data, bytes);
  auto p = reinterpret_cast<uintptr_t>(data);
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  // Whole pages only: the ones at either end may hold other weights.
  uintptr_t first = (p + page - 1) / page * page;
  uintptr_t last = (p + bytes) / page * page;
  std::lock_guard<std::mutex> lock(handedMutex);
  if (last <= first || !covers(handed, first, last) ||
      overlapsAny(overwrittenRanges, first, last))
    return;
  madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
  dropped.push_back({first, last});
}

/// Whether [begin, end) lies in private writable mappings (/proc/self/maps
/// permissions "rw?p"): writing there changes no file and faults on no
/// read-only page.
static bool privateAndWritable(uintptr_t begin, uintptr_t end) {
  std::FILE *maps = std::fopen("/proc/self/maps", "r");
  if (!maps)
    return false;
  uintptr_t reached = begin;
  char perms[8] = {0};
  unsigned long first = 0, last = 0;
  // Mappings are listed in address order; each line ends in a newline.
  while (reached < end &&
         std::fscanf(maps, "%lx-%lx %7s%*[^\n]", &first, &last, perms) == 3) {
    if (last <= reached)
      continue;
    if (first > reached || perms[0] != 'r' || perms[1] != 'w' ||
        perms[3] != 'p')
      break;
    reached = last;
  }
  std::fclose(maps);
  return reached >= end;
}

bool linfuse::runtime::mayOverwrite(const void *data, size_t bytes) {
  auto p = reinterpret_cast<uintptr_t>(data);
  {
    std::lock_guard<std::mutex> lock(handedMutex);
    if (bytes == 0 || !covers(handed, p, p + bytes) ||
        overlapsAny(dropped, p, p + bytes))
      return false;
  }
  return privateAndWritable(p, p + bytes);
}

void linfuse::runtime::overwritten(const void *data, size_t bytes) {
  auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(handedMutex);
  dropped.push_back({p, p + bytes});
  overwrittenRanges.push_back({p, p + bytes});
}

int32_t linfuse_cpu_set_weight_reorder(int32_t m) {
  if (m < LINFUSE_REORDER_NEVER || m > LINFUSE_REORDER_ALWAYS)
    return -1;
  return mode().exchange(m);
}

int32_t linfuse_cpu_get_weight_reorder(void) { return weightReorder(); }

int32_t linfuse_cpu_weights_reordered(const void *data, int64_t bytes) {
  if (!data || bytes <= 0)
    return 0;
  ByteRanges sources;
  oneDnnReorderedSources(sources);
  oneDnn3ReorderedSources(sources);
  mklPackedSources(sources);
  auto begin = reinterpret_cast<uintptr_t>(data);
  return covers(std::move(sources), begin, begin + uintptr_t(bytes)) ? 1 : 0;
}

int32_t linfuse_cpu_hand_over_weights(void *data, int64_t bytes) {
  if (!data || bytes <= 0)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "linfuse_cpu_hand_over_weights: no bytes at %p (%" PRId64 ")",
                data, bytes);
  auto begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(handedMutex);
  handed.push_back({begin, begin + uintptr_t(bytes)});
  return LINFUSE_OK;
}

void linfuse_cpu_forget_weights(const void *data, int64_t bytes) {
  if (!data || bytes <= 0)
    return;
  auto begin = reinterpret_cast<uintptr_t>(data);
  uintptr_t end = begin + uintptr_t(bytes);
  {
    std::lock_guard<std::mutex> lock(handedMutex);
    for (ByteRanges *ranges : {&handed, &dropped, &overwrittenRanges})
      ranges->erase(std::remove_if(ranges->begin(), ranges->end(),
                                   [&](const auto &r) {
                                     return r.first >= begin && r.second <= end;
                                   }),
                    ranges->end());
  }
  forgetOneDnnCopies(begin, end);
  forgetOneDnn3Copies(begin, end);
  forgetMklCopies(begin, end);
}
