//===- CudaLaunchLimits.h - Per-kernel dynamic shared memory ----*- C++ -*-===//
//
// A kernel's dynamic shared memory beyond the default limit needs
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES set first. The attribute
// is state of the function, shared by every thread, and not set atomically
// with a launch: had each launch set it to its own size, a launch with
// little shared memory on one thread could lower it under a concurrent
// launch with more on another, which would then fail. So the attribute is
// only ever raised, to the largest size any launch asked for, and this
// class is what decides when (the caller serializes it with the setting).
// Plain C++, so that the unit tests check it without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_CUDALAUNCHLIMITS_H
#define LINFUSE_LIB_RUNTIME_CUDALAUNCHLIMITS_H

#include <cstdint>
#include <iterator>
#include <map>

namespace linfuse::runtime::cuda {

/// The dynamic shared memory limit the runtime has set, per function.
class DynamicSharedMemoryLimits {
public:
  /// Notes that `function` was looked up in `module`. A function known
  /// under another module is a new one at a reused address (the old module
  /// was unloaded): its limit is the default again.
  void noteFunction(const void *function, const void *module) {
    auto it = functions_.find(function);
    if (it == functions_.end() || it->second.module != module)
      functions_[function] = {module, 0};
  }

  /// Whether a launch of `function` with `bytes` of dynamic shared memory
  /// must raise the limit first: only above what was set already (the
  /// first launch with any sets it, as the default is not known here).
  bool needsRaise(const void *function, int64_t bytes) const {
    if (bytes <= 0)
      return false;
    auto it = functions_.find(function);
    return it == functions_.end() || bytes > it->second.bytes;
  }

  /// Notes that the limit of `function` was set to `bytes` (call only when
  /// setting it succeeded).
  void raised(const void *function, int64_t bytes) {
    Entry &entry = functions_[function];
    if (bytes > entry.bytes)
      entry.bytes = bytes;
  }

  /// Forgets the functions of an unloaded module.
  void forgetModule(const void *module) {
    for (auto it = functions_.begin(); it != functions_.end();)
      it = it->second.module == module ? functions_.erase(it) : std::next(it);
  }

private:
  struct Entry {
    const void *module = nullptr;
    int64_t bytes = 0;
  };
  std::map<const void *, Entry> functions_;
};

} // namespace linfuse::runtime::cuda

#endif // LINFUSE_LIB_RUNTIME_CUDALAUNCHLIMITS_H
