//===- CudaLoader.cpp - Lazily loaded CUDA driver and cuBLASLt ------------===//
//
// See CudaLoader.h. Everything here is initialized at most once per process
// and remembers its failure: a machine without a driver answers every CUDA
// call with the same NO_DEVICE message, cheaply, and never crashes.
//
//===----------------------------------------------------------------------===//

#include "CudaLoader.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>

using namespace linfuse::runtime;
using namespace linfuse::runtime::cuda;

#define LINFUSE_CUDA_STRINGIFY_EXPANDED(x) #x
#define LINFUSE_CUDA_SYMBOL_NAME(x) LINFUSE_CUDA_STRINGIFY_EXPANDED(x)

namespace {

constexpr size_t kReasonSize = 320;
/// What a reason quotes (a dlerror, a failed call), shorter so that it fits.
constexpr size_t kDetailSize = 256;

DriverApi driverTable;
CublasLtApi cublasLtTable;

//===----------------------------------------------------------------------===//
// dlopen
//===----------------------------------------------------------------------===//

/// A function-table entry to fill from a library.
struct Slot {
  const char *symbol;
  void *pointer; // the table member, a function pointer
};

#define LINFUSE_DRIVER_SLOT(name)                                              \
  Slot{LINFUSE_CUDA_SYMBOL_NAME(name), &driverTable.name},
#define LINFUSE_CUBLASLT_SLOT(name)                                            \
  Slot{LINFUSE_CUDA_SYMBOL_NAME(name), &cublasLtTable.name},

/// Opens the first of `names` that dlopen accepts and fills `slots` from
/// it. False on failure, with `reason` "no <what> (<the first dlerror>)" or
/// "no usable <what> (it has no <symbol>)".
bool load(const char *what, std::initializer_list<const char *> names,
          std::initializer_list<Slot> slots, char *reason) {
  char detail[kDetailSize] = "";
  void *handle = nullptr;
  for (const char *name : names) {
    if (!name || !*name)
      continue;
    if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
    const char *error = dlerror();
    if (!detail[0])
      std::snprintf(detail, sizeof(detail), "%s", error ? error : name);
  }
  if (!handle) {
    std::snprintf(reason, kReasonSize, "no %s (%s)", what, detail);
    return false;
  }
  for (const Slot &slot : slots) {
    void *function = dlsym(handle, slot.symbol);
    if (!function) {
      std::snprintf(reason, kReasonSize, "no usable %s (it has no %s)", what,
                    slot.symbol);
      return false;
    }
    std::memcpy(slot.pointer, &function, sizeof(function));
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Device state
//===----------------------------------------------------------------------===//

/// The outcome of initDevice, read-only once made.
struct DeviceState {
  int32_t status = LINFUSE_ERROR_NO_DEVICE;
  char reason[kReasonSize] = "";
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext context = nullptr;
};

std::mutex ordinalMutex;
int32_t requestedOrdinal = 0; // guarded by ordinalMutex
bool deviceChosen = false;    // guarded by ordinalMutex

/// A driver call during initialization: on failure, `detail` names it.
bool initStep(CUresult result, const char *call, char *detail) {
  if (result == CUDA_SUCCESS)
    return true;
  std::snprintf(detail, kDetailSize, "%s failed: %s", call, resultName(result));
  return false;
}

DeviceState initDevice() {
  DeviceState s;
  if (!load("CUDA driver", {"libcuda.so.1"},
            {LINFUSE_CUDA_DRIVER_FUNCTIONS(LINFUSE_DRIVER_SLOT)}, s.reason))
    return s;
  char detail[kDetailSize];

  int32_t ordinal;
  {
    std::lock_guard<std::mutex> lock(ordinalMutex);
    ordinal = requestedOrdinal;
    deviceChosen = true;
  }
  const DriverApi &api = driverTable;
  int count = 0;
  if (!initStep(api.cuInit(0), "cuInit", detail) ||
      !initStep(api.cuDeviceGetCount(&count), "cuDeviceGetCount", detail)) {
    std::snprintf(s.reason, sizeof(s.reason), "no CUDA device (%s)", detail);
    return s;
  }
  if (count == 0) {
    std::snprintf(s.reason, sizeof(s.reason), "no CUDA device");
    return s;
  }
  if (ordinal < 0 || ordinal >= count) {
    std::snprintf(s.reason, sizeof(s.reason),
                  "no CUDA device %d (the machine has %d)", ordinal, count);
    return s;
  }
  s.ordinal = ordinal;
  if (!initStep(api.cuDeviceGet(&s.device, ordinal), "cuDeviceGet", detail) ||
      !initStep(api.cuDevicePrimaryCtxRetain(&s.context, s.device),
                "cuDevicePrimaryCtxRetain", detail)) {
    std::snprintf(s.reason, sizeof(s.reason), "CUDA device %d unusable (%s)",
                  ordinal, detail);
    return s;
  }
  // The context stays retained for the life of the process: handles that
  // lowered code keeps (modules, streams, graphs) live in it.
  s.status = LINFUSE_OK;
  return s;
}

/// Thread-safe one-time initialization (a function-local static, which
/// unlike std::call_once exports no libstdc++ template instance).
const DeviceState &deviceState() {
  static const DeviceState state = initDevice();
  return state;
}

struct CublasLtState {
  int32_t status = LINFUSE_ERROR_NO_DEVICE;
  char reason[kReasonSize] = "";
};

CublasLtState initCublasLt() {
  CublasLtState s;
  // The variable's file first; the CUDA 13 soname; a toolkit's unversioned
  // link; the toolkit's default location (not on every loader path).
  if (load("cuBLASLt",
           {std::getenv("LINFUSE_CUBLASLT_LIBRARY"), "libcublasLt.so.13",
            "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13"},
           {LINFUSE_CUBLASLT_FUNCTIONS(LINFUSE_CUBLASLT_SLOT)}, s.reason))
    s.status = LINFUSE_OK;
  return s;
}

/// Only after the device: cuBLASLt needs a driver.
const CublasLtState &cublasLtState() {
  static const CublasLtState state = initCublasLt();
  return state;
}

//===----------------------------------------------------------------------===//
// The runtime's stream
//===----------------------------------------------------------------------===//

std::mutex streamMutex;
CUstream runtimeStream = nullptr; // guarded by streamMutex
/// Every stream captures have recorded (guarded by streamMutex): they
/// stand for the runtime's stream wherever they are passed, and are never
/// destroyed.
std::set<CUstream> captureStreams;
/// This thread's capture stream while it captures a graph.
thread_local CUstream captureStream = nullptr;

linfuse_status statusFor(CUresult result) {
  switch (result) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    return LINFUSE_ERROR_OUT_OF_MEMORY;
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_NOT_INITIALIZED:
  case CUDA_ERROR_DEINITIALIZED:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_DEVICE_UNAVAILABLE:
    return LINFUSE_ERROR_NO_DEVICE;
  default:
    return LINFUSE_ERROR_BACKEND;
  }
}

} // namespace

const DriverApi &cuda::driver() { return driverTable; }
const CublasLtApi &cuda::cublasLt() { return cublasLtTable; }

const char *cuda::resultName(CUresult result) {
  const char *name = nullptr;
  if (driverTable.cuGetErrorName &&
      driverTable.cuGetErrorName(result, &name) == CUDA_SUCCESS && name)
    return name;
  thread_local char unknown[32];
  std::snprintf(unknown, sizeof(unknown), "CUresult %d", int(result));
  return unknown;
}

const char *cuda::statusName(cublasStatus_t status) {
  switch (status) {
#define LINFUSE_CUBLAS_STATUS(name)                                            \
  case name:                                                                   \
    return #name;
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_SUCCESS)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_NOT_INITIALIZED)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_ALLOC_FAILED)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_INVALID_VALUE)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_ARCH_MISMATCH)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_MAPPING_ERROR)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_EXECUTION_FAILED)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_INTERNAL_ERROR)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_NOT_SUPPORTED)
    LINFUSE_CUBLAS_STATUS(CUBLAS_STATUS_LICENSE_ERROR)
#undef LINFUSE_CUBLAS_STATUS
  }
  thread_local char unknown[32];
  std::snprintf(unknown, sizeof(unknown), "cublasStatus_t %d", int(status));
  return unknown;
}

int32_t cuda::check(CUresult result, const char *fn, const char *call) {
  if (result == CUDA_SUCCESS)
    return LINFUSE_OK;
  return fail(statusFor(result), "%s: %s failed: %s", fn, call,
              resultName(result));
}

int32_t cuda::check(cublasStatus_t status, const char *fn, const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return LINFUSE_OK;
  linfuse_status code = status == CUBLAS_STATUS_ALLOC_FAILED
                            ? LINFUSE_ERROR_OUT_OF_MEMORY
                            : LINFUSE_ERROR_BACKEND;
  return fail(code, "%s: %s failed: %s", fn, call, statusName(status));
}

int32_t cuda::acquireDevice(const char *fn) {
  const DeviceState &state = deviceState();
  if (state.status != LINFUSE_OK)
    return fail(LINFUSE_ERROR_NO_DEVICE, "%s: %s", fn, state.reason);
  return LINFUSE_OK;
}

int32_t cuda::acquireCublasLt(const char *fn) {
  if (int32_t s = acquireDevice(fn))
    return s;
  const CublasLtState &state = cublasLtState();
  if (state.status != LINFUSE_OK)
    return fail(LINFUSE_ERROR_NO_DEVICE, "%s: %s", fn, state.reason);
  return LINFUSE_OK;
}

int32_t cuda::selectDevice(const char *fn, int32_t ordinal) {
  std::lock_guard<std::mutex> lock(ordinalMutex);
  if (!deviceChosen) {
    requestedOrdinal = ordinal;
    return LINFUSE_OK;
  }
  if (ordinal == requestedOrdinal)
    return LINFUSE_OK;
  return fail(LINFUSE_ERROR_UNSUPPORTED,
              "%s: the runtime already uses CUDA device %d; select device %d "
              "before the first CUDA call",
              fn, requestedOrdinal, ordinal);
}

ScopedContext::ScopedContext(const char *fn) : status_(acquireDevice(fn)) {
  if (status_ != LINFUSE_OK)
    return;
  status_ = check(driverTable.cuCtxPushCurrent(deviceState().context), fn,
                  "cuCtxPushCurrent");
  pushed_ = status_ == LINFUSE_OK;
}

ScopedContext::~ScopedContext() {
  if (pushed_)
    driverTable.cuCtxPopCurrent(nullptr);
}

CUstream cuda::streamOr(CUstream requested, const char *fn) {
  std::lock_guard<std::mutex> lock(streamMutex);
  bool isCaptureStream = requested && captureStreams.count(requested);
  if (CUstream stream = resolveStream(requested, runtimeStream, captureStream,
                                      isCaptureStream))
    return stream;
  // Non-blocking: CUDA's legacy default stream must not serialize with
  // it (cuBLASLt and other libraries may use that one).
  CUstream stream = nullptr;
  if (check(driverTable.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), fn,
            "cuStreamCreate"))
    return nullptr;
  runtimeStream = stream;
  return runtimeStream;
}

void cuda::setCaptureStream(CUstream stream) { captureStream = stream; }

bool cuda::capturesInto(CUstream stream) {
  return stream && stream == captureStream;
}

void cuda::registerCaptureStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  captureStreams.insert(stream);
}

bool cuda::isRuntimeStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  return stream && (stream == runtimeStream || captureStreams.count(stream));
}

int cuda::deviceOrdinal() { return deviceState().ordinal; }

bool cuda::cublasLtUsable() {
  return deviceState().status == LINFUSE_OK &&
         cublasLtState().status == LINFUSE_OK;
}
