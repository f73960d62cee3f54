//===- MemRefCopy.cpp - memrefCopy for code lowered by MLIR ---------------===//
//
// `--finalize-memref-to-llvm` lowers a `memref.copy` between non-contiguous
// memrefs to a call to `memrefCopy`, which upstream defines in
// libmlir_c_runner_utils. Code compiled by linfuse must run where no MLIR is
// installed, so the runtime provides it (same C ABI).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <cstring>
#include <vector>

namespace {
struct UnrankedMemRef {
  int64_t rank;
  linfuse_memref_view *descriptor;
};
} // namespace

extern "C" LINFUSE_RUNTIME_EXPORT void
memrefCopy(int64_t elemSize, UnrankedMemRef *src, UnrankedMemRef *dst) {
  int64_t rank = src->rank;
  const int64_t *sizes = src->descriptor->sizes_and_strides;
  const int64_t *srcStrides = sizes + rank;
  const int64_t *dstStrides = dst->descriptor->sizes_and_strides + rank;
  char *srcBase = static_cast<char *>(src->descriptor->aligned) +
                  src->descriptor->offset * elemSize;
  char *dstBase = static_cast<char *>(dst->descriptor->aligned) +
                  dst->descriptor->offset * elemSize;
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] == 0)
      return;
  if (rank == 0) {
    std::memcpy(dstBase, srcBase, elemSize);
    return;
  }
  // Innermost dimension as one memcpy when both are contiguous there.
  int64_t inner = sizes[rank - 1];
  bool contiguous = srcStrides[rank - 1] == 1 && dstStrides[rank - 1] == 1;
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t so = 0, dOff = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      so += index[d] * srcStrides[d];
      dOff += index[d] * dstStrides[d];
    }
    if (contiguous) {
      std::memcpy(dstBase + dOff * elemSize, srcBase + so * elemSize,
                  inner * elemSize);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dstBase + (dOff + i * dstStrides[rank - 1]) * elemSize,
                    srcBase + (so + i * srcStrides[rank - 1]) * elemSize,
                    elemSize);
    }
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}
