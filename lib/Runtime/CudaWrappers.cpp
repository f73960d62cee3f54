//===- CudaWrappers.cpp - mgpu* functions, stream and CUDA graphs ---------===//
//
// The `mgpu*` functions that upstream MLIR 22's `--gpu-to-llvm` and the
// gpu.binary translation emit calls to, with the C signatures of upstream's
// mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp (Debian ships no library
// that defines them), plus the runtime's stream and CUDA-graph controls of
// Runtime.h.
//
// Differences from upstream, all on purpose:
// - Nothing aborts or prints: a failure is recorded (linfuse_last_error) and
//   the function returns (null where it returns a handle).
// - One stream: mgpuStreamCreate returns the runtime's stream
//   (linfuse_cuda_stream) and mgpuStreamDestroy leaves it alive, and a null
//   stream argument means that stream, not CUDA's legacy default stream. So
//   lowered code's kernels, copies and linfuse_cuda_gemm calls (which take no
//   stream) are ordered on one stream and can be captured into one graph.
// - While a graph is captured, mgpuStreamSynchronize and mgpuEventSynchronize
//   return at once (nothing runs before the graph is launched, and a
//   synchronization would invalidate the capture), and mgpuMemAlloc and
//   mgpuMemFree are errors (allocate before linfuse_cuda_graph_begin).
// - mgpuSetDefaultDevice applies to the whole process and only before the
//   first CUDA call (upstream's is per thread).
// - The sparse (cuSPARSE) wrappers and mgpuTensorMapEncodeTiledMemref (emitted
//   by the nvgpu lowering, not by --gpu-to-llvm) are not provided.
//
//===----------------------------------------------------------------------===//

#include "CudaLoader.h"

#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

using namespace linfuse::runtime;
using namespace linfuse::runtime::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

/// An instantiated graph and the work it replays (for the stats).
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  int64_t gemmCalls = 0, kernelLaunches = 0;
};

std::mutex graphMutex;
std::map<std::string, Graph> graphs; // guarded by graphMutex
std::string captureKey;              // guarded by graphMutex
Graph captured;                      // guarded by graphMutex: counts so far
std::atomic<bool> captureActive{false};

void addToStats(int64_t gemmCalls, int64_t kernelLaunches) {
  for (int64_t i = 0; i < gemmCalls; ++i)
    countGemmCall();
  countKernelLaunches(kernelLaunches);
}

/// Destroys `g`'s handles (call with a context current).
void destroy(Graph &g) {
  if (g.exec)
    driver().cuGraphExecDestroy(g.exec);
  if (g.graph)
    driver().cuGraphDestroy(g.graph);
  g = Graph();
}

bool validKey(const char *fn, const char *key) {
  if (key && *key)
    return true;
  fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: the graph key is null or empty",
       fn);
  return false;
}

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

/// Both launch wrappers: cuLaunchKernelEx, with thread-block clusters of
/// `*clusterDims` blocks unless it is null.
void launch(const char *fn, CUfunction function,
            const intptr_t (*clusterDims)[3], const intptr_t (&gridDims)[3],
            const intptr_t (&blockDims)[3], int32_t smem, CUstream stream,
            void **params, void **extra) {
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
  // Beyond the default 48 KiB a kernel must opt in; the driver rejects what
  // the device cannot give (CUDA_ERROR_INVALID_VALUE). Likewise clusters of
  // more than the portable 8 blocks (H100/H200 allow 16).
  constexpr int32_t kDefaultSharedMemory = 48 * 1024;
  constexpr unsigned kPortableClusterSize = 8;
  if (smem > kDefaultSharedMemory &&
      check(
          driver().cuFuncSetAttribute(
              function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
          fn, "cuFuncSetAttribute"))
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

/// Whether work on `stream` is being captured (then nothing may wait on it).
bool isCapturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver().cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool rejectWhileCapturing(const char *fn) {
  if (!capturing())
    return false;
  fail(LINFUSE_ERROR_UNSUPPORTED,
       "%s: not allowed while a CUDA graph is captured (allocate and free "
       "outside linfuse_cuda_graph_begin/_end)",
       fn);
  return true;
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

/// Runs `body(stream)`, which returns a status, with the context current;
/// `stream` is `requested`, or the runtime's stream if that is null.
template <typename Body>
int32_t inContext(const char *fn, CUstream requested, Body body) {
  ScopedContext context(fn);
  if (context.status())
    return context.status();
  CUstream stream = streamOr(requested, fn);
  return stream ? body(stream) : LINFUSE_ERROR_BACKEND;
}

/// Runs the driver call `call(stream)` (see inContext); a failure is
/// recorded as "<fn>: <name> failed: <error>". True if it succeeded.
template <typename Call>
bool runOn(const char *fn, CUstream stream, const char *name, Call call) {
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

} // namespace

bool cuda::capturing() { return captureActive.load(std::memory_order_acquire); }

void cuda::countDeviceWork(int64_t gemmCalls, int64_t kernelLaunches) {
  if (capturing()) {
    std::lock_guard<std::mutex> lock(graphMutex);
    if (captureActive.load(std::memory_order_relaxed)) {
      captured.gemmCalls += gemmCalls;
      captured.kernelLaunches += kernelLaunches;
      return;
    }
  }
  addToStats(gemmCalls, kernelLaunches);
}

//===----------------------------------------------------------------------===//
// Runtime.h: availability, stream, graphs
//===----------------------------------------------------------------------===//

int32_t linfuse_cuda_available(void) {
  return acquireCublasLt("linfuse_cuda_available") == LINFUSE_OK;
}

void *linfuse_cuda_stream(void) { return runtimeStream("linfuse_cuda_stream"); }

int32_t linfuse_cuda_synchronize(void) {
  constexpr const char *fn = "linfuse_cuda_synchronize";
  return inContext(fn, nullptr, [&](CUstream stream) {
    return check(driver().cuStreamSynchronize(stream), fn,
                 "cuStreamSynchronize");
  });
}

int32_t linfuse_cuda_graph_begin(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_begin";
  if (!validKey(fn, key))
    return LINFUSE_ERROR_INVALID_ARGUMENT;
  return inContext(fn, nullptr, [&](CUstream stream) {
    // The GEMM workspace is allocated now: allocating inside the capture
    // would invalidate it.
    if (cublasLtUsable())
      if (int32_t s = prepareGemm(fn))
        return s;
    std::lock_guard<std::mutex> lock(graphMutex);
    if (captureActive.load(std::memory_order_relaxed))
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: cannot capture '%s' while '%s' is being captured", fn,
                  key, captureKey.c_str());
    // Thread-local mode: calls that cannot be captured (cuMemAlloc, a
    // synchronization) fail on this thread and invalidate the capture,
    // which linfuse_cuda_graph_end then reports; other threads are not
    // affected.
    if (int32_t s = check(driver().cuStreamBeginCapture(
                              stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                          fn, "cuStreamBeginCapture"))
      return s;
    captureKey = key;
    captured = Graph();
    captureActive.store(true, std::memory_order_release);
    return int32_t(LINFUSE_OK);
  });
}

int32_t linfuse_cuda_graph_end(void) {
  constexpr const char *fn = "linfuse_cuda_graph_end";
  return inContext(fn, nullptr, [&](CUstream stream) {
    std::lock_guard<std::mutex> lock(graphMutex);
    if (!captureActive.load(std::memory_order_relaxed))
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: no capture in progress (call linfuse_cuda_graph_begin)",
                  fn);
    captureActive.store(false, std::memory_order_release);
    Graph g = captured;
    // Ends the capture whatever happened during it.
    int32_t s = check(driver().cuStreamEndCapture(stream, &g.graph), fn,
                      "cuStreamEndCapture");
    if (s == LINFUSE_OK)
      s = check(
          driver().cuGraphInstantiateWithFlags(&g.exec, g.graph, /*flags=*/0),
          fn, "cuGraphInstantiateWithFlags");
    if (s != LINFUSE_OK) {
      destroy(g);
      return s;
    }
    Graph &slot = graphs[captureKey];
    destroy(slot);
    slot = g;
    return int32_t(LINFUSE_OK);
  });
}

int32_t linfuse_cuda_graph_launch(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_launch";
  if (!validKey(fn, key))
    return LINFUSE_ERROR_INVALID_ARGUMENT;
  return inContext(fn, nullptr, [&](CUstream stream) {
    // Held while launching, so that linfuse_cuda_graph_destroy cannot free
    // the graph under the launch.
    std::lock_guard<std::mutex> lock(graphMutex);
    auto it = graphs.find(key);
    if (it == graphs.end())
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: no graph was captured under '%s'", fn, key);
    if (int32_t s = check(driver().cuGraphLaunch(it->second.exec, stream), fn,
                          "cuGraphLaunch"))
      return s;
    addToStats(it->second.gemmCalls, it->second.kernelLaunches);
    return int32_t(LINFUSE_OK);
  });
}

int32_t linfuse_cuda_graph_exists(const char *key) {
  if (!key)
    return 0;
  std::lock_guard<std::mutex> lock(graphMutex);
  return graphs.count(key) != 0;
}

int32_t linfuse_cuda_graph_destroy(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_destroy";
  std::lock_guard<std::mutex> lock(graphMutex);
  if (graphs.empty())
    return LINFUSE_OK; // Also without a device: nothing was captured.
  return inContext(fn, nullptr, [&](CUstream stream) {
    // A replay still in flight keeps using the graph: wait for it.
    if (int32_t s = check(driver().cuStreamSynchronize(stream), fn,
                          "cuStreamSynchronize"))
      return s;
    for (auto it = graphs.begin(); it != graphs.end();) {
      if (key && it->first != key) {
        ++it;
        continue;
      }
      destroy(it->second);
      it = graphs.erase(it);
    }
    return int32_t(LINFUSE_OK);
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
  if (module) // Else its load failed, and said so.
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
  return run(fn, "cuModuleGetFunction",
             [&] {
               return driver().cuModuleGetFunction(&function, module, name);
             })
             ? function
             : nullptr;
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
  runOn("mgpuStreamSynchronize", stream, "cuStreamSynchronize", [](CUstream s) {
    return isCapturing(s) ? CUDA_SUCCESS : driver().cuStreamSynchronize(s);
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
  if (!capturing()) // Else the event belongs to the graph being captured.
    run("mgpuEventSynchronize", "cuEventSynchronize",
        [&] { return driver().cuEventSynchronize(event); });
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuEventRecord(CUevent event,
                                                       CUstream stream) {
  runOn("mgpuEventRecord", stream, "cuEventRecord",
        [&](CUstream s) { return driver().cuEventRecord(event, s); });
}

//===----------------------------------------------------------------------===//
// mgpu*: memory
//===----------------------------------------------------------------------===//

/// Device memory, or managed memory visible to the host when isHostShared
/// (gpu.alloc host_shared). Synchronous, like upstream: the stream is
/// unused. Zero bytes give null without an error.
extern "C" LINFUSE_RUNTIME_EXPORT void *
mgpuMemAlloc(uint64_t sizeBytes, CUstream /*stream*/, bool isHostShared) {
  constexpr const char *fn = "mgpuMemAlloc";
  if (sizeBytes == 0 || rejectWhileCapturing(fn))
    return nullptr;
  CUdeviceptr ptr = 0;
  bool ok = run(fn, isHostShared ? "cuMemAllocManaged" : "cuMemAlloc", [&] {
    return isHostShared ? driver().cuMemAllocManaged(&ptr, sizeBytes,
                                                     CU_MEM_ATTACH_GLOBAL)
                        : driver().cuMemAlloc(&ptr, sizeBytes);
  });
  return ok ? reinterpret_cast<void *>(ptr) : nullptr;
}

extern "C" LINFUSE_RUNTIME_EXPORT void mgpuMemFree(void *ptr,
                                                   CUstream /*stream*/) {
  constexpr const char *fn = "mgpuMemFree";
  if (ptr && !rejectWhileCapturing(fn))
    run(fn, "cuMemFree", [&] { return driver().cuMemFree(devicePtr(ptr)); });
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
