//===- CudaLoader.h - Lazily loaded CUDA driver and cuBLASLt ----*- C++ -*-===//
//
// liblinfuse_runtime.so must load and run its host backend where no CUDA
// driver is installed, so it links none of libcuda, libcudart or
// libcublasLt. The CUDA headers give only types and enums; the functions
// come from dlopen'ed libraries, resolved once (thread-safe) into the
// tables below. The symbol names are taken from the headers' own macros
// (cuMemAlloc is cuMemAlloc_v2 in cuda.h), so each pointer has exactly the
// ABI its declaration in the headers has.
//
// The CUDA backend needs no cudart: the driver API covers modules, launches,
// streams, memory and graphs, and libcublasLt carries its own runtime.
//
// This file also owns what every CUDA entry point shares: the device and
// its retained primary context, the runtime's stream, the status-to-name
// helpers and the accounting of work enqueued while a graph is captured.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_CUDALOADER_H
#define LINFUSE_LIB_RUNTIME_CUDALOADER_H

#include "CudaCapture.h"
#include "RuntimeInternal.h"

#include <cublasLt.h>
#include <cuda.h>

namespace linfuse::runtime::cuda {

//===----------------------------------------------------------------------===//
// Function tables
//===----------------------------------------------------------------------===//

#define LINFUSE_CUDA_DRIVER_FUNCTIONS(X)                                       \
  X(cuInit)                                                                    \
  X(cuGetErrorName)                                                            \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxPushCurrent)                                                          \
  X(cuCtxPopCurrent)                                                           \
  X(cuModuleLoadData)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernelEx)                                                          \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuStreamIsCapturing)                                                       \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphDestroy)                                                            \
  X(cuGraphExecDestroy)                                                        \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemAllocManaged)                                                         \
  X(cuMemFree)                                                                 \
  X(cuMemAllocAsync)                                                           \
  X(cuMemAllocFromPoolAsync)                                                   \
  X(cuMemFreeAsync)                                                            \
  X(cuMemPoolCreate)                                                           \
  X(cuMemPoolSetAttribute)                                                     \
  X(cuMemPoolDestroy)                                                          \
  X(cuMemcpyAsync)                                                             \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD16Async)                                                          \
  X(cuMemHostRegister)                                                         \
  X(cuMemHostUnregister)

#define LINFUSE_CUBLASLT_FUNCTIONS(X)                                          \
  X(cublasLtCreate)                                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

#define LINFUSE_CUDA_DECLARE_POINTER(name) decltype(&::name) name = nullptr;

/// Members are named like the API functions (macros included), so
/// `driver().cuMemAlloc(...)` reads like the plain call.
struct DriverApi {
  LINFUSE_CUDA_DRIVER_FUNCTIONS(LINFUSE_CUDA_DECLARE_POINTER)
};
struct CublasLtApi {
  LINFUSE_CUBLASLT_FUNCTIONS(LINFUSE_CUDA_DECLARE_POINTER)
};

#undef LINFUSE_CUDA_DECLARE_POINTER

/// The loaded tables. Only valid after acquireDevice (driver) or
/// acquireCublasLt succeeded.
const DriverApi &driver();
const CublasLtApi &cublasLt();

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// "CUDA_ERROR_OUT_OF_MEMORY"; "CUresult 123" if the driver has no name.
const char *resultName(CUresult result);
/// "CUBLAS_STATUS_NOT_SUPPORTED"; "cublasStatus_t 123" for unknown codes.
const char *statusName(cublasStatus_t status);

/// Returns LINFUSE_OK for CUDA_SUCCESS; otherwise records
/// "<fn>: <call> failed: <name>" and returns the matching linfuse_status
/// (OUT_OF_MEMORY, NO_DEVICE for driver/device absence, else BACKEND).
int32_t check(CUresult result, const char *fn, const char *call);
int32_t check(cublasStatus_t status, const char *fn, const char *call);

//===----------------------------------------------------------------------===//
// Device, context and stream
//===----------------------------------------------------------------------===//

/// Loads the driver, initializes it and retains the primary context of the
/// default device, once per process. On failure (no driver, no device)
/// records "<fn>: <reason>" and returns LINFUSE_ERROR_NO_DEVICE, on this
/// and every later call.
int32_t acquireDevice(const char *fn);

/// acquireDevice, then loads cuBLASLt once; NO_DEVICE if it is missing.
int32_t acquireCublasLt(const char *fn);

/// Whether acquireCublasLt would succeed, without recording anything.
bool cublasLtUsable();

/// Sets the device ordinal acquireDevice will use (mgpuSetDefaultDevice).
/// Only before the device is acquired: later, another ordinal is an error.
int32_t selectDevice(const char *fn, int32_t ordinal);

/// Makes the retained primary context current for the object's lifetime
/// (pushed in the constructor, popped in the destructor, like upstream's
/// ScopedContext). status() is LINFUSE_OK when the context is current;
/// otherwise the error has been recorded and the caller must bail out.
class ScopedContext {
public:
  explicit ScopedContext(const char *fn);
  ~ScopedContext();
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;

  int32_t status() const { return status_; }

private:
  int32_t status_;
  bool pushed_ = false;
};

/// The stream a call that names `requested` runs on (resolveStream,
/// CudaCapture.h): null, the runtime's stream and any capture stream mean
/// the runtime's stream (non-blocking, created on first use), which on a
/// thread that captures a graph is the stream its capture records (see
/// setCaptureStream); any other stream is `requested` itself. Call with a
/// ScopedContext active. Null, with the error recorded, if the stream
/// cannot be created.
CUstream streamOr(CUstream requested, const char *fn);

/// Makes `stream` this thread's runtime stream while it captures a graph
/// (null: the runtime's own stream again). Captures record a stream of
/// their own, so that other threads' plain calls on the runtime's stream
/// run at once and are never recorded into a capture.
void setCaptureStream(CUstream stream);

/// Whether `stream` (as streamOr resolved it) is the stream this thread's
/// capture records: work on it does not run before the graph's launch, so
/// waiting for it must not happen (and would invalidate the capture).
bool capturesInto(CUstream stream);

/// Notes a stream created for captures (CudaGraphs.cpp): from then on it
/// stands for the runtime's stream wherever it is passed (streamOr), on any
/// thread and after its capture, and mgpuStreamDestroy leaves it alive.
void registerCaptureStream(CUstream stream);

/// Whether `stream` is the runtime's stream or a capture stream (neither
/// is ever destroyed by mgpuStreamDestroy).
bool isRuntimeStream(CUstream stream);

/// Runs `body(stream)`, which returns a status, with the context current;
/// `stream` is streamOr(requested).
template <typename Body>
int32_t inContext(const char *fn, CUstream requested, Body body) {
  ScopedContext context(fn);
  if (context.status())
    return context.status();
  CUstream stream = streamOr(requested, fn);
  return stream ? body(stream) : LINFUSE_ERROR_BACKEND;
}

/// The ordinal of the device acquireDevice chose (valid after it
/// succeeded).
int deviceOrdinal();

//===----------------------------------------------------------------------===//
// GEMM resources (CudaGemm.cpp)
//===----------------------------------------------------------------------===//

/// Creates the cuBLASLt handle and workspace now unless they exist: graph
/// capture must not allocate, so linfuse_cuda_graph_begin calls this first.
int32_t prepareGemm(const char *fn);

//===----------------------------------------------------------------------===//
// Graph capture and replay (CudaGraphs.cpp)
//===----------------------------------------------------------------------===//

/// Counts enqueued work into the runtime stats; while a graph is being
/// captured (nothing runs yet) into the graph's counts instead, which every
/// launch of the graph then adds.
void countDeviceWork(int64_t gemmCalls, int64_t kernelLaunches);

/// Whether mgpuMemFree(ptr) may free now on this thread (FreeAction::Now),
/// must wait for the end of this thread's capture or replay (Defer: it
/// then runs after the graph's launch) or must do nothing (Skip: the
/// replayed graph frees it). The one place that decides it
/// (CudaCapture.h).
FreeAction freeAction(void *ptr);

/// True on the thread that is capturing a graph (linfuse_cuda_graph_begin
/// .. _end, or the first call of a function compiled with cuda-graph), and
/// only there: its work is recorded into its capture stream, not run, so it
/// must not wait. Other threads' work runs as usual meanwhile.
bool capturing();

/// True on a thread that is replaying a function graph: the function's host
/// code runs again, but its device work was captured already, so the mgpu*
/// wrappers and linfuse_cuda_gemm enqueue nothing (the graph launch at the
/// function's end does it all) and mgpuMemAlloc hands back the captured
/// allocations (replayAllocation).
bool replaying();

/// While replaying: the address the capture's next allocation got, which
/// must have had `bytes` bytes (else the replay has diverged from the
/// capture: an error is recorded and null returned).
void *replayAllocation(uint64_t bytes, const char *fn);

/// While this thread captures or replays: notes that `event` was recorded
/// into the graph (on the capture stream, or during a replay, which records
/// nothing) or on a stream that runs now (CaptureState::noteEventRecord).
void noteEventRecord(CUevent event, bool intoGraph);

/// Whether `event` was last recorded into this thread's capture or replay
/// (then waiting for it must not happen); false outside them.
bool isGraphEvent(CUevent event);

/// While this thread captures: notes an allocation the graph makes (in
/// order), for freeAction and for replays of a function graph.
void noteCapturedAllocation(void *ptr, uint64_t bytes);

} // namespace linfuse::runtime::cuda

#endif // LINFUSE_LIB_RUNTIME_CUDALOADER_H
