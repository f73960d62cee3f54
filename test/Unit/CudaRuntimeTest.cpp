//===- CudaRuntimeTest.cpp - liblinfuse_runtime CUDA backend tests --------===//
//
// Links only liblinfuse_runtime and GoogleTest: no CUDA library, so the
// executable itself proves that the runtime loads without a driver.
//
// Three kinds of tests:
// - CudaWithoutGpu.*: what a machine without a driver or device sees (each
//   skips where a device is present).
// - CudaGemmArguments.*: argument errors, answered before the device is
//   touched, so they run everywhere.
// - *Device*: need a GPU and skip without one. The lit test
//   Integration/CUDA/runtime-gemm.test runs exactly these where a GPU is
//   visible and fails if any of them skips.
//
// Device results are checked against a double-precision reference computed
// here; inputs are multiples of 1/8 in [-2, 2] (exact in f16 and bf16, and
// their products sum exactly in f32).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The upstream mgpu* ABI, which the runtime defines (CUstream, CUmodule,
// CUfunction are pointers).
extern "C" {
void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream);
void *mgpuStreamCreate();
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void *mgpuEventCreate();
void mgpuEventDestroy(void *event);
void mgpuEventRecord(void *event, void *stream);
void mgpuEventSynchronize(void *event);
void *mgpuModuleLoad(void *data, size_t gpuBlobSize);
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);
void mgpuLaunchClusterKernel(void *function, intptr_t clusterX,
                             intptr_t clusterY, intptr_t clusterZ,
                             intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                             intptr_t blockX, intptr_t blockY, intptr_t blockZ,
                             int32_t smem, void *stream, void **params,
                             void **extra, size_t paramsCount);
}

namespace {

constexpr int32_t kTransA = LINFUSE_GEMM_TRANSPOSE_A;
constexpr int32_t kTransB = LINFUSE_GEMM_TRANSPOSE_B;
constexpr int32_t kBias = LINFUSE_GEMM_HAS_BIAS;

std::string lastMessage() { return linfuse_last_error_message(); }

/// The recorded error is `status`, on one line starting with `prefix`.
void expectError(int32_t status, const std::string &prefix) {
  EXPECT_EQ(linfuse_last_error(), status);
  std::string message = lastMessage();
  EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

#define REQUIRE_DEVICE()                                                       \
  do {                                                                         \
    linfuse_clear_error();                                                     \
    if (!linfuse_cuda_available())                                             \
      GTEST_SKIP() << "no usable CUDA device: " << lastMessage();              \
  } while (false)

//===----------------------------------------------------------------------===//
// Element encoding (exact values in, any value out)
//===----------------------------------------------------------------------===//

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// f16 bits of a value that f16 holds exactly as zero or a normal number.
uint16_t toHalf(double v) {
  uint32_t f = floatBits(float(v));
  uint32_t sign = (f >> 16) & 0x8000, magnitude = f & 0x7fffffff;
  if (magnitude == 0)
    return uint16_t(sign);
  EXPECT_EQ(magnitude & 0x1fff, 0u) << v << " has more bits than f16";
  return uint16_t(sign | ((magnitude - (112u << 23)) >> 13));
}

double fromHalf(uint16_t h) {
  int exponent = (h >> 10) & 31;
  double mantissa = h & 1023;
  double magnitude = exponent == 31 ? (mantissa != 0 ? NAN : INFINITY)
                     : exponent == 0
                         ? std::ldexp(mantissa, -24)
                         : std::ldexp(1024 + mantissa, exponent - 25);
  return (h >> 15) ? -magnitude : magnitude;
}

int64_t bytesOf(linfuse_dtype type) {
  return type == LINFUSE_F32 || type == LINFUSE_I32 ? 4
         : type == LINFUSE_I8                       ? 1
                                                    : 2;
}

bool isInteger(linfuse_dtype type) {
  return type == LINFUSE_I8 || type == LINFUSE_I32;
}

void encode(linfuse_dtype type, double v, uint8_t *out) {
  if (isInteger(type)) {
    EXPECT_EQ(v, std::trunc(v)) << v << " is not an integer";
    if (type == LINFUSE_I8) {
      EXPECT_TRUE(v >= -128 && v <= 127) << v << " is not an i8";
      *out = uint8_t(int8_t(v));
    } else {
      int32_t i = int32_t(v);
      std::memcpy(out, &i, 4);
    }
    return;
  }
  uint32_t f = floatBits(float(v));
  if (type == LINFUSE_F32) {
    std::memcpy(out, &f, 4);
    return;
  }
  if (type == LINFUSE_BF16) {
    EXPECT_EQ(f & 0xffff, 0u) << v << " has more bits than bf16";
  }
  uint16_t h = type == LINFUSE_F16 ? toHalf(v) : uint16_t(f >> 16);
  std::memcpy(out, &h, 2);
}

double decode(linfuse_dtype type, const uint8_t *in) {
  if (type == LINFUSE_I8)
    return double(int8_t(*in));
  if (type == LINFUSE_I32) {
    int32_t i;
    std::memcpy(&i, in, 4);
    return double(i);
  }
  if (type == LINFUSE_F32) {
    uint32_t f;
    std::memcpy(&f, in, 4);
    return bitsFloat(f);
  }
  uint16_t h;
  std::memcpy(&h, in, 2);
  return type == LINFUSE_F16 ? fromHalf(h) : bitsFloat(uint32_t(h) << 16);
}

//===----------------------------------------------------------------------===//
// Device arrays
//===----------------------------------------------------------------------===//

/// A strided view (rank 1 to 3) of a device buffer, with a host copy of
/// the whole buffer (`store`, padding included) as doubles.
struct DeviceArray {
  /// MLIR's ranked descriptor for rank <= 3 (strides follow the sizes).
  struct Descriptor {
    void *allocated, *aligned;
    int64_t offset;
    int64_t sizesAndStrides[6];
  };
  static_assert(offsetof(Descriptor, sizesAndStrides) ==
                    offsetof(linfuse_memref_view, sizes_and_strides),
                "descriptor layout");

  linfuse_dtype type;
  std::vector<int64_t> sizes, strides;
  int64_t offset;
  std::vector<double> store;
  void *device = nullptr;
  Descriptor descriptor = {};

  DeviceArray(linfuse_dtype type, std::vector<int64_t> sizes,
              std::vector<int64_t> strides = {}, int64_t offset = 0)
      : type(type), sizes(std::move(sizes)), strides(std::move(strides)),
        offset(offset) {
    int64_t rank = int64_t(this->sizes.size());
    if (this->strides.empty()) { // Contiguous.
      this->strides.assign(rank, 1);
      for (int64_t d = rank - 1; d > 0; --d)
        this->strides[d - 1] = this->strides[d] * this->sizes[d];
    }
    int64_t end = offset + 1;
    for (int64_t d = 0; d < rank; ++d)
      end += (this->sizes[d] - 1) * this->strides[d];
    store.assign(end, 0.0);
    device = mgpuMemAlloc(uint64_t(end * bytesOf(type)), nullptr, false);
    EXPECT_NE(device, nullptr) << lastMessage();
  }
  ~DeviceArray() { mgpuMemFree(device, nullptr); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  int64_t rank() const { return int64_t(sizes.size()); }
  /// Store index of element (b, i, j); lower ranks ignore leading indices.
  int64_t at(int64_t b, int64_t i, int64_t j) const {
    int64_t index[3] = {b, i, j}, k = offset;
    for (int64_t d = 0; d < rank(); ++d)
      k += index[3 - rank() + d] * strides[d];
    return k;
  }
  double get(int64_t b, int64_t i, int64_t j) const {
    return store[at(b, i, j)];
  }

  /// Fills the whole buffer with k/8 values in [-2, 2] (integer types:
  /// integers in [-128, 127], which i32 holds too) and uploads it.
  DeviceArray &random(uint32_t seed) {
    for (double &v : store) {
      seed = seed * 1103515245u + 12345u;
      v = isInteger(type) ? double(int((seed >> 16) % 256) - 128)
                          : (int((seed >> 16) % 33) - 16) / 8.0;
    }
    return upload();
  }
  DeviceArray &fill(double v) {
    store.assign(store.size(), v);
    return upload();
  }
  DeviceArray &upload() {
    std::vector<uint8_t> bytes(store.size() * bytesOf(type));
    for (size_t k = 0; k < store.size(); ++k)
      encode(type, store[k], &bytes[k * bytesOf(type)]);
    mgpuMemcpy(device, bytes.data(), bytes.size(), nullptr);
    mgpuStreamSynchronize(nullptr);
    return *this;
  }
  /// Waits for the runtime's stream and copies the buffer back.
  DeviceArray &download() {
    std::vector<uint8_t> bytes(store.size() * bytesOf(type));
    EXPECT_EQ(linfuse_cuda_synchronize(), LINFUSE_OK) << lastMessage();
    mgpuMemcpy(bytes.data(), device, bytes.size(), nullptr);
    mgpuStreamSynchronize(nullptr);
    for (size_t k = 0; k < store.size(); ++k)
      store[k] = decode(type, &bytes[k * bytesOf(type)]);
    return *this;
  }

  void *desc() {
    descriptor.allocated = descriptor.aligned = device;
    descriptor.offset = offset;
    for (int64_t d = 0; d < rank(); ++d) {
      descriptor.sizesAndStrides[d] = sizes[d];
      descriptor.sizesAndStrides[rank() + d] = strides[d];
    }
    return &descriptor;
  }
};

//===----------------------------------------------------------------------===//
// GEMM calls and the reference
//===----------------------------------------------------------------------===//

double geluTanh(double x) {
  const double kSqrt2OverPi = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

double geluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

struct Call {
  int32_t flags = 0;
  int32_t epilogue = LINFUSE_EPILOGUE_NONE;
  float alpha = 1.0f, beta = 0.0f;

  int32_t run(DeviceArray &a, DeviceArray &b, DeviceArray &c,
              DeviceArray *bias = nullptr) const {
    DeviceArray &biasArg = bias ? *bias : c;
    return linfuse_cuda_gemm(a.rank(), a.desc(), b.rank(), b.desc(),
                             biasArg.rank(), biasArg.desc(), c.rank(), c.desc(),
                             a.type, c.type, flags | (bias ? kBias : 0),
                             epilogue, alpha, beta);
  }

  /// Pre-activation values, per (batch, i, j) of C, from the host copies
  /// (C's copy must still hold its incoming values when beta != 0).
  std::vector<double> linear(const DeviceArray &a, const DeviceArray &b,
                             const DeviceArray &c,
                             const DeviceArray *bias) const {
    int64_t r = c.rank(), batches = r == 3 ? c.sizes[0] : 1;
    int64_t m = c.sizes[r - 2], n = c.sizes[r - 1];
    int64_t k = (flags & kTransA) ? a.sizes[r - 2] : a.sizes[r - 1];
    std::vector<double> out;
    for (int64_t q = 0; q < batches; ++q)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < k; ++l)
            sum += ((flags & kTransA) ? a.get(q, l, i) : a.get(q, i, l)) *
                   ((flags & kTransB) ? b.get(q, j, l) : b.get(q, l, j));
          double x = alpha * sum + (beta != 0 ? beta * c.get(q, i, j) : 0.0);
          out.push_back(x + (bias ? bias->get(0, 0, j) : 0.0));
        }
    return out;
  }

  double activate(double x) const {
    switch (epilogue) {
    case LINFUSE_EPILOGUE_RELU:
      return x > 0 ? x : 0;
    case LINFUSE_EPILOGUE_GELU_TANH:
      return geluTanh(x);
    default:
      return x;
    }
  }
};

/// Relative tolerance of one rounding to `type`, plus a little for f32;
/// none for i32 (integer GEMMs are exact).
double tolerance(linfuse_dtype type) {
  return type == LINFUSE_I32   ? 0
         : type == LINFUSE_F32 ? 1e-6
         : type == LINFUSE_F16 ? 1e-3
                               : 8e-3;
}

/// Runs `call` on the device and compares C with the reference.
void checkGemm(const Call &call, DeviceArray &a, DeviceArray &b, DeviceArray &c,
               DeviceArray *bias = nullptr, double extraTolerance = 0) {
  std::vector<double> linear = call.linear(a, b, c, bias);
  linfuse_clear_error();
  ASSERT_EQ(call.run(a, b, c, bias), LINFUSE_OK) << lastMessage();
  c.download();
  int64_t r = c.rank(), batches = r == 3 ? c.sizes[0] : 1;
  int64_t m = c.sizes[r - 2], n = c.sizes[r - 1];
  size_t index = 0;
  for (int64_t q = 0; q < batches; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j, ++index) {
        double want = call.activate(linear[index]);
        double tol =
            (tolerance(c.type) + extraTolerance) * (1 + std::fabs(want));
        ASSERT_NEAR(c.get(q, i, j), want, tol)
            << "at (" << q << ", " << i << ", " << j << ")";
      }
}

//===----------------------------------------------------------------------===//
// Without a GPU
//===----------------------------------------------------------------------===//

#define SKIP_WITH_DEVICE()                                                     \
  do {                                                                         \
    linfuse_clear_error();                                                     \
    if (linfuse_cuda_available())                                              \
      GTEST_SKIP() << "a CUDA device is present";                              \
    linfuse_clear_error();                                                     \
  } while (false)

/// Descriptors over host memory: never dereferenced without a device.
struct FakeOperands {
  float data[64] = {};
  int64_t a[7] = {0, 0, 0, 4, 4, 4, 1}, b[7] = {0, 0, 0, 4, 4, 4, 1},
          c[7] = {0, 0, 0, 4, 4, 4, 1};
  FakeOperands() {
    for (int64_t *d : {a, b, c})
      d[0] = d[1] = reinterpret_cast<int64_t>(data);
  }
};

TEST(CudaWithoutGpu, AvailableIsZeroWithTheReason) {
  SKIP_WITH_DEVICE();
  EXPECT_EQ(linfuse_cuda_available(), 0);
  expectError(LINFUSE_ERROR_NO_DEVICE, "linfuse_cuda_available: no ");
  EXPECT_NE(lastMessage().find("CUDA"), std::string::npos) << lastMessage();
}

TEST(CudaWithoutGpu, GemmFailsCleanly) {
  SKIP_WITH_DEVICE();
  FakeOperands ops;
  for (int repeat = 0; repeat < 2; ++repeat) {
    linfuse_clear_error();
    EXPECT_EQ(linfuse_cuda_gemm_f32_f32(2, ops.a, 2, ops.b, 2, ops.c, 2, ops.c,
                                        0, LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
              LINFUSE_ERROR_NO_DEVICE);
    expectError(LINFUSE_ERROR_NO_DEVICE, "linfuse_cuda_gemm: no ");
  }
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_gemm_bf16_f32(2, ops.a, 2, ops.b, 2, ops.c, 2, ops.c,
                                       0, LINFUSE_EPILOGUE_RELU, 1.0f, 0.0f),
            LINFUSE_ERROR_NO_DEVICE);
}

TEST(CudaWithoutGpu, WrappersRecordErrorsAndReturnNull) {
  SKIP_WITH_DEVICE();
  EXPECT_EQ(mgpuMemAlloc(1024, nullptr, false), nullptr);
  expectError(LINFUSE_ERROR_NO_DEVICE, "mgpuMemAlloc: no ");

  // None of these may crash; each records (the first error is kept).
  linfuse_clear_error();
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  expectError(LINFUSE_ERROR_NO_DEVICE, "mgpuStreamCreate: no ");
  char host[16];
  mgpuMemcpy(host, host + 8, 8, nullptr);
  mgpuStreamSynchronize(nullptr);
  EXPECT_EQ(mgpuModuleLoad(host, sizeof(host)), nullptr);
  EXPECT_EQ(mgpuModuleGetFunction(nullptr, "kernel"), nullptr);
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  mgpuMemFree(host, nullptr);
  EXPECT_EQ(linfuse_cuda_stream(), nullptr);
  EXPECT_EQ(linfuse_cuda_synchronize(), LINFUSE_ERROR_NO_DEVICE);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_ERROR_NO_DEVICE);

  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_graph_begin("g"), LINFUSE_ERROR_NO_DEVICE);
  EXPECT_EQ(linfuse_cuda_graph_exists("g"), 0);
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK);

  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_timer_start(), LINFUSE_ERROR_NO_DEVICE);
  expectError(LINFUSE_ERROR_NO_DEVICE, "linfuse_cuda_timer_start: no ");
  linfuse_clear_error();
  float ms = -1;
  EXPECT_EQ(linfuse_cuda_timer_stop(&ms), LINFUSE_ERROR_INVALID_ARGUMENT);
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT,
              "linfuse_cuda_timer_stop: no linfuse_cuda_timer_start");
}

TEST(CudaWithoutGpu, FunctionGraphCallsFailCleanly) {
  SKIP_WITH_DEVICE();
  // What a function compiled with --cuda-graph does on such a machine:
  // begin fails and says why, the body's calls fail, end closes the call.
  static int64_t slot;
  int64_t key[2] = {1, 2};
  EXPECT_EQ(linfuse_cuda_function_begin(uintptr_t(&slot), key, 2),
            LINFUSE_ERROR_NO_DEVICE);
  expectError(LINFUSE_ERROR_NO_DEVICE, "linfuse_cuda_function_begin: no ");
  EXPECT_EQ(mgpuMemAlloc(64, nullptr, false), nullptr);
  EXPECT_EQ(linfuse_cuda_function_end(uintptr_t(&slot)), LINFUSE_OK);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_ERROR_NO_DEVICE);

  // Nested calls balance; an end without a begin is an error.
  linfuse_clear_error();
  linfuse_cuda_function_begin(uintptr_t(&slot), key, 2);
  EXPECT_EQ(linfuse_cuda_function_begin(uintptr_t(&slot), key, 2), LINFUSE_OK);
  EXPECT_EQ(linfuse_cuda_function_end(uintptr_t(&slot)), LINFUSE_OK);
  EXPECT_EQ(linfuse_cuda_function_end(uintptr_t(&slot)), LINFUSE_OK);
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_function_end(uintptr_t(&slot)),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT,
              "linfuse_cuda_function_end: no function call in progress");

  // A bad slot or key is reported before the device is touched.
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_function_begin(0, key, 2),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT,
              "linfuse_cuda_function_begin: invalid function slot");
  linfuse_cuda_function_abandon(); // Leaves no call open.
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_function_end(uintptr_t(&slot)),
            LINFUSE_ERROR_INVALID_ARGUMENT);
}

TEST(CudaWithoutGpu, HostBackendStillWorks) {
  SKIP_WITH_DEVICE();
  EXPECT_EQ(linfuse_cuda_available(), 0);
  linfuse_clear_error();
  // C = A B, 2x2, through the host entry point in the same process.
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {};
  int64_t da[7] = {0, 0, 0, 2, 2, 2, 1}, db[7] = {0, 0, 0, 2, 2, 2, 1},
          dc[7] = {0, 0, 0, 2, 2, 2, 1};
  da[0] = da[1] = reinterpret_cast<int64_t>(a);
  db[0] = db[1] = reinterpret_cast<int64_t>(b);
  dc[0] = dc[1] = reinterpret_cast<int64_t>(c);
  ASSERT_EQ(linfuse_cpu_gemm_f32_f32(2, da, 2, db, 2, dc, 2, dc, 0,
                                     LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
            LINFUSE_OK)
      << lastMessage();
  EXPECT_EQ(c[0], 19);
  EXPECT_EQ(c[1], 22);
  EXPECT_EQ(c[2], 43);
  EXPECT_EQ(c[3], 50);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK);
}

//===----------------------------------------------------------------------===//
// Argument errors (no device needed)
//===----------------------------------------------------------------------===//

TEST(CudaGemmArguments, ShapeMismatchIsInvalidEverywhere) {
  FakeOperands ops;
  ops.b[3] = 3; // B is 3x4: K mismatch with A (4x4).
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_gemm_f32_f32(2, ops.a, 2, ops.b, 2, ops.c, 2, ops.c, 0,
                                      LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT, "linfuse_cuda_gemm: K mismatch");
}

TEST(CudaGemmArguments, EpiloguesWithoutCublasLtFormAreUnsupported) {
  FakeOperands ops;
  for (int32_t epilogue : {LINFUSE_EPILOGUE_GELU_ERF, LINFUSE_EPILOGUE_SILU}) {
    linfuse_clear_error();
    EXPECT_EQ(linfuse_cuda_gemm_f32_f32(2, ops.a, 2, ops.b, 2, ops.c, 2, ops.c,
                                        0, epilogue, 1.0f, 0.0f),
              LINFUSE_ERROR_UNSUPPORTED);
    expectError(LINFUSE_ERROR_UNSUPPORTED, "linfuse_cuda_gemm: epilogue ");
    EXPECT_NE(lastMessage().find(
                  epilogue == LINFUSE_EPILOGUE_SILU ? "silu" : "gelu_erf"),
              std::string::npos);
  }
}

TEST(CudaGemmArguments, UnsupportedLayouts) {
  FakeOperands ops;
  ops.c[5] = 1; // C column-major: strides [1, 4].
  ops.c[6] = 4;
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_gemm_f32_f32(2, ops.a, 2, ops.b, 2, ops.c, 2, ops.c, 0,
                                      LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
            LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED, "linfuse_cuda_gemm: C ");

  FakeOperands strided;
  strided.a[5] = 8; // A with strides [8, 2]: neither row- nor column-major.
  strided.a[6] = 2;
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_gemm_f32_f32(2, strided.a, 2, strided.b, 2, strided.c,
                                      2, strided.c, 0, LINFUSE_EPILOGUE_NONE,
                                      1.0f, 0.0f),
            LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED, "linfuse_cuda_gemm: A ");
}

TEST(CudaGemmArguments, Int8OutsideCublasLtsRulesIsUnsupported) {
  // i8 x i8 -> i32 over host memory that is never read: every refusal is
  // decided before the device is touched. A is 8 x 8, B 8 x 8 (N x K with
  // kTransB: cuBLASLt's TN format), C 8 x 8 i32.
  int8_t ab[64] = {};
  int32_t out[64] = {};
  auto view = [](void *data, int64_t rows, int64_t cols) {
    std::vector<int64_t> d = {0, 0, 0, rows, cols, cols, 1};
    d[0] = d[1] = reinterpret_cast<int64_t>(data);
    return d;
  };
  auto run = [&](std::vector<int64_t> a, std::vector<int64_t> b,
                 std::vector<int64_t> c, int32_t flags, float alpha,
                 float beta) {
    linfuse_clear_error();
    return linfuse_cuda_gemm_i8_i32(2, a.data(), 2, b.data(), 1, c.data(), 2,
                                    c.data(), flags, LINFUSE_EPILOGUE_NONE,
                                    alpha, beta);
  };
  auto a = view(ab, 8, 8), b = view(ab, 8, 8), c = view(out, 8, 8);
  // B stored K x N (no transpose): not the TN format.
  EXPECT_EQ(run(a, b, c, 0, 1, 0), LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED,
              "linfuse_cuda_gemm: cuBLASLt's int8 GEMM needs B stored N x K");
  // A transposed: not TN either.
  EXPECT_EQ(run(a, b, c, kTransA | kTransB, 1, 0), LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED,
              "linfuse_cuda_gemm: cuBLASLt's int8 GEMM needs B stored N x K");
  // K = 6, N = 8: K not a multiple of 4.
  auto a6 = view(ab, 8, 6), b6 = view(ab, 8, 6);
  EXPECT_EQ(run(a6, b6, c, kTransB, 1, 0), LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED, "linfuse_cuda_gemm: cuBLASLt's int8 "
                                         "GEMM needs N and K to be multiples");
  // A row stride of 10 (a column slice of a wider buffer).
  auto a10 = a;
  a10[5] = 10;
  EXPECT_EQ(run(a10, b, c, kTransB, 1, 0), LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED,
              "linfuse_cuda_gemm: cuBLASLt's int8 GEMM needs leading");
  // A misaligned by one byte.
  auto a1 = view(ab + 1, 8, 8);
  EXPECT_EQ(run(a1, b, c, kTransB, 1, 0), LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED,
              "linfuse_cuda_gemm: cuBLASLt's int8 GEMM needs 4-byte aligned");
  // A bias: none for integer outputs here.
  int64_t bias[5] = {reinterpret_cast<int64_t>(out),
                     reinterpret_cast<int64_t>(out), 0, 8, 1};
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_gemm_i8_i32(2, a.data(), 2, b.data(), 1, bias, 2,
                                     c.data(), kTransB | kBias,
                                     LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
            LINFUSE_ERROR_UNSUPPORTED);
  expectError(LINFUSE_ERROR_UNSUPPORTED,
              "linfuse_cuda_gemm: cuBLASLt's int8 GEMM takes no bias");
  // Integer scalars: alpha 1, beta 0 or 1 (the CPU's rule).
  EXPECT_EQ(run(a, b, c, kTransB, 2, 0), LINFUSE_ERROR_INVALID_ARGUMENT);
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT,
              "linfuse_cuda_gemm: an integer GEMM takes alpha 1 and beta 0 or "
              "1, not 2 and 0");
}

//===----------------------------------------------------------------------===//
// GEMMs on the device
//===----------------------------------------------------------------------===//

TEST(CudaDeviceGemm, F32) {
  REQUIRE_DEVICE();
  DeviceArray a(LINFUSE_F32, {37, 41}), b(LINFUSE_F32, {41, 29}),
      c(LINFUSE_F32, {37, 29});
  a.random(1);
  b.random(2);
  c.fill(NAN); // beta == 0 must not read C.
  checkGemm(Call(), a, b, c);
}

TEST(CudaDeviceGemm, LowPrecisionTypedEntryPoints) {
  REQUIRE_DEVICE();
  struct Combination {
    linfuse_dtype ab, c;
    decltype(&linfuse_cuda_gemm_f16_f16) entry;
  } combinations[] = {
      {LINFUSE_F16, LINFUSE_F16, &linfuse_cuda_gemm_f16_f16},
      {LINFUSE_F16, LINFUSE_F32, &linfuse_cuda_gemm_f16_f32},
      {LINFUSE_BF16, LINFUSE_BF16, &linfuse_cuda_gemm_bf16_bf16},
      {LINFUSE_BF16, LINFUSE_F32, &linfuse_cuda_gemm_bf16_f32},
      {LINFUSE_F32, LINFUSE_F32, &linfuse_cuda_gemm_f32_f32},
  };
  for (const Combination &t : combinations) {
    SCOPED_TRACE(std::to_string(t.ab) + " -> " + std::to_string(t.c));
    DeviceArray a(t.ab, {24, 40}), b(t.ab, {40, 16}), c(t.c, {24, 16});
    a.random(3);
    b.random(4);
    c.fill(0);
    std::vector<double> want = Call().linear(a, b, c, nullptr);
    linfuse_clear_error();
    ASSERT_EQ(t.entry(2, a.desc(), 2, b.desc(), 2, c.desc(), 2, c.desc(), 0,
                      LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
              LINFUSE_OK)
        << lastMessage();
    c.download();
    for (int64_t i = 0; i < 24; ++i)
      for (int64_t j = 0; j < 16; ++j)
        ASSERT_NEAR(c.get(0, i, j), want[i * 16 + j],
                    tolerance(t.c) * (1 + std::fabs(want[i * 16 + j])));
  }
}

TEST(CudaDeviceGemm, TransposeFlagsAndTransposedViews) {
  REQUIRE_DEVICE();
  const int64_t m = 9, n = 11, k = 13;
  for (int32_t flags : {0, kTransA, kTransB, kTransA | kTransB})
    for (bool viewA : {false, true})
      for (bool viewB : {false, true}) {
        SCOPED_TRACE("flags " + std::to_string(flags) + " viewA " +
                     std::to_string(viewA) + " viewB " + std::to_string(viewB));
        // Stored shape of A and B per the flags; a "view" stores the same
        // matrix column-major (strides [1, rows + 3]).
        int64_t ar = flags & kTransA ? k : m, ac = flags & kTransA ? m : k;
        int64_t br = flags & kTransB ? n : k, bc = flags & kTransB ? k : n;
        DeviceArray a(LINFUSE_F32, {ar, ac},
                      viewA ? std::vector<int64_t>{1, ar + 3}
                            : std::vector<int64_t>{});
        DeviceArray b(LINFUSE_F32, {br, bc},
                      viewB ? std::vector<int64_t>{1, br + 3}
                            : std::vector<int64_t>{});
        DeviceArray c(LINFUSE_F32, {m, n});
        a.random(5);
        b.random(6);
        c.fill(0);
        Call call;
        call.flags = flags;
        checkGemm(call, a, b, c);
      }
}

TEST(CudaDeviceGemm, ColumnSliceOfCInPlace) {
  REQUIRE_DEVICE();
  // C is columns [5, 5 + 12) of a 10 x 32 buffer (ldc 32 > N 12).
  DeviceArray a(LINFUSE_F32, {10, 8}), b(LINFUSE_F32, {8, 12});
  DeviceArray c(LINFUSE_F32, {10, 12}, {32, 1}, /*offset=*/5);
  a.random(7);
  b.random(8);
  c.fill(7.0);
  checkGemm(Call(), a, b, c);
  for (int64_t k = 0; k < int64_t(c.store.size()); ++k) {
    int64_t column = k % 32;
    if (column < 5 || column >= 17) {
      ASSERT_EQ(c.store[k], 7.0) << "neighbour " << k << " was written";
    }
  }
}

TEST(CudaDeviceGemm, Batched) {
  REQUIRE_DEVICE();
  // Batch strides with padding between the matrices.
  DeviceArray a(LINFUSE_BF16, {3, 6, 10}, {70, 10, 1});
  DeviceArray b(LINFUSE_BF16, {3, 7, 10}, {75, 10, 1});
  DeviceArray c(LINFUSE_F32, {3, 6, 7});
  a.random(9);
  b.random(10);
  c.fill(0);
  Call call;
  call.flags = kTransB;
  checkGemm(call, a, b, c);
}

TEST(CudaDeviceGemm, BiasRelu) {
  REQUIRE_DEVICE();
  // The bias has C's type (what cuBLASLt expects for these outputs).
  const std::pair<linfuse_dtype, linfuse_dtype> types[] = {
      {LINFUSE_F32, LINFUSE_F32},
      {LINFUSE_BF16, LINFUSE_BF16},
      {LINFUSE_F16, LINFUSE_F32}};
  for (auto [ab, out] : types) {
    SCOPED_TRACE(std::to_string(ab) + " -> " + std::to_string(out));
    DeviceArray a(ab, {16, 24}), b(ab, {24, 20}), c(out, {16, 20}),
        bias(out, {20});
    a.random(11);
    b.random(12);
    bias.random(13);
    c.fill(0);
    Call call;
    call.epilogue = LINFUSE_EPILOGUE_RELU;
    checkGemm(call, a, b, c, &bias);
  }
}

TEST(CudaDeviceGemm, BiasGeluIsTheTanhForm) {
  REQUIRE_DEVICE();
  // Pre-activations spread over about [-4, 4], where the tanh and erf forms
  // differ by up to ~5e-4.
  DeviceArray a(LINFUSE_F32, {32, 8}), b(LINFUSE_F32, {8, 32}),
      c(LINFUSE_F32, {32, 32}), bias(LINFUSE_F32, {32});
  a.random(14);
  b.random(15);
  bias.random(16);
  c.fill(0);
  Call call;
  call.alpha = 0.5f;
  call.epilogue = LINFUSE_EPILOGUE_GELU_TANH;
  std::vector<double> linear = call.linear(a, b, c, &bias);
  // cuBLASLt may evaluate tanh approximately: a looser per-element check,
  // then the form decided over all elements.
  checkGemm(call, a, b, c, &bias, /*extraTolerance=*/1e-3);
  // Which GELU cuBLASLt computes (TOOLCHAIN.md asks): closer to tanh.
  double offTanh = 0, offErf = 0;
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 32; ++j) {
      double x = linear[i * 32 + j];
      offTanh += std::fabs(c.get(0, i, j) - geluTanh(x));
      offErf += std::fabs(c.get(0, i, j) - geluErf(x));
    }
  std::printf("cuBLASLt GELU: mean |result - gelu_tanh| = %.3g, mean "
              "|result - gelu_erf| = %.3g\n",
              offTanh / 1024, offErf / 1024);
  EXPECT_LT(offTanh, offErf) << "cuBLASLt's GELU looks like the erf form";
}

TEST(CudaDeviceGemm, AlphaBeta) {
  REQUIRE_DEVICE();
  DeviceArray a(LINFUSE_F16, {12, 16}), b(LINFUSE_F16, {16, 8}),
      c(LINFUSE_F32, {12, 8});
  a.random(17);
  b.random(18);
  c.random(19);
  Call call;
  call.alpha = 0.5f;
  call.beta = -2.0f;
  checkGemm(call, a, b, c);
}

TEST(CudaDeviceGemm, Int8IntoInt32IsExact) {
  REQUIRE_DEVICE();
  // Quantized Q/K/V's shape: x (M x K) times W^T (W stored N x K), sums up
  // to 256 * 128 * 128 = 2^22, exact only in integer arithmetic; then
  // C += A * B^T (beta 1) on top, and a strided batch.
  DeviceArray a(LINFUSE_I8, {20, 256}), b(LINFUSE_I8, {96, 256}),
      c(LINFUSE_I32, {20, 96});
  a.random(40);
  b.random(41);
  c.fill(0);
  Call call;
  call.flags = kTransB;
  checkGemm(call, a, b, c);
  call.beta = 1.0f; // C already holds A * B^T: now twice that.
  checkGemm(call, a, b, c);

  DeviceArray ab(LINFUSE_I8, {3, 8, 64}), bb(LINFUSE_I8, {3, 32, 64}),
      cb(LINFUSE_I32, {3, 8, 32});
  ab.random(42);
  bb.random(43);
  cb.fill(0);
  Call batched;
  batched.flags = kTransB;
  checkGemm(batched, ab, bb, cb);
}

TEST(CudaDeviceGemm, HeuristicRunsOncePerProblem) {
  REQUIRE_DEVICE();
  DeviceArray a(LINFUSE_F32, {13, 19}), b(LINFUSE_F32, {19, 17}),
      c(LINFUSE_F32, {13, 17});
  a.random(20);
  b.random(21);
  c.fill(0);
  int64_t before = linfuse_cuda_heuristic_queries();
  checkGemm(Call(), a, b, c);
  int64_t first = linfuse_cuda_heuristic_queries();
  EXPECT_LE(first - before, 1); // 0 if an earlier test had this problem.
  a.random(22);                 // New data, same problem.
  checkGemm(Call(), a, b, c);
  EXPECT_EQ(linfuse_cuda_heuristic_queries(), first);

  DeviceArray wider(LINFUSE_F32, {13, 18}), b2(LINFUSE_F32, {19, 18});
  b2.random(23);
  checkGemm(Call(), a, b2, wider);
  EXPECT_EQ(linfuse_cuda_heuristic_queries(), first + 1);
}

//===----------------------------------------------------------------------===//
// CUDA graphs
//===----------------------------------------------------------------------===//

TEST(CudaDeviceGraph, CaptureThenReplayTwoGemms) {
  REQUIRE_DEVICE();
  // y = relu(x W1 + b1) W2 as two GEMMs.
  DeviceArray x(LINFUSE_BF16, {8, 32}), w1(LINFUSE_BF16, {32, 48}),
      b1(LINFUSE_BF16, {48}), h(LINFUSE_BF16, {8, 48}),
      w2(LINFUSE_BF16, {48, 16}), y(LINFUSE_F32, {8, 16});
  x.random(24);
  w1.random(25);
  b1.random(26);
  w2.random(27);
  Call first, second;
  first.epilogue = LINFUSE_EPILOGUE_RELU;
  auto enqueue = [&] {
    EXPECT_EQ(first.run(x, w1, h, &b1), LINFUSE_OK) << lastMessage();
    EXPECT_EQ(linfuse_cuda_gemm(2, h.desc(), 2, w2.desc(), 2, y.desc(), 2,
                                y.desc(), LINFUSE_BF16, LINFUSE_F32, 0,
                                LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f),
              LINFUSE_OK)
        << lastMessage();
  };
  auto eager = [&] {
    y.fill(-1.0);
    enqueue();
    return y.download().store;
  };
  linfuse_clear_error();
  std::vector<double> want = eager();

  // Capturing records and runs nothing.
  const char *key = "two-gemms";
  linfuse_cuda_graph_destroy(key);
  y.fill(-1.0);
  ASSERT_EQ(linfuse_cuda_graph_begin(key), LINFUSE_OK) << lastMessage();
  enqueue();
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(linfuse_cuda_graph_exists(key), 1);
  for (double v : y.download().store)
    ASSERT_EQ(v, -1.0) << "the capture ran the GEMMs";

  // Replays give the eager results, bit for bit, and count the GEMMs.
  linfuse_reset_stats();
  ASSERT_EQ(linfuse_cuda_graph_launch(key), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(y.download().store, want);
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 2);
  EXPECT_EQ(stats.kernel_launches, 2);

  // A replay reads the buffers' current contents.
  x.random(28);
  y.fill(-1.0);
  ASSERT_EQ(linfuse_cuda_graph_launch(key), LINFUSE_OK) << lastMessage();
  std::vector<double> replayed = y.download().store;
  EXPECT_EQ(replayed, eager());

  EXPECT_EQ(linfuse_cuda_graph_destroy(key), LINFUSE_OK);
  EXPECT_EQ(linfuse_cuda_graph_exists(key), 0);
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_graph_launch(key), LINFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(linfuse_cuda_graph_end(), LINFUSE_ERROR_INVALID_ARGUMENT);
}

TEST(CudaDeviceGraph, AllocationInsideACaptureIsAGraphAllocation) {
  REQUIRE_DEVICE();
  ASSERT_EQ(linfuse_cuda_graph_begin("alloc"), LINFUSE_OK) << lastMessage();
  void *p = mgpuMemAlloc(256 * 4, nullptr, false);
  ASSERT_NE(p, nullptr) << lastMessage();
  mgpuMemset32(p, floatBits(2.5f), 256, nullptr);
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  // Each launch allocates at the same address; a relaunch first frees what
  // the previous launch left allocated.
  for (int launch = 0; launch < 3; ++launch) {
    ASSERT_EQ(linfuse_cuda_graph_launch("alloc"), LINFUSE_OK) << lastMessage();
    std::vector<float> host(256, 0.0f);
    mgpuMemcpy(host.data(), p, 256 * 4, nullptr);
    ASSERT_EQ(linfuse_cuda_synchronize(), LINFUSE_OK) << lastMessage();
    for (float v : host)
      ASSERT_EQ(v, 2.5f) << "launch " << launch;
  }
  mgpuMemFree(p, nullptr); // Optional: freed outside the graph.
  ASSERT_EQ(linfuse_cuda_graph_launch("alloc"), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(linfuse_cuda_synchronize(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(linfuse_cuda_graph_destroy("alloc"), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

/// A 2-D row-major f32 descriptor over device memory `p`.
DeviceArray::Descriptor matrix(void *p, int64_t rows, int64_t cols) {
  DeviceArray::Descriptor d = {};
  d.allocated = d.aligned = p;
  d.sizesAndStrides[0] = rows;
  d.sizesAndStrides[1] = cols;
  d.sizesAndStrides[2] = cols;
  d.sizesAndStrides[3] = 1;
  return d;
}

/// What a function compiled with --cuda-graph does, by hand:
/// y = relu(x W1 + b1) W2 through an intermediate it allocates and frees,
/// returning y in a fresh allocation. `extra` goes into the key (as a
/// scalar argument would).
struct GraphedFunction {
  DeviceArray &x, &w1, &b1, &w2;
  int64_t m, k, h, n;

  void *body(bool graph, int64_t extra = 0, uint64_t tmpBytes = 0) {
    static int64_t slot;
    int64_t key[] = {int64_t(uintptr_t(x.device)),
                     m,
                     k,
                     int64_t(uintptr_t(w1.device)),
                     int64_t(uintptr_t(b1.device)),
                     int64_t(uintptr_t(w2.device)),
                     extra};
    if (graph) {
      EXPECT_EQ(linfuse_cuda_function_begin(uintptr_t(&slot), key, 7),
                LINFUSE_OK)
          << lastMessage();
    }
    void *tmp =
        mgpuMemAlloc(tmpBytes ? tmpBytes : uint64_t(m * h * 4), nullptr, false);
    void *y = mgpuMemAlloc(uint64_t(m * n * 4), nullptr, false);
    DeviceArray::Descriptor t = matrix(tmp, m, h), out = matrix(y, m, n);
    linfuse_cuda_gemm_f32_f32(2, x.desc(), 2, w1.desc(), 1, b1.desc(), 2, &t,
                              kBias, LINFUSE_EPILOGUE_RELU, 1.0f, 0.0f);
    linfuse_cuda_gemm_f32_f32(2, &t, 2, w2.desc(), 2, &out, 2, &out, 0,
                              LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f);
    mgpuMemFree(tmp, nullptr);
    linfuse_cuda_synchronize();
    if (graph)
      linfuse_cuda_function_end(uintptr_t(&slot));
    return y;
  }

  std::vector<float> read(void *y) {
    std::vector<float> host(size_t(m * n), 0.0f);
    mgpuMemcpy(host.data(), y, host.size() * 4, nullptr);
    EXPECT_EQ(linfuse_cuda_synchronize(), LINFUSE_OK) << lastMessage();
    return host;
  }

  /// The eager result (no graph), freed.
  std::vector<float> eager() {
    void *y = body(/*graph=*/false);
    std::vector<float> host = read(y);
    mgpuMemFree(y, nullptr);
    return host;
  }
};

TEST(CudaDeviceGraph, FunctionCapturedOnceThenReplayed) {
  REQUIRE_DEVICE();
  ASSERT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
  DeviceArray x(LINFUSE_F32, {8, 32}), w1(LINFUSE_F32, {32, 48}),
      b1(LINFUSE_F32, {48}), w2(LINFUSE_F32, {48, 16});
  x.random(40);
  w1.random(41);
  b1.random(42);
  w2.random(43);
  GraphedFunction f{x, w1, b1, w2, 8, 32, 48, 16};
  linfuse_clear_error();
  std::vector<float> want = f.eager();
  int64_t queries = linfuse_cuda_heuristic_queries();

  // First call: captured, then launched; the caller sees the results.
  linfuse_reset_stats();
  void *y1 = f.body(/*graph=*/true);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(f.read(y1), want);
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 2);

  // Same arguments, new data in x: replayed (same result address, no new
  // heuristic query), computed on the new data.
  x.random(44);
  want = f.eager();
  linfuse_reset_stats();
  void *y2 = f.body(/*graph=*/true);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(y2, y1);
  EXPECT_EQ(f.read(y2), want);
  EXPECT_EQ(linfuse_cuda_heuristic_queries(), queries);
  linfuse_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 2);
  EXPECT_EQ(stats.kernel_launches, 2);

  // The caller may free a result; the next replay allocates it again (new
  // data, so that stale memory cannot pass for a result).
  mgpuMemFree(y2, nullptr);
  x.random(49);
  want = f.eager();
  void *y3 = f.body(/*graph=*/true);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(f.read(y3), want);

  // Another key is another capture.
  void *y4 = f.body(/*graph=*/true, /*extra=*/1);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(f.read(y4), want);

  // A replay whose host code asks for other allocations than its capture
  // made is an error, not a launch; the next call works again.
  linfuse_reset_stats();
  void *bad = f.body(/*graph=*/true, 0, /*tmpBytes=*/4);
  EXPECT_EQ(bad, nullptr);
  expectError(LINFUSE_ERROR_BACKEND, "mgpuMemAlloc: the replayed function");
  linfuse_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 0);
  linfuse_clear_error();
  x.random(50);
  want = f.eager();
  void *y5 = f.body(/*graph=*/true);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(f.read(y5), want);
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceGraph, AFailedCaptureIsNotKept) {
  REQUIRE_DEVICE();
  DeviceArray x(LINFUSE_F32, {8, 32}), w1(LINFUSE_F32, {32, 48}),
      b1(LINFUSE_F32, {48}), w2(LINFUSE_F32, {48, 16}),
      wrong(LINFUSE_F32, {40, 16});
  x.random(45);
  w1.random(46);
  b1.random(47);
  w2.random(48);
  // W2 of the wrong shape: the second GEMM fails while captured, and the
  // call fails. Had the graph been kept, the second call would replay it
  // without an error.
  GraphedFunction broken{x, w1, b1, wrong, 8, 32, 48, 16};
  for (int call = 0; call < 2; ++call) {
    linfuse_clear_error();
    broken.body(/*graph=*/true);
    expectError(LINFUSE_ERROR_INVALID_ARGUMENT, "linfuse_cuda_gemm");
  }
  // The runtime is fine afterwards.
  GraphedFunction f{x, w1, b1, w2, 8, 32, 48, 16};
  linfuse_clear_error();
  std::vector<float> want = f.eager();
  void *y = f.body(/*graph=*/true);
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  EXPECT_EQ(f.read(y), want);
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceGraph, AKeyedCaptureWithAFailedCallIsNotKept) {
  REQUIRE_DEVICE();
  ASSERT_EQ(linfuse_cuda_graph_destroy("failed-call"), LINFUSE_OK);
  void *buffer = mgpuMemAlloc(64 * 4, nullptr, false);
  ASSERT_NE(buffer, nullptr) << lastMessage();
  linfuse_clear_error();
  ASSERT_EQ(linfuse_cuda_graph_begin("failed-call"), LINFUSE_OK)
      << lastMessage();
  mgpuMemset32(buffer, floatBits(2.0f), 64, nullptr);
  // Fails while recorded (no kernel): the graph would lack the launch.
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_NE(linfuse_cuda_graph_end(), LINFUSE_OK);
  // The launch's error is the one reported; nothing is stored.
  expectError(LINFUSE_ERROR_INVALID_ARGUMENT, "mgpuLaunchKernel");
  EXPECT_EQ(linfuse_cuda_graph_exists("failed-call"), 0);
  // Reported also when the caller cleared the launch's error.
  ASSERT_EQ(linfuse_cuda_graph_begin("failed-call"), LINFUSE_OK)
      << lastMessage();
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  linfuse_clear_error();
  EXPECT_EQ(linfuse_cuda_graph_end(), LINFUSE_ERROR_BACKEND);
  expectError(LINFUSE_ERROR_BACKEND, "linfuse_cuda_graph_end: a call failed");
  EXPECT_EQ(linfuse_cuda_graph_exists("failed-call"), 0);
  linfuse_clear_error();
  mgpuMemFree(buffer, nullptr);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

/// A step counter two threads hand work over with (each wait gives up
/// after 60 s, so that a failure cannot hang the test).
struct Handover {
  std::mutex mutex;
  std::condition_variable changed;
  int step = 0;

  void reach(int n) {
    std::lock_guard<std::mutex> lock(mutex);
    step = n;
    changed.notify_all();
  }
  bool await(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(60),
                            [&] { return step >= n; });
  }
};

/// Joins a thread that waits on a Handover on every way out of a test (a
/// failed ASSERT returns early): it first lets the thread past every step,
/// so that the join cannot hang, and a joinable std::thread left behind
/// would std::terminate the test binary.
struct JoinOnExit {
  Handover &handover;
  std::thread &thread;
  ~JoinOnExit() {
    if (!thread.joinable())
      return;
    handover.reach(std::numeric_limits<int>::max());
    thread.join();
  }
};

TEST(CudaDeviceGraph, PlainCallsOnAnotherThreadDuringACapture) {
  REQUIRE_DEVICE();
  // Thread 1 captures a GEMM into a keyed graph; while its capture is open,
  // this thread runs another GEMM plainly, waits for it and reads it back.
  DeviceArray a1(LINFUSE_F32, {16, 24}), b1(LINFUSE_F32, {24, 8}),
      c1(LINFUSE_F32, {16, 8});
  DeviceArray a2(LINFUSE_F32, {12, 20}), b2(LINFUSE_F32, {20, 10}),
      c2(LINFUSE_F32, {12, 10});
  a1.random(60);
  b1.random(61);
  c1.fill(-1.0);
  a2.random(62);
  b2.random(63);
  c2.fill(-1.0);
  std::vector<double> want1 = Call().linear(a1, b1, c1, nullptr);
  const char *key = "two-threads";
  linfuse_cuda_graph_destroy(key);

  Handover handover;
  std::thread capturer([&] {
    linfuse_clear_error();
    EXPECT_EQ(linfuse_cuda_graph_begin(key), LINFUSE_OK) << lastMessage();
    EXPECT_EQ(Call().run(a1, b1, c1), LINFUSE_OK) << lastMessage();
    handover.reach(1); // Capture open, GEMM recorded.
    EXPECT_TRUE(handover.await(2));
    EXPECT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
    EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  });
  JoinOnExit joinCapturer{handover, capturer};
  ASSERT_TRUE(handover.await(1));
  // Plainly, during the other thread's capture: it runs now, and the
  // synchronizations wait for it (checkGemm reads C back).
  checkGemm(Call(), a2, b2, c2);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  handover.reach(2);
  capturer.join();
  ASSERT_EQ(linfuse_cuda_graph_exists(key), 1);

  // The capture ran nothing; its graph holds its GEMM and not this
  // thread's: a launch computes C1 and leaves C2 alone.
  for (double v : c1.download().store)
    ASSERT_EQ(v, -1.0) << "the capture ran its GEMM";
  c2.fill(-1.0);
  linfuse_reset_stats();
  ASSERT_EQ(linfuse_cuda_graph_launch(key), LINFUSE_OK) << lastMessage();
  c1.download();
  for (size_t k = 0; k < want1.size(); ++k)
    ASSERT_NEAR(c1.store[k], want1[k], 1e-6 * (1 + std::fabs(want1[k])));
  for (double v : c2.download().store)
    ASSERT_EQ(v, -1.0) << "the other thread's GEMM was recorded";
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 1);
  EXPECT_EQ(linfuse_cuda_graph_destroy(key), LINFUSE_OK) << lastMessage();
}

/// `count` floats read back from device memory, after the runtime's stream.
std::vector<float> readFloats(void *device, size_t count) {
  std::vector<float> host(count, 0.0f);
  mgpuMemcpy(host.data(), device, count * 4, nullptr);
  EXPECT_EQ(linfuse_cuda_synchronize(), LINFUSE_OK) << lastMessage();
  return host;
}

/// A function-graph call by hand (slot, one-word key) whose body allocates
/// 64 floats, sets them to `value`, then runs `more`. Returns the result
/// allocation; `status` gets linfuse_cuda_function_end's.
void *fillByFunction(int64_t *slot, int64_t key, float value,
                     const std::function<void()> &more, int32_t &status) {
  linfuse_clear_error();
  status = linfuse_cuda_function_begin(uintptr_t(slot), &key, 1);
  EXPECT_EQ(status, LINFUSE_OK) << lastMessage();
  void *out = mgpuMemAlloc(64 * 4, nullptr, false);
  mgpuMemset32(out, floatBits(value), 64, nullptr);
  more();
  status = linfuse_cuda_function_end(uintptr_t(slot));
  return out;
}

TEST(CudaDeviceGraph, FreeInsideACaptureWaitsForItsEnd) {
  REQUIRE_DEVICE();
  // Keyed: memory allocated before the capture is read, then freed, inside
  // it. Freed there, it would invalidate the capture; freed at _end, every
  // launch would read memory the pool hands out again. The graph keeps it
  // until it is dropped.
  void *before = mgpuMemAlloc(256 * 4, nullptr, false);
  ASSERT_NE(before, nullptr) << lastMessage();
  mgpuMemset32(before, floatBits(5.0f), 256, nullptr);
  linfuse_clear_error();
  ASSERT_EQ(linfuse_cuda_graph_begin("free-inside"), LINFUSE_OK)
      << lastMessage();
  void *inside = mgpuMemAlloc(256 * 4, nullptr, false);
  mgpuMemcpy(inside, before, 256 * 4, nullptr);
  mgpuMemFree(before, nullptr);
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  // The pool would hand `before` out again had it been freed.
  void *later = mgpuMemAlloc(256 * 4, nullptr, false);
  ASSERT_NE(later, nullptr) << lastMessage();
  EXPECT_NE(later, before) << "freed while its graph may still read it";
  mgpuMemset32(later, floatBits(9.0f), 256, nullptr);
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(linfuse_cuda_graph_launch("free-inside"), LINFUSE_OK)
        << lastMessage();
    for (float v : readFloats(inside, 256))
      ASSERT_EQ(v, 5.0f);
  }
  mgpuMemFree(inside, nullptr);
  mgpuMemFree(later, nullptr);
  // Dropping the graph frees what it kept.
  EXPECT_EQ(linfuse_cuda_graph_destroy("free-inside"), LINFUSE_OK);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();

  // A function graph whose body frees memory from outside the call (a
  // buffer it owns, not an argument): captured on the first call, replayed
  // on the next ones, each freeing a new buffer after the graph's launch.
  static int64_t slot;
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    void *owned = mgpuMemAlloc(4096, nullptr, false);
    ASSERT_NE(owned, nullptr) << lastMessage();
    int32_t status;
    void *out = fillByFunction(
        &slot, 20, float(call + 1), [&] { mgpuMemFree(owned, nullptr); },
        status);
    ASSERT_EQ(status, LINFUSE_OK) << lastMessage();
    // A replay repeats the captured memset (1.0): the graph bakes it in.
    for (float v : readFloats(out, 64))
      ASSERT_EQ(v, 1.0f);
    mgpuMemFree(out, nullptr);
  }
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceGraph, EveryHandleOfTheRuntimesStreamIsRecordedInACapture) {
  REQUIRE_DEVICE();
  void *buffer = mgpuMemAlloc(64 * 4, nullptr, false);
  ASSERT_NE(buffer, nullptr) << lastMessage();
  mgpuMemset32(buffer, floatBits(1.0f), 64, nullptr);
  // Handles to the runtime's stream from before the capture: passed
  // during it, they are the capture's stream, so the memset is recorded
  // (not run) and waiting for them is a no-op (an event recorded outside
  // the capture and waited for inside would invalidate it).
  void *handle = linfuse_cuda_stream(), *created = mgpuStreamCreate();
  ASSERT_NE(handle, nullptr) << lastMessage();
  void *before = mgpuEventCreate(), *inside = mgpuEventCreate();
  mgpuEventRecord(before, nullptr);
  linfuse_clear_error();
  ASSERT_EQ(linfuse_cuda_graph_begin("handles"), LINFUSE_OK) << lastMessage();
  mgpuMemset32(buffer, floatBits(2.0f), 64, handle);
  EXPECT_EQ(linfuse_cuda_wait_for_stream(handle), LINFUSE_OK);
  EXPECT_EQ(linfuse_cuda_wait_for_stream(created), LINFUSE_OK);
  // Waits on the capture return at once; an event recorded before the
  // capture is waited for (it stands for work that ran).
  mgpuStreamSynchronize(created);
  mgpuEventSynchronize(before);
  // An event recorded in the capture stands for work that has not run.
  mgpuEventRecord(inside, handle);
  mgpuEventSynchronize(inside);
  // A stream handle obtained inside the capture, kept beyond it.
  void *kept = mgpuStreamCreate();
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  for (float v : readFloats(buffer, 64))
    ASSERT_EQ(v, 1.0f) << "the capture ran the memset";
  ASSERT_EQ(linfuse_cuda_graph_launch("handles"), LINFUSE_OK) << lastMessage();
  for (float v : readFloats(buffer, 64))
    ASSERT_EQ(v, 2.0f);

  // After the capture the kept handle is the runtime's stream: work on it
  // is ordered with the rest, and destroying it destroys nothing, so the
  // next capture still has its stream.
  mgpuMemset32(buffer, floatBits(3.0f), 64, kept);
  mgpuStreamSynchronize(kept);
  mgpuStreamDestroy(kept);
  for (float v : readFloats(buffer, 64))
    ASSERT_EQ(v, 3.0f);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  ASSERT_EQ(linfuse_cuda_graph_begin("handles"), LINFUSE_OK) << lastMessage();
  mgpuMemset32(buffer, floatBits(4.0f), 64, kept);
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  ASSERT_EQ(linfuse_cuda_graph_launch("handles"), LINFUSE_OK) << lastMessage();
  for (float v : readFloats(buffer, 64))
    ASSERT_EQ(v, 4.0f);
  mgpuEventDestroy(before);
  mgpuEventDestroy(inside);
  mgpuMemFree(buffer, nullptr);
  EXPECT_EQ(linfuse_cuda_graph_destroy("handles"), LINFUSE_OK) << lastMessage();
}

/// What a call that cannot be captured looks like: the timer waits for an
/// event recorded on the (captured) stream, which invalidates a capture.
/// Plainly, it just times nothing.
void waitForTheStream() {
  float ms = 0;
  linfuse_cuda_timer_start();
  linfuse_cuda_timer_stop(&ms);
}

TEST(CudaDeviceGraph, AKeyWhoseCaptureFailedRunsPlainlyAfterwards) {
  REQUIRE_DEVICE();
  ASSERT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
  waitForTheStream(); // Creates the timer's events outside any capture.
  ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
  static int64_t slot;
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    int32_t status;
    void *out =
        fillByFunction(&slot, 30, float(call + 1), waitForTheStream, status);
    if (call == 0) {
      // The capture fails, so does the call (its results are not read).
      EXPECT_NE(status, LINFUSE_OK);
      EXPECT_NE(linfuse_last_error(), LINFUSE_OK);
      continue;
    }
    // Later calls with that key run plainly instead of failing again.
    ASSERT_EQ(status, LINFUSE_OK) << lastMessage();
    ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
    for (float v : readFloats(out, 64))
      ASSERT_EQ(v, float(call + 1));
    mgpuMemFree(out, nullptr);
  }
  // Another key still captures.
  int32_t status;
  void *out = fillByFunction(
      &slot, 31, 5.0f, [] {}, status);
  EXPECT_EQ(status, LINFUSE_OK) << lastMessage();
  for (float v : readFloats(out, 64))
    ASSERT_EQ(v, 5.0f);
  mgpuMemFree(out, nullptr);
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceGraph, AnInvalidatedCaptureLeavesTheStreamsUsable) {
  REQUIRE_DEVICE();
  waitForTheStream();
  DeviceArray data(LINFUSE_F32, {128});
  linfuse_clear_error();
  ASSERT_EQ(linfuse_cuda_graph_begin("invalidated"), LINFUSE_OK)
      << lastMessage();
  mgpuMemset32(data.device, floatBits(1.0f), 128, nullptr);
  waitForTheStream();
  EXPECT_NE(linfuse_cuda_graph_end(), LINFUSE_OK);
  EXPECT_EQ(linfuse_cuda_graph_exists("invalidated"), 0);
  // The capture is over: plain calls run, and a new capture works.
  linfuse_clear_error();
  mgpuMemset32(data.device, floatBits(2.0f), 128, nullptr);
  for (double v : data.download().store)
    ASSERT_EQ(v, 2.0);
  ASSERT_EQ(linfuse_cuda_graph_begin("valid"), LINFUSE_OK) << lastMessage();
  mgpuMemset32(data.device, floatBits(3.0f), 128, nullptr);
  ASSERT_EQ(linfuse_cuda_graph_end(), LINFUSE_OK) << lastMessage();
  ASSERT_EQ(linfuse_cuda_graph_launch("valid"), LINFUSE_OK) << lastMessage();
  for (double v : data.download().store)
    ASSERT_EQ(v, 3.0);
  EXPECT_EQ(linfuse_cuda_graph_destroy(nullptr), LINFUSE_OK) << lastMessage();
}

//===----------------------------------------------------------------------===//
// mgpu* wrappers on the device
//===----------------------------------------------------------------------===//

// data[i] += 1 for i < count; PTX for any GPU from sm_80 on, JIT-compiled.
const char kAddOnePtx[] = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 add_one_data, .param .u32 add_one_count)
{
  .reg .pred %p<2>;
  .reg .b32 %r<5>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [add_one_data];
  ld.param.u32 %r2, [add_one_count];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r1, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r1;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
)";

TEST(CudaDeviceWrappers, LoadAndLaunchAKernel) {
  REQUIRE_DEVICE();
  for (bool jit : {false, true}) {
    SCOPED_TRACE(jit ? "mgpuModuleLoadJIT, mgpuLaunchClusterKernel"
                     : "mgpuModuleLoad, mgpuLaunchKernel");
    void *module = jit ? mgpuModuleLoadJIT(const_cast<char *>(kAddOnePtx), 3)
                       : mgpuModuleLoad(const_cast<char *>(kAddOnePtx),
                                        sizeof(kAddOnePtx));
    ASSERT_NE(module, nullptr) << lastMessage();
    void *function = mgpuModuleGetFunction(module, "add_one");
    ASSERT_NE(function, nullptr) << lastMessage();

    DeviceArray data(LINFUSE_F32, {300});
    data.random(29);
    std::vector<double> before = data.store;
    void *pointer = data.device;
    int32_t count = 300;
    void *params[] = {&pointer, &count};
    linfuse_reset_stats();
    void *stream = mgpuStreamCreate();
    EXPECT_EQ(stream, linfuse_cuda_stream());
    if (jit) // Also a cluster launch (of 1-block clusters).
      mgpuLaunchClusterKernel(function, 1, 1, 1, 3, 1, 1, 128, 1, 1, 0, stream,
                              params, nullptr, 2);
    else
      mgpuLaunchKernel(function, 3, 1, 1, 128, 1, 1, 0, stream, params, nullptr,
                       2);
    mgpuStreamSynchronize(stream);
    mgpuStreamDestroy(stream); // Leaves the runtime's stream alive.
    ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
    data.download();
    for (size_t i = 0; i < before.size(); ++i)
      ASSERT_EQ(data.store[i], before[i] + 1) << i;
    linfuse_runtime_stats stats;
    linfuse_get_stats(&stats);
    EXPECT_EQ(stats.kernel_launches, 1);
    mgpuModuleUnload(module);
  }
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

// out[0] = 1 (static shared memory, 40 KiB) + 2 (the last of `words`
// dynamic shared words), from one thread.
const char kSharedSumPtx[] = R"(
.version 7.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dynamic_smem[];
.shared .align 16 .b8 static_smem[40960];
.visible .entry shared_sum(.param .u64 shared_sum_out,
                           .param .u32 shared_sum_words)
{
  .reg .b32 %r<6>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [shared_sum_out];
  ld.param.u32 %r1, [shared_sum_words];
  mov.f32 %f1, 0f3F800000;
  st.shared.f32 [static_smem+40956], %f1;
  add.s32 %r2, %r1, -1;
  shl.b32 %r3, %r2, 2;
  mov.u32 %r4, dynamic_smem;
  add.s32 %r5, %r4, %r3;
  mov.f32 %f2, 0f40000000;
  st.shared.f32 [%r5], %f2;
  bar.sync 0;
  ld.shared.f32 %f3, [static_smem+40956];
  ld.shared.f32 %f4, [%r5];
  add.f32 %f5, %f3, %f4;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.f32 [%rd2], %f5;
  ret;
}
)";

/// kSharedSumPtx's module and kernel (null, with the error recorded, if
/// they fail to load).
struct SharedSumKernel {
  void *module =
      mgpuModuleLoad(const_cast<char *>(kSharedSumPtx), sizeof(kSharedSumPtx));
  void *function =
      module ? mgpuModuleGetFunction(module, "shared_sum") : nullptr;

  /// One launch with `dynamicBytes` of dynamic shared memory, writing 3.0
  /// to `out`.
  void launch(DeviceArray &out, int32_t dynamicBytes) const {
    void *pointer = out.device;
    uint32_t words = uint32_t(dynamicBytes / 4);
    void *params[] = {&pointer, &words};
    mgpuLaunchKernel(function, 1, 1, 1, 1, 1, 1, dynamicBytes, nullptr, params,
                     nullptr, 2);
  }
  void unload() {
    mgpuModuleUnload(module);
    module = function = nullptr;
  }
  ~SharedSumKernel() {
    if (module)
      unload();
  }
};

TEST(CudaDeviceWrappers, StaticPlusDynamicSharedMemoryOver48KiB) {
  REQUIRE_DEVICE();
  // 40 KiB static + 16 KiB dynamic: the dynamic part alone is under the
  // default 48 KiB, the sum is not, so the launch needs the opt-in.
  SharedSumKernel kernel;
  ASSERT_NE(kernel.function, nullptr) << lastMessage();
  DeviceArray out(LINFUSE_F32, {1});
  for (int32_t dynamicBytes : {16 * 1024, 4, 64 * 1024}) {
    SCOPED_TRACE(std::to_string(dynamicBytes) + " dynamic bytes");
    out.fill(-1.0);
    linfuse_clear_error();
    kernel.launch(out, dynamicBytes);
    ASSERT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
    EXPECT_EQ(out.download().store[0], 3.0);
  }
  kernel.unload();
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceWrappers, ConcurrentLaunchesNeverLowerTheSharedMemoryLimit) {
  REQUIRE_DEVICE();
  // One thread launches with 64 KiB of dynamic shared memory (over the
  // default with the static 40 KiB), the other with 4 bytes, concurrently:
  // the small launches must not lower the limit the large ones set.
  SharedSumKernel kernel;
  ASSERT_NE(kernel.function, nullptr) << lastMessage();
  DeviceArray large(LINFUSE_F32, {1}), small(LINFUSE_F32, {1});
  auto launches = [&](DeviceArray &out, int32_t dynamicBytes) {
    linfuse_clear_error();
    for (int i = 0; i < 500 && linfuse_last_error() == LINFUSE_OK; ++i)
      kernel.launch(out, dynamicBytes);
    EXPECT_EQ(linfuse_last_error(), LINFUSE_OK)
        << dynamicBytes << " bytes: " << lastMessage();
  };
  std::thread other([&] { launches(small, 4); });
  launches(large, 64 * 1024);
  other.join();
  EXPECT_EQ(large.download().store[0], 3.0);
  EXPECT_EQ(small.download().store[0], 3.0);
  kernel.unload();
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

TEST(CudaDeviceWrappers, MemsetAndCopies) {
  REQUIRE_DEVICE();
  DeviceArray data(LINFUSE_F32, {1000});
  mgpuMemset32(data.device, floatBits(1.5f), 1000, nullptr);
  for (double v : data.download().store)
    ASSERT_EQ(v, 1.5);
  EXPECT_EQ(mgpuMemAlloc(0, nullptr, false), nullptr);
  EXPECT_EQ(linfuse_last_error(), LINFUSE_OK) << lastMessage();
}

} // namespace
