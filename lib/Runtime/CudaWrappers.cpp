//===- CudaWrappers.cpp - mgpu* functions, stream, memory and timing ------===//
//
// The `mgpu*` functions that upstream MLIR 22's `--gpu-to-llvm` and the
// gpu.binary translation emit calls to, with the C signatures of upstream's
// mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp (Debian ships no library
// that defines them), plus the runtime's stream and timer of Runtime.h
// (CUDA graphs are in CudaGraphs.cpp).
//
// Differences from upstream, all on purpose:
// - Nothing aborts or prints: a failure is recorded (linfuse_last_error) and
//   the function returns (null where it returns a handle).
// - One stream: mgpuStreamCreate returns the runtime's stream
//   (linfuse_cuda_stream) and mgpuStreamDestroy leaves it alive, and a null
//   stream argument means that stream, not CUDA's legacy default stream. So
//   lowered code's kernels, copies and linfuse_cuda_gemm calls (which take no
//   stream) are ordered on one stream and can be captured into one graph.
// - Device memory is stream-ordered (cuMemAllocFromPoolAsync and
//   cuMemFreeAsync on the runtime's stream, from a pool that keeps what is
//   freed for reuse): an allocation and a free per result and intermediate
//   on every call cost no synchronization and, once warm, no driver
//   allocation, like a caching allocator. Inside a graph capture the same
//   calls become the graph's allocation and free nodes.
// - A graph capture records a stream of its own, which stands in for the
//   runtime's stream, by any handle, on the capturing thread only: other
//   threads' calls run on the runtime's stream at once and are never
//   recorded, and the capture stream is the runtime's stream wherever it is
//   passed once the capture is over (streamOr). On the capturing thread
//   mgpuStreamSynchronize of the capture stream and mgpuEventSynchronize of
//   an event recorded into it return at once (nothing runs before the graph
//   is launched, and a synchronization would invalidate the capture), and a
//   free of memory the capture did not allocate waits for the capture's end
//   (CudaCapture.h).
// - While a function graph is replayed (CudaGraphs.cpp), launches, copies,
//   memsets, event and stream waits enqueue nothing, mgpuMemAlloc returns
//   the captured allocations, frees of those do nothing (the graph frees
//   them) and other frees run after the graph's launch.
// - mgpuSetDefaultDevice applies to the whole process and only before the
//   first CUDA call (upstream's is per thread).
// - The sparse (cuSPARSE) wrappers and mgpuTensorMapEncodeTiledMemref (emitted
//   by the nvgpu lowering, not by --gpu-to-llvm) are not provided.
//
//===----------------------------------------------------------------------===//

#include "CudaLaunchLimits.h"
#include "CudaLoader.h"

#include <climits>
#include <cstring>
#include <mutex>
#include <set>

using namespace linfuse::runtime;
using namespace linfuse::runtime::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Launch helpers
//===----------------------------------------------------------------------===//

/// Narrows MLIR's index-typed launch dimensions to CUDA's unsigned int.
bool launchDims(const char *fn, const char *what, const intptr_t (&in)[3],
                unsigned (&out)[3]) {
  for (int d = 0; d < 3; ++d) {
    if (in[d] < 1 || uintptr_t(in[d]) > UINT_MAX) {
      fail(LINFUSE_ERROR_INVALID_ARGUMENT,
           "%s: %s dimension %d is %ld, not in [1, %u]", fn, what, d,
           long(in[d]), UINT_MAX);
      return false;
    }
    out[d] = unsigned(in[d]);
  }
  return true;
}

std::mutex sharedMemoryMutex;
DynamicSharedMemoryLimits sharedMemoryLimits; // guarded by sharedMemoryMutex

/// Raises the dynamic shared memory limit of `function` to `smem` unless
/// it is that high already (never lowers it: another thread's launch may
/// need more). Call with a context current. False, with the error
/// recorded, if the driver refuses.
bool allowSharedMemory(const char *fn, CUfunction function, int32_t smem) {
  std::lock_guard<std::mutex> lock(sharedMemoryMutex);
  if (!sharedMemoryLimits.needsRaise(function, smem))
    return true;
  if (check(
          driver().cuFuncSetAttribute(
              function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
          fn, "cuFuncSetAttribute"))
    return false;
  sharedMemoryLimits.raised(function, smem);
  return true;
}

/// Both launch wrappers: cuLaunchKernelEx, with thread-block clusters of
/// `*clusterDims` blocks unless it is null.
void launch(const char *fn, CUfunction function,
            const intptr_t (*clusterDims)[3], const intptr_t (&gridDims)[3],
            const intptr_t (&blockDims)[3], int32_t smem, CUstream stream,
            void **params, void **extra) {
  if (replaying())
    return;
  unsigned cluster[3] = {1, 1, 1}, grid[3], block[3];
  if ((clusterDims && !launchDims(fn, "cluster", *clusterDims, cluster)) ||
      !launchDims(fn, "grid", gridDims, grid) ||
      !launchDims(fn, "block", blockDims, block))
    return;
  if (!function) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT,
         "%s: the kernel is null (its module or function failed to load)", fn);
    return;
  }
  if (smem < 0) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT,
         "%s: negative dynamic shared memory size %d", fn, smem);
    return;
  }
  ScopedContext context(fn);
  if (context.status())
    return;
  // A kernel's static plus dynamic shared memory beyond the default 48 KiB
  // needs an opt-in for the dynamic part (cuda.h, cuLaunchKernel), and the
  // static part is not known here: opt in whenever there is a dynamic part,
  // as upstream's wrappers do, but only ever raising the limit
  // (CudaLaunchLimits.h). The driver rejects what the device cannot give
  // (CUDA_ERROR_INVALID_VALUE). Likewise clusters of more than the portable
  // 8 blocks (H100/H200 allow 16).
  constexpr unsigned kPortableClusterSize = 8;
  if (smem > 0 && !allowSharedMemory(fn, function, smem))
    return;
  if (cluster[0] * cluster[1] * cluster[2] > kPortableClusterSize &&
      check(
          driver().cuFuncSetAttribute(
              function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
          fn, "cuFuncSetAttribute"))
    return;
  CUstream s = streamOr(stream, fn);
  if (!s)
    return;
  CUlaunchAttribute attribute = {};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = cluster[0];
  attribute.value.clusterDim.y = cluster[1];
  attribute.value.clusterDim.z = cluster[2];
  CUlaunchConfig config = {};
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = unsigned(smem);
  config.hStream = s;
  config.attrs = clusterDims ? &attribute : nullptr;
  config.numAttrs = clusterDims ? 1 : 0;
  if (check(driver().cuLaunchKernelEx(&config, function, params, extra), fn,
            "cuLaunchKernelEx") == LINFUSE_OK)
    countDeviceWork(0, 1);
}

/// aligned + offset of an MLIR memref descriptor, and its dense byte size;
/// false (error recorded) for a strided (non-dense) memref.
bool denseExtent(const char *fn, int64_t rank,
                 const linfuse_memref_view *descriptor, int64_t elementSize,
                 char *&data, uint64_t &bytes) {
  const int64_t *sizes = descriptor->sizes_and_strides;
  const int64_t *strides = sizes + rank;
  int64_t expected = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) {
      fail(LINFUSE_ERROR_UNSUPPORTED,
           "%s: only dense memrefs can be registered (dimension %ld has "
           "stride %ld, expected %ld)",
           fn, long(d), long(strides[d]), long(expected));
      return false;
    }
    expected *= sizes[d];
  }
  data = static_cast<char *>(descriptor->aligned) +
         descriptor->offset * elementSize;
  bytes = uint64_t(expected * elementSize);
  return true;
}

/// Runs the driver call `call(stream)` (see inContext); a failure is
/// recorded as "<fn>: <name> failed: <error>". True if it succeeded. While
/// a function graph is replayed this enqueues nothing: the capture did.
template <typename Call>
bool runOn(const char *fn, CUstream stream, const char *name, Call call) {
  if (replaying())
    return true;
  return inContext(fn, stream, [&](CUstream s) {
           return check(call(s), fn, name);
         }) == LINFUSE_OK;
}

/// The same for a call that takes no stream.
template <typename Call> bool run(const char *fn, const char *name, Call call) {
  ScopedContext context(fn);
  return context.status() == LINFUSE_OK &&
         check(call(), fn, name) == LINFUSE_OK;
}

/// The runtime's stream, or null (error recorded).
CUstream runtimeStream(const char *fn) {
  ScopedContext context(fn);
  return context.status() ? nullptr : streamOr(nullptr, fn);
}

CUdeviceptr devicePtr(void *ptr) { return reinterpret_cast<CUdeviceptr>(ptr); }

/// The pool device memory comes from outside graph captures. Its release
/// threshold is unlimited: freed memory stays in the pool for the next
/// call instead of going back to the driver at each synchronization.
/// Call with a context current. Null, with the error recorded, on failure.
CUmemoryPool devicePool(const char *fn) {
  static std::mutex mutex;
  static CUmemoryPool pool = nullptr; // guarded by mutex
  std::lock_guard<std::mutex> lock(mutex);
  if (pool)
    return pool;
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = deviceOrdinal();
  CUmemoryPool created = nullptr;
  if (check(driver().cuMemPoolCreate(&created, &props), fn, "cuMemPoolCreate"))
    return nullptr;
  cuuint64_t unlimited = ~cuuint64_t(0);
  if (check(driver().cuMemPoolSetAttribute(
                created, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &unlimited),
            fn, "cuMemPoolSetAttribute")) {
    driver().cuMemPoolDestroy(created);
    return nullptr;
  }
  pool = created;
  return pool;
}

/// Managed (host-shared) allocations, which cuMemFree frees: the others are
/// stream-ordered and freed with cuMemFreeAsync.
std::mutex managedMutex;
std::set<void *> managed; // guarded by managedMutex

bool isManaged(void *ptr) {
  std::lock_guard<std::mutex> lock(managedMutex);
  return managed.count(ptr) != 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Runtime.h: availability, stream, graphs
//===----------------------------------------------------------------------===//

int32_t linfuse_cuda_available(void) {
  return acquireCublasLt("linfuse_cuda_available") == LINFUSE_OK;
}

void *linfuse_cuda_stream(void) { return runtimeStream("linfuse_cuda_stream"); }

int32_t linfuse_cuda_synchronize(void) {
  constexpr const char *fn = "linfuse_cuda_synchronize";
  // Nothing to wait for (the graph's launch will run the work), and a wait
  // would invalidate a capture.
  if (capturing() || replaying())
    return LINFUSE_OK;
  return inContext(fn, nullptr, [&](CUstream stream) {
    return check(driver().cuStreamSynchronize(stream), fn,
                 "cuStreamSynchronize");
  });
}

int32_t linfuse_cuda_device(void) {
  ScopedContext context("linfuse_cuda_device");
  return context.status() == LINFUSE_OK ? deviceOrdinal() : -1;
}

int32_t linfuse_cuda_wait_for_stream(void *stream) {
  constexpr const char *fn = "linfuse_cuda_wait_for_stream";
  if (!stream)
    return LINFUSE_OK;
  return inContext(fn, nullptr, [&](CUstream runtime) -> int32_t {
    // The runtime's stream by any handle (one from before a capture, a
    // capture stream): a no-op, also on a capturing thread, where an event
    // recorded outside the capture would invalidate it.
    CUstream other = streamOr(static_cast<CUstream>(stream), fn);
    if (other == runtime)
      return LINFUSE_OK;
    // One event per thread, reused: cuStreamWaitEvent waits for the work
    // the event's latest record captured, later records do not matter.
    thread_local CUevent event = nullptr;
    if (!event)
      if (int32_t s =
              check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), fn,
                    "cuEventCreate"))
        return s;
    if (int32_t s =
            check(driver().cuEventRecord(event, other), fn, "cuEventRecord"))
      return s;
    return check(driver().cuStreamWaitEvent(runtime, event, 0), fn,
                 "cuStreamWaitEvent");
  });
}

extern "C" void mgpuMemFree(void *ptr, CUstream stream);

void linfuse_cuda_free_after(void *ptr, void *stream) {
  // If the wait fails (the stream is gone), the free is still ordered on
  // the runtime's stream, after everything the runtime did with it.
  if (linfuse_cuda_wait_for_stream(stream) != LINFUSE_OK)
    linfuse_clear_error();
  mgpuMemFree(ptr, nullptr);
}

namespace {
/// This thread's timing events (created with timing enabled, unlike
/// mgpuEventCreate's).
thread_local CUevent timerStart = nullptr, timerStop = nullptr;

int32_t timingEvent(const char *fn, CUevent &event) {
  return event ? int32_t(LINFUSE_OK)
               : check(driver().cuEventCreate(&event, CU_EVENT_DEFAULT), fn,
                       "cuEventCreate");
}
} // namespace

int32_t linfuse_cuda_timer_start(void) {
  constexpr const char *fn = "linfuse_cuda_timer_start";
  return inContext(fn, nullptr, [&](CUstream stream) {
    if (int32_t s = timingEvent(fn, timerStart))
      return s;
    return check(driver().cuEventRecord(timerStart, stream), fn,
                 "cuEventRecord");
  });
}

int32_t linfuse_cuda_timer_stop(float *milliseconds) {
  constexpr const char *fn = "linfuse_cuda_timer_stop";
  if (!milliseconds || !timerStart)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: %s", fn,
                milliseconds ? "no linfuse_cuda_timer_start before it"
                             : "milliseconds is null");
  return inContext(fn, nullptr, [&](CUstream stream) {
    if (int32_t s = timingEvent(fn, timerStop))
      return s;
    if (int32_t s = check(driver().cuEventRecord(timerStop, stream), fn,
                          "cuEventRecord"))
      return s;
    if (int32_t s = check(driver().cuEventSynchronize(timerStop), fn,
                          "cuEventSynchronize"))
      return s;
    return check(
        driver().cuEventElapsedTime(milliseconds, timerStart, timerStop), fn,
        "cuEventElapsedTime");
  });
}

//===----------------------------------------------------------------------===//
// mgpu*: modules and launches
//===----------------------------------------------------------------------===//

extern "C" LINFUSE_RUNTIME_EXPORT CUmodule
mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  CUmodule module = nullptr;
  return run("mgpuModuleLoad", "cuModuleLoadData",
             [&] { return driver().cuModuleLoadData(&module, data); })
             ? module
             : nullptr;
}

/// Loads PTX (null-terminated), JIT-compiling it at `optLevel`; the first
/// line of the JIT's error log goes into the recorded message.
extern "C" LINFUSE_RUNTIME_EXPORT CUmodule mgpuModuleLoadJIT(void *data,
                                                             int optLevel) {
  constexpr const char *fn = "mgpuModuleLoadJIT";
  ScopedContext context(fn);
  if (context.status())
    return nullptr;
  char log[1024] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log))),
                    reinterpret_cast<void *>(intptr_t(optLevel))};
  CUmodule module = nullptr;
  CUresult result =
      driver().cuModuleLoadDataEx(&module, data, 3, options, values);
  if (result != CUDA_SUCCESS) {
    log[std::strcspn(log, "\r\n")] = '\0';
    fail(LINFUSE_ERROR_BACKEND, "%s: cuModuleLoadDataEx failed: %s%s%s", fn,
         resultName(result), log[0] ? ": " : "", log);
    return nullptr;
  }
  return module;
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuModuleUnload(CUmodule module) {
  if (!module) // Its load failed, and said so.
    return;
  {
    std::lock_guard<std::mutex> lock(sharedMemoryMutex);
    sharedMemoryLimits.forgetModule(module);
  }
  run("mgpuModuleUnload", "cuModuleUnload",
      [&] { return driver().cuModuleUnload(module); });
}

extern "C" LINFUSE_RUNTIME_EXPORT CUfunction
mgpuModuleGetFunction(CUmodule module, const char *name) {
  constexpr const char *fn = "mgpuModuleGetFunction";
  if (!module) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT,
         "%s: no module to find '%s' in (its load failed)", fn,
         name ? name : "");
    return nullptr;
  }
  CUfunction function = nullptr;
  if (!run(fn, "cuModuleGetFunction", [&] {
        return driver().cuModuleGetFunction(&function, module, name);
      }))
    return nullptr;
  std::lock_guard<std::mutex> lock(sharedMemoryMutex);
  sharedMemoryLimits.noteFunction(function, module);
  return function;
}

extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                 intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                 intptr_t blockZ, int32_t smem, CUstream stream, void **params,
                 void **extra, size_t /*paramsCount*/) {
  launch("mgpuLaunchKernel", function, nullptr, {gridX, gridY, gridZ},
         {blockX, blockY, blockZ}, smem, stream, params, extra);
}

/// A launch with thread-block clusters (sm_90+). The MLIR 22 translation
/// passes no paramsCount; the parameter is kept, unused, for upstream's
/// signature.
extern "C" LINFUSE_RUNTIME_EXPORT void mgpuLaunchClusterKernel(
    CUfunction function, intptr_t clusterX, intptr_t clusterY,
    intptr_t clusterZ, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
    intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem,
    CUstream stream, void **params, void **extra, size_t /*paramsCount*/) {
  const intptr_t cluster[3] = {clusterX, clusterY, clusterZ};
  launch("mgpuLaunchClusterKernel", function, &cluster, {gridX, gridY, gridZ},
         {blockX, blockY, blockZ}, smem, stream, params, extra);
}

//===----------------------------------------------------------------------===//
// mgpu*: streams and events
//===----------------------------------------------------------------------===//

extern "C" LINFUSE_RUNTIME_EXPORT CUstream mgpuStreamCreate() {
  return runtimeStream("mgpuStreamCreate");
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuStreamDestroy(CUstream stream) {
  if (stream && !isRuntimeStream(stream))
    run("mgpuStreamDestroy", "cuStreamDestroy",
        [&] { return driver().cuStreamDestroy(stream); });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuStreamSynchronize(CUstream stream) {
  // This thread's capture stream: nothing runs before the graph's launch,
  // and a wait would invalidate the capture. Any other stream (a stream of
  // the caller's, or the runtime's while another thread captures) is
  // waited for as usual.
  runOn("mgpuStreamSynchronize", stream, "cuStreamSynchronize", [](CUstream s) {
    return capturesInto(s) ? CUDA_SUCCESS : driver().cuStreamSynchronize(s);
  });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuStreamWaitEvent(CUstream stream,
                                                           CUevent event) {
  runOn("mgpuStreamWaitEvent", stream, "cuStreamWaitEvent", [&](CUstream s) {
    return driver().cuStreamWaitEvent(s, event, /*flags=*/0);
  });
}

extern "C" LINFUSE_RUNTIME_EXPORT CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  return run("mgpuEventCreate", "cuEventCreate",
             [&] {
               return driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
             })
             ? event
             : nullptr;
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuEventDestroy(CUevent event) {
  if (event)
    run("mgpuEventDestroy", "cuEventDestroy",
        [&] { return driver().cuEventDestroy(event); });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuEventSynchronize(CUevent event) {
  // Last recorded into this thread's capture (it stands for work that has
  // not run) or replay (it was not recorded): nothing to wait for. An event
  // recorded before, or on a stream that runs now, is waited for.
  if (!isGraphEvent(event))
    run("mgpuEventSynchronize", "cuEventSynchronize",
        [&] { return driver().cuEventSynchronize(event); });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuEventRecord(CUevent event,
                                                       CUstream stream) {
  if (replaying()) {
    noteEventRecord(event, /*intoGraph=*/true);
    return;
  }
  runOn("mgpuEventRecord", stream, "cuEventRecord", [&](CUstream s) {
    CUresult result = driver().cuEventRecord(event, s);
    if (result == CUDA_SUCCESS)
      noteEventRecord(event, capturesInto(s));
    return result;
  });
}

//===----------------------------------------------------------------------===//
// mgpu*: memory
//===----------------------------------------------------------------------===//

/// Device memory, stream-ordered on the runtime's stream (usable by work
/// enqueued there after this call; synchronize before another stream uses
/// it), or managed memory visible to the host when isHostShared
/// (gpu.alloc host_shared; synchronous). Zero bytes give null without an
/// error. In a graph capture the allocation is the graph's (a fixed
/// address, allocated at each launch); in a function replay it is the one
/// the capture made.
extern "C" LINFUSE_RUNTIME_EXPORT void *
mgpuMemAlloc(uint64_t sizeBytes, CUstream /*stream*/, bool isHostShared) {
  constexpr const char *fn = "mgpuMemAlloc";
  if (sizeBytes == 0)
    return nullptr;
  if (isHostShared && (capturing() || replaying())) {
    fail(LINFUSE_ERROR_UNSUPPORTED,
         "%s: host-shared (managed) memory cannot be allocated in a CUDA "
         "graph",
         fn);
    return nullptr;
  }
  if (replaying())
    return replayAllocation(sizeBytes, fn);
  CUdeviceptr ptr = 0;
  if (isHostShared) {
    if (!run(fn, "cuMemAllocManaged", [&] {
          return driver().cuMemAllocManaged(&ptr, sizeBytes,
                                            CU_MEM_ATTACH_GLOBAL);
        }))
      return nullptr;
    std::lock_guard<std::mutex> lock(managedMutex);
    managed.insert(reinterpret_cast<void *>(ptr));
    return reinterpret_cast<void *>(ptr);
  }
  bool ok = inContext(fn, nullptr, [&](CUstream stream) {
              if (capturing()) // A graph allocation node.
                return check(driver().cuMemAllocAsync(&ptr, sizeBytes, stream),
                             fn, "cuMemAllocAsync");
              CUmemoryPool pool = devicePool(fn);
              if (!pool)
                return int32_t(LINFUSE_ERROR_BACKEND);
              return check(driver().cuMemAllocFromPoolAsync(&ptr, sizeBytes,
                                                            pool, stream),
                           fn, "cuMemAllocFromPoolAsync");
            }) == LINFUSE_OK;
  if (!ok)
    return nullptr;
  noteCapturedAllocation(reinterpret_cast<void *>(ptr), sizeBytes);
  return reinterpret_cast<void *>(ptr);
}

/// Frees what mgpuMemAlloc returned, in stream order (or at once for
/// managed memory). In a capture or replay, freeAction decides: a capture
/// frees its own allocations (graph free nodes), a replayed graph frees its
/// own itself, and any other free waits for the end of the capture or
/// replay (then it runs after the graph's launch).
extern "C" LINFUSE_RUNTIME_EXPORT void mgpuMemFree(void *ptr,
                                                   CUstream /*stream*/) {
  constexpr const char *fn = "mgpuMemFree";
  if (!ptr || freeAction(ptr) != FreeAction::Now)
    return;
  if (isManaged(ptr)) {
    if (run(fn, "cuMemFree",
            [&] { return driver().cuMemFree(devicePtr(ptr)); })) {
      std::lock_guard<std::mutex> lock(managedMutex);
      managed.erase(ptr);
    }
    return;
  }
  runOn(fn, nullptr, "cuMemFreeAsync",
        [&](CUstream s) { return driver().cuMemFreeAsync(devicePtr(ptr), s); });
}

/// Any direction (unified addressing), ordered on `stream`; the host must
/// synchronize the stream before it reads a device-to-host copy.
extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream stream) {
  if (sizeBytes != 0)
    runOn("mgpuMemcpy", stream, "cuMemcpyAsync", [&](CUstream s) {
      return driver().cuMemcpyAsync(devicePtr(dst), devicePtr(src), sizeBytes,
                                    s);
    });
}

extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuMemset32(void *dst, unsigned int value, size_t count, CUstream stream) {
  if (count != 0)
    runOn("mgpuMemset32", stream, "cuMemsetD32Async", [&](CUstream s) {
      return driver().cuMemsetD32Async(devicePtr(dst), value, count, s);
    });
}

extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuMemset16(void *dst, unsigned short value, size_t count, CUstream stream) {
  if (count != 0)
    runOn("mgpuMemset16", stream, "cuMemsetD16Async", [&](CUstream s) {
      return driver().cuMemsetD16Async(devicePtr(dst), value, count, s);
    });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuMemHostRegister(void *ptr,
                                                           uint64_t sizeBytes) {
  run("mgpuMemHostRegister", "cuMemHostRegister",
      [&] { return driver().cuMemHostRegister(ptr, sizeBytes, /*Flags=*/0); });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuMemHostUnregister(void *ptr) {
  run("mgpuMemHostUnregister", "cuMemHostUnregister",
      [&] { return driver().cuMemHostUnregister(ptr); });
}

/// Registers the (dense) data of a ranked memref descriptor, as
/// gpu.host_register lowers to.
extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuMemHostRegisterMemRef(int64_t rank, linfuse_memref_view *descriptor,
                          int64_t elementSizeBytes) {
  char *data;
  uint64_t bytes;
  if (denseExtent("mgpuMemHostRegisterMemRef", rank, descriptor,
                  elementSizeBytes, data, bytes) &&
      bytes != 0)
    mgpuMemHostRegister(data, bytes);
}

extern "C" LINFUSE_RUNTIME_EXPORT void
mgpuMemHostUnregisterMemRef(int64_t /*rank*/, linfuse_memref_view *descriptor,
                            int64_t elementSizeBytes) {
  mgpuMemHostUnregister(static_cast<char *>(descriptor->aligned) +
                        descriptor->offset * elementSizeBytes);
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  selectDevice("mgpuSetDefaultDevice", device);
}
