//===- RuntimeTest.cpp - liblinfuse_runtime host backend tests -----------===//
//
// Links only liblinfuse_runtime and GoogleTest (no MLIR), so it also proves
// that the runtime loads without MLIR. Results are checked against a naive
// double-precision reference; the test has its own f16/bf16 codecs so it
// does not trust the runtime's.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kPi = 3.14159265358979323846;
// The flag bits as int32_t, so that they mix in initializer lists.
constexpr int32_t kTransA = LINFUSE_GEMM_TRANSPOSE_A;
constexpr int32_t kTransB = LINFUSE_GEMM_TRANSPOSE_B;
constexpr int32_t kTransBoth = kTransA | kTransB;

//===----------------------------------------------------------------------===//
// Element codecs (decoding is exact; encoding only takes exact values)
//===----------------------------------------------------------------------===//

template <typename To, typename From> To bitCast(From from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast between sizes");
  To to;
  std::memcpy(&to, &from, sizeof(to));
  return to;
}

double decodeHalf(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                     : exponent == 31
                         ? (mantissa ? kNaN : INFINITY)
                         : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

uint16_t encodeHalfExact(double v) {
  if (std::isnan(v))
    return 0x7e00;
  if (v == 0)
    return std::signbit(v) ? 0x8000 : 0;
  int e;
  double m = std::frexp(std::fabs(v), &e); // |v| = (2m) * 2^(e-1)
  int biased = e + 14;
  double fraction = std::ldexp(2 * m, 10) - 1024;
  if (biased < 1 || biased > 30 || fraction != std::floor(fraction))
    ADD_FAILURE() << v << " is not a normal f16";
  return uint16_t((v < 0 ? 0x8000 : 0) | (biased << 10) | int(fraction));
}

uint16_t encodeBFloatExact(double v) {
  if (std::isnan(v))
    return 0x7fc0;
  uint32_t bits = bitCast<uint32_t>(float(v));
  if (double(float(v)) != v || (bits & 0xffff))
    ADD_FAILURE() << v << " is not a bf16";
  return uint16_t(bits >> 16);
}

//===----------------------------------------------------------------------===//
// Memrefs
//===----------------------------------------------------------------------===//

/// A ranked memref descriptor for rank <= 3, laid out as MLIR lays out the
/// descriptor of that rank: the strides follow the `rank` sizes directly.
struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizesAndStrides[6];
};
static_assert(offsetof(Descriptor, sizesAndStrides) ==
                  offsetof(linfuse_memref_view, sizes_and_strides),
              "descriptor layout");

/// A strided view (rank 1 to 3) over a buffer of its own. The buffer holds
/// everything from element 0 to the view's last element, so views with
/// padding have neighbours that must stay untouched.
class Tensor {
public:
  Tensor(linfuse_dtype type, std::vector<int64_t> sizes,
         std::vector<int64_t> strides, int64_t offset = 0)
      : type(type), sizes(std::move(sizes)), strides(std::move(strides)),
        offset(offset) {
    int64_t last = offset;
    bool empty = false;
    for (size_t d = 0; d < this->sizes.size(); ++d) {
      empty |= this->sizes[d] == 0;
      last += (this->sizes[d] - 1) * this->strides[d];
    }
    bytes.assign((empty ? offset : last + 1) * elementSize(), 0);
  }

  static Tensor contiguous(linfuse_dtype type, std::vector<int64_t> sizes) {
    std::vector<int64_t> strides(sizes.size());
    int64_t stride = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= sizes[d];
    }
    return Tensor(type, std::move(sizes), std::move(strides));
  }

  int64_t rank() const { return int64_t(sizes.size()); }
  int64_t elementSize() const { return type == LINFUSE_F32 ? 4 : 2; }
  int64_t storageSize() const { return int64_t(bytes.size()) / elementSize(); }

  double raw(int64_t k) const {
    if (type == LINFUSE_F32) {
      float f;
      std::memcpy(&f, &bytes[k * 4], 4);
      return f;
    }
    uint16_t h = rawBits(k);
    return type == LINFUSE_F16 ? decodeHalf(h)
                               : bitCast<float>(uint32_t(h) << 16);
  }
  uint16_t rawBits(int64_t k) const {
    uint16_t h;
    std::memcpy(&h, &bytes[k * 2], 2);
    return h;
  }
  void setRaw(int64_t k, double v) {
    if (type == LINFUSE_F32) {
      float f = float(v);
      std::memcpy(&bytes[k * 4], &f, 4);
      return;
    }
    uint16_t h =
        type == LINFUSE_F16 ? encodeHalfExact(v) : encodeBFloatExact(v);
    std::memcpy(&bytes[k * 2], &h, 2);
  }

  /// Storage index of element (b, i, j); lower ranks ignore the leading
  /// indices.
  int64_t index(int64_t b, int64_t i, int64_t j) const {
    const int64_t idx[3] = {b, i, j};
    int64_t k = offset;
    for (int64_t d = 0; d < rank(); ++d)
      k += idx[3 - rank() + d] * strides[d];
    return k;
  }
  double at(int64_t b, int64_t i, int64_t j) const {
    return raw(index(b, i, j));
  }
  void set(int64_t b, int64_t i, int64_t j, double v) {
    setRaw(index(b, i, j), v);
  }

  void *desc() {
    descriptor.allocated = descriptor.aligned =
        nullData ? nullptr : bytes.data();
    descriptor.offset = offset;
    for (int64_t d = 0; d < rank(); ++d) {
      descriptor.sizesAndStrides[d] = sizes[d];
      descriptor.sizesAndStrides[rank() + d] = strides[d];
    }
    return &descriptor;
  }

  linfuse_dtype type;
  std::vector<int64_t> sizes, strides;
  int64_t offset;
  std::vector<uint8_t> bytes;
  bool nullData = false;

private:
  Descriptor descriptor;
};

/// `t` with its whole buffer (padding too) filled with multiples of 1/8 in [-2,
/// 2]: exact in f16 and bf16, and their products sum exactly in f32.
Tensor randomized(Tensor t, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 12345;
  for (int64_t k = 0; k < t.storageSize(); ++k) {
    state = state * 1664525u + 1013904223u;
    t.setRaw(k, (int((state >> 16) % 33) - 16) / 8.0);
  }
  return t;
}

void fillAll(Tensor &t, double v) {
  for (int64_t k = 0; k < t.storageSize(); ++k)
    t.setRaw(k, v);
}

//===----------------------------------------------------------------------===//
// Calls and checks
//===----------------------------------------------------------------------===//

struct Gemm {
  linfuse_dtype abType = LINFUSE_F32, cType = LINFUSE_F32;
  int32_t flags = 0;
  int32_t epilogue = LINFUSE_EPILOGUE_NONE;
  float alpha = 1.0f, beta = 0.0f;

  /// Without a bias, C is passed again in its place (as the header allows).
  int32_t run(Tensor &a, Tensor &b, Tensor &c, Tensor *bias = nullptr) const {
    Tensor &biasArg = bias ? *bias : c;
    return linfuse_cpu_gemm(a.rank(), a.desc(), b.rank(), b.desc(),
                            biasArg.rank(), biasArg.desc(), c.rank(), c.desc(),
                            abType, cType, flags, epilogue, alpha, beta);
  }
};

double epilogueRef(int32_t epilogue, double x) {
  switch (epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return x < 0 ? 0 : x;
  case LINFUSE_EPILOGUE_GELU_ERF:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case LINFUSE_EPILOGUE_GELU_TANH:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
  case LINFUSE_EPILOGUE_SILU:
    return x / (1 + std::exp(-x));
  default:
    return x;
  }
}

/// The rows x k matrix op(t) of batch `bi` in double, row-major: element
/// (i, l) is t(bi, l, i) where `transposed`, t(bi, i, l) otherwise.
std::vector<double> widened(const Tensor &t, int64_t bi, int64_t rows,
                            int64_t k, bool transposed) {
  std::vector<double> out(size_t(rows * k));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t l = 0; l < k; ++l)
      out[size_t(i * k + l)] = transposed ? t.at(bi, l, i) : t.at(bi, i, l);
  return out;
}

/// epilogue(alpha * op(A) op(B) + beta * C + bias) in double, per (b, i, j).
/// A and B are widened once per batch, so the products of the big weights
/// (67 MB) take seconds, not minutes, under the sanitizers.
std::vector<double> reference(const Gemm &g, const Tensor &a, const Tensor &b,
                              const Tensor &c, const Tensor *bias) {
  int64_t r = c.rank();
  int64_t batch = r == 3 ? c.sizes[0] : 1, m = c.sizes[r - 2],
          n = c.sizes[r - 1];
  bool transA = g.flags & LINFUSE_GEMM_TRANSPOSE_A;
  bool transB = g.flags & LINFUSE_GEMM_TRANSPOSE_B;
  int64_t k = transA ? a.sizes[r - 2] : a.sizes[r - 1];
  std::vector<double> out;
  for (int64_t bi = 0; bi < batch; ++bi) {
    std::vector<double> rowsA = widened(a, bi, m, k, transA);
    std::vector<double> colsB = widened(b, bi, n, k, !transB);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double *x = rowsA.data() + i * k, *y = colsB.data() + j * k;
        double acc = 0;
        for (int64_t l = 0; l < k; ++l)
          acc += x[l] * y[l];
        double v = double(g.alpha) * acc;
        if (g.beta != 0)
          v += double(g.beta) * c.at(bi, i, j);
        if (bias)
          v += bias->at(0, 0, j);
        out.push_back(epilogueRef(g.epilogue, v));
      }
  }
  return out;
}

/// Within rounding to C's type (about 1 ulp) plus f32 accumulation.
void expectClose(const Tensor &c, const std::vector<double> &ref) {
  double rel = c.type == LINFUSE_F32   ? 1e-5
               : c.type == LINFUSE_F16 ? 0x1p-10
                                       : 0x1p-7;
  int64_t r = c.rank();
  int64_t batch = r == 3 ? c.sizes[0] : 1;
  size_t n = 0, failures = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < c.sizes[r - 2]; ++i)
      for (int64_t j = 0; j < c.sizes[r - 1]; ++j) {
        double got = c.at(b, i, j), want = ref[n++];
        bool ok = std::isnan(want)
                      ? std::isnan(got)
                      : std::fabs(got - want) <= rel * std::fabs(want) + 1e-5;
        if (!ok && failures++ < 10)
          ADD_FAILURE() << "C(" << b << ", " << i << ", " << j << ") = " << got
                        << ", expected " << want;
      }
  EXPECT_EQ(n, ref.size());
}

/// Every buffer element outside the view is bit-for-bit unchanged.
void expectOutsideViewUnchanged(const Tensor &before, const Tensor &after) {
  std::vector<bool> inView(before.storageSize(), false);
  int64_t r = before.rank();
  int64_t batch = r == 3 ? before.sizes[0] : 1;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < before.sizes[r - 2]; ++i)
      for (int64_t j = 0; j < before.sizes[r - 1]; ++j)
        inView[before.index(b, i, j)] = true;
  int64_t size = before.elementSize();
  for (int64_t k = 0; k < before.storageSize(); ++k) {
    if (inView[k])
      continue;
    ASSERT_EQ(
        0, std::memcmp(&before.bytes[k * size], &after.bytes[k * size], size))
        << "element " << k << " outside the view changed";
  }
}

/// Runs `g`, expects success, the reference result in C's view, nothing
/// else of C's buffer changed and the inputs unchanged.
void runAndCheck(const Gemm &g, Tensor &a, Tensor &b, Tensor &c,
                 Tensor *bias = nullptr) {
  const Tensor a0 = a, b0 = b, c0 = c;
  std::vector<double> ref = reference(g, a, b, c, bias);
  ASSERT_EQ(LINFUSE_OK, g.run(a, b, c, bias)) << linfuse_last_error_message();
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
  expectClose(c, ref);
  expectOutsideViewUnchanged(c0, c);
  EXPECT_EQ(a0.bytes, a.bytes) << "A changed";
  EXPECT_EQ(b0.bytes, b.bytes) << "B changed";
}

/// Contiguous operands for op(A): M x K, op(B): K x N, C: M x N.
struct Operands {
  Tensor a, b, c;
};
Operands contiguousOperands(linfuse_dtype abType, linfuse_dtype cType,
                            int32_t flags, int64_t m, int64_t n, int64_t k,
                            std::vector<int64_t> batch = {}) {
  auto shape = [&](int64_t rows, int64_t cols, bool trans) {
    std::vector<int64_t> sizes = batch;
    sizes.push_back(trans ? cols : rows);
    sizes.push_back(trans ? rows : cols);
    return sizes;
  };
  return {
      randomized(Tensor::contiguous(abType, shape(m, k, flags & kTransA)), 1),
      randomized(Tensor::contiguous(abType, shape(k, n, flags & kTransB)), 2),
      randomized(Tensor::contiguous(cType, shape(m, n, false)), 3)};
}

class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    linfuse_clear_error();
    linfuse_reset_stats();
  }
};

//===----------------------------------------------------------------------===//
// f32
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, F32Plain) {
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 5, 3, 7);
  runAndCheck(Gemm{}, ops.a, ops.b, ops.c);
}

TEST_F(RuntimeTest, F32Transposes) {
  for (int32_t flags : {kTransA, kTransB, kTransBoth}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, flags, 6, 4, 9);
    Gemm g;
    g.flags = flags;
    runAndCheck(g, ops.a, ops.b, ops.c);
  }
}

/// A constant f16/bf16 B on the fallback path (alpha != 1 sends every
/// problem there, on any CPU) is widened to f32 once and that copy is used
/// until linfuse_cpu_release_packed_weights: new values at the same address
/// are not read before it, and are after. Both layouts, 2-d and batched
/// (per-batch weights and one weight shared by the batch).
TEST_F(RuntimeTest, ConstantNarrowWeightsAreWidenedOnceOnTheFallback) {
  for (linfuse_dtype type : {LINFUSE_F16, LINFUSE_BF16})
    for (int32_t trans : {int32_t(kTransB), 0})
      for (int batching = 0; batching < 3; ++batching) {
        SCOPED_TRACE("type " + std::to_string(type) + " trans " +
                     std::to_string(trans) + " batching " +
                     std::to_string(batching));
        int32_t flags = trans | LINFUSE_GEMM_CONSTANT_B;
        Operands ops = contiguousOperands(type, LINFUSE_F32, flags, 5, 24, 16,
                                          batching ? std::vector<int64_t>{3}
                                                   : std::vector<int64_t>{});
        if (batching == 2) { // one weight for the batch: batch stride 0
          ops.b.sizes[0] = 3;
          ops.b.strides[0] = 0;
        }
        Gemm g;
        g.abType = type;
        g.flags = flags;
        g.alpha = 0.5f;
        linfuse_reset_stats();
        runAndCheck(g, ops.a, ops.b, ops.c); // widens B
        const Tensor oldB = ops.b;
        ops.b = randomized(std::move(ops.b), 11); // same buffer, new values
        std::vector<double> stale = reference(g, ops.a, oldB, ops.c, nullptr);
        ASSERT_EQ(LINFUSE_OK, g.run(ops.a, ops.b, ops.c))
            << linfuse_last_error_message();
        expectClose(ops.c, stale); // the copy, not the new values
        linfuse_cpu_release_packed_weights();
        runAndCheck(g, ops.a, ops.b, ops.c); // widened again: new values
        linfuse_cpu_release_packed_weights();
        linfuse_runtime_stats stats;
        linfuse_get_stats(&stats);
        EXPECT_EQ(3, stats.fallback_gemm_calls);
      }
}

/// Whether the CPU has oneDNN 3's f16 matmul kernels (AVX512-FP16 or
/// AMX-FP16; not AMD Zen 4, where f16 takes the widening fallback).
bool cpuHasF16Kernels() {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  text << in.rdbuf();
  std::string flags = text.str();
  for (const char *flag : {" avx512_fp16", " amx_fp16"})
    if (flags.find(flag) != std::string::npos)
      return true;
  return false;
}

/// A constant B (a weight) is reordered once and that copy is used on later
/// calls; after linfuse_cpu_release_packed_weights, new values at the same
/// address are read again. f32 (oneDNN 2), bf16 (AMX's layout; oneDNN 3 at
/// M > 1) and f16 (oneDNN 3), B transposed as an nn.Linear weight is or
/// not, with a bias of C's type, M > 1 (where the reordering applies) and
/// M = 1.
TEST_F(RuntimeTest, ConstantWeightsAreReorderedAndReleased) {
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16, LINFUSE_F16})
    for (linfuse_dtype cType : {LINFUSE_F32, type})
      for (int32_t trans : {int32_t(kTransB), 0})
        for (int64_t m : {16, 1}) {
          SCOPED_TRACE("type " + std::to_string(type) + " c " +
                       std::to_string(cType) + " trans " +
                       std::to_string(trans) + " m " + std::to_string(m));
          int32_t flags =
              trans | LINFUSE_GEMM_CONSTANT_B | LINFUSE_GEMM_HAS_BIAS;
          Operands ops = contiguousOperands(type, cType, flags, m, 96, 64);
          Tensor bias = randomized(Tensor::contiguous(cType, {96}), 44);
          Gemm g;
          g.abType = type;
          g.cType = cType;
          g.flags = flags;
          runAndCheck(g, ops.a, ops.b, ops.c, &bias);
          runAndCheck(g, ops.a, ops.b, ops.c, &bias); // the reordered copy
          const uint8_t *address = ops.b.bytes.data();
          ops.b = randomized(std::move(ops.b), 7); // same buffer, new values
          ASSERT_EQ(address, ops.b.bytes.data());
          linfuse_cpu_release_packed_weights();
          runAndCheck(g, ops.a, ops.b, ops.c, &bias);
          linfuse_cpu_release_packed_weights();
          linfuse_runtime_stats stats;
          linfuse_get_stats(&stats);
          if (type != LINFUSE_F16 || cpuHasF16Kernels())
            EXPECT_EQ(0, stats.fallback_gemm_calls) << "not on oneDNN";
        }
}

/// The reordered copy is what later calls read: new values at the same
/// address are not seen until linfuse_cpu_release_packed_weights (the
/// contract of LINFUSE_GEMM_CONSTANT_B), on oneDNN 2 (f32) and 3 (bf16).
TEST_F(RuntimeTest, ReorderedWeightsAreReusedUntilReleased) {
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16}) {
    SCOPED_TRACE("type " + std::to_string(type));
    int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
    Operands ops = contiguousOperands(type, LINFUSE_F32, flags, 16, 96, 64);
    Gemm g;
    g.abType = type;
    g.flags = flags;
    runAndCheck(g, ops.a, ops.b, ops.c);
    const std::vector<uint8_t> first = ops.c.bytes;
    ops.b = randomized(std::move(ops.b), 9); // same buffer, new values
    ASSERT_EQ(LINFUSE_OK, g.run(ops.a, ops.b, ops.c));
    // With $LINFUSE_REORDER_WEIGHTS=0 nothing is copied: B is read as it is.
    const char *reorder = std::getenv("LINFUSE_REORDER_WEIGHTS");
    if (reorder && std::string(reorder) == "0")
      EXPECT_NE(first, ops.c.bytes) << "old values read without a copy";
    else
      EXPECT_EQ(first, ops.c.bytes) << "the new values were read: no reuse";
    linfuse_cpu_release_packed_weights();
    runAndCheck(g, ops.a, ops.b, ops.c); // the new values now
    EXPECT_NE(first, ops.c.bytes);
    linfuse_cpu_release_packed_weights();
  }
}

/// linfuse_cpu_release_packed_weights_in drops the copies of the weights
/// that start in its range and keeps the others: two weights with copies,
/// both changed in place, only the released one's new values are read. f32
/// (oneDNN 2), bf16 (oneDNN 3; f16 where widened on the fallback, whose
/// copies it drops too), at M = 16 (reordered) and M = 1, in the default
/// mode whatever $LINFUSE_REORDER_WEIGHTS says.
TEST_F(RuntimeTest, ReleasingARangeKeepsTheOtherCopies) {
  int32_t mode = linfuse_cpu_set_weight_reorder(LINFUSE_REORDER_ABOVE_ONE_ROW);
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16, LINFUSE_F16})
    for (int64_t m : {16, 1}) {
      if (type == LINFUSE_F32 && m == 1)
        continue; // f32 reads one-row products from the plain values
      SCOPED_TRACE("type " + std::to_string(type) + " m " + std::to_string(m));
      int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
      Operands x = contiguousOperands(type, LINFUSE_F32, flags, m, 96, 64);
      Operands y = contiguousOperands(type, LINFUSE_F32, flags, m, 96, 64);
      Gemm g;
      g.abType = type;
      g.flags = flags;
      runAndCheck(g, x.a, x.b, x.c);
      runAndCheck(g, y.a, y.b, y.c);
      const Tensor oldY = y.b;
      x.b = randomized(std::move(x.b), 21); // same buffers, new values
      y.b = randomized(std::move(y.b), 22);
      linfuse_cpu_release_packed_weights_in(x.b.bytes.data(),
                                            int64_t(x.b.bytes.size()));
      linfuse_runtime_stats before, after;
      linfuse_get_stats(&before);
      runAndCheck(g, x.a, x.b, x.c); // x's new values
      std::vector<double> stale = reference(g, y.a, oldY, y.c, nullptr);
      ASSERT_EQ(LINFUSE_OK, g.run(y.a, y.b, y.c))
          << linfuse_last_error_message();
      linfuse_get_stats(&after);
      // y still reads its copy (the old values): kept. (Where B is read in
      // its plain layout, at one row on oneDNN, there is no copy to keep.)
      bool copied = after.weight_reorders > before.weight_reorders ||
                    after.fallback_gemm_calls > before.fallback_gemm_calls;
      if (m > 1)
        EXPECT_TRUE(copied) << "no copy at 16 rows: nothing tested";
      if (copied)
        expectClose(y.c, stale);
      EXPECT_LE(after.weight_reorders - before.weight_reorders, 1)
          << "only x's weight is reordered again";
      linfuse_cpu_release_packed_weights();
    }
  linfuse_cpu_set_weight_reorder(mode);
}

/// Offset in `w` of its first whole page.
size_t firstWholePage(const uint8_t *w, size_t page) {
  auto p = reinterpret_cast<uintptr_t>(w);
  return (p + page - 1) / page * page - p;
}

/// After a hand-over of `b` (N x K at `b`'s buffer, whose plain values
/// were `original`): products of 1, 3, 16 and 40 rows (up to 16 for a big
/// weight: the double-precision reference takes long), before and after
/// linfuse_cpu_release_packed_weights, read the copy and match `original`.
void expectEveryRowCountReadsTheCopy(const Gemm &g, linfuse_dtype type,
                                     int64_t n, int64_t k,
                                     const Tensor &original, Tensor &b) {
  for (bool release : {false, true}) {
    if (release)
      linfuse_cpu_release_packed_weights();
    for (int64_t m : {1, 3, 16, 40}) {
      if (n > 1000 && m > 16)
        continue;
      SCOPED_TRACE("m " + std::to_string(m) + (release ? " released" : ""));
      Tensor a = randomized(Tensor::contiguous(type, {m, k}), 11);
      Tensor c = Tensor::contiguous(LINFUSE_F32, {m, n});
      std::vector<double> expected = reference(g, a, original, c, nullptr);
      ASSERT_EQ(LINFUSE_OK, g.run(a, b, c)) << linfuse_last_error_message();
      expectClose(c, expected);
    }
  }
}

/// A B broadcast over a batch at the handed-over address `w` (N x K): no
/// copy serves it, so the product fails, saying why, instead of reading
/// the bytes there (dropped, or the copy's).
void expectBatchedProductFailsAt(uint8_t *w, linfuse_dtype type, int64_t n,
                                 int64_t k, int32_t flags) {
  Tensor a3 = randomized(Tensor::contiguous(type, {2, 4, k}), 12);
  Tensor b3(type, {2, n, k}, {0, k, 1});
  auto *view = static_cast<Descriptor *>(b3.desc());
  view->allocated = view->aligned = w;
  Tensor c3 = Tensor::contiguous(LINFUSE_F32, {2, 4, n});
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_cpu_gemm(3, a3.desc(), 3, view, 3, c3.desc(), 3, c3.desc(),
                             type, LINFUSE_F32, flags, LINFUSE_EPILOGUE_NONE,
                             1.0f, 0.0f));
  EXPECT_NE(nullptr, std::strstr(linfuse_last_error_message(), "handed over"))
      << linfuse_last_error_message();
  linfuse_clear_error();
}

/// LINFUSE_REORDER_ALWAYS: one-row products read the reordered copy too,
/// so a caller may hand the plain values over. Where oneDNN's layout takes
/// more bytes than the plain values (dimensions that are not multiples of
/// its blocks: here N), the first GEMM makes the copy in new memory and
/// drops the whole pages of the plain values (they read as zeros
/// then); every M is served from the copy after that (the plain buffer
/// holds other values: a read of it would show), the copy survives
/// linfuse_cpu_release_packed_weights, and a product no copy serves (a
/// batched one) fails with a message instead of reading the dropped
/// values. f32 (oneDNN 2) and bf16 (3), first at one row and at 16 (the
/// big weight: one row); a small weight, and one of 33 and 67 MB that is
/// reordered (and dropped) in 2 or 3 slices (Slicing::kSliceBytes).
TEST_F(RuntimeTest, HandedOverWeightsAreReadOnlyFromTheirCopies) {
  int32_t before = linfuse_cpu_set_weight_reorder(LINFUSE_REORDER_ALWAYS);
  ASSERT_GE(before, 0);
  EXPECT_EQ(-1, linfuse_cpu_set_weight_reorder(7));
  EXPECT_EQ(LINFUSE_REORDER_ALWAYS, linfuse_cpu_get_weight_reorder());
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_cpu_hand_over_weights(nullptr, 64));
  linfuse_clear_error();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  struct Shape {
    int64_t n, k;
    std::vector<int64_t> firstRows; // the big one: one row only (time)
  };
  for (const Shape &shape : {Shape{200, 64, {1, 16}}, Shape{16400, 1024, {1}}})
    for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16})
      for (int64_t first : shape.firstRows) {
        SCOPED_TRACE("type " + std::to_string(type) + " first m " +
                     std::to_string(first) + " n " + std::to_string(shape.n));
        const int64_t n = shape.n, k = shape.k;
        int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
        Operands ops =
            contiguousOperands(type, LINFUSE_F32, flags, first, n, k);
        Gemm g;
        g.abType = type;
        g.flags = flags;
        uint8_t *w = ops.b.bytes.data();
        int64_t bytes = int64_t(ops.b.bytes.size());
        const Tensor original = ops.b;
        EXPECT_EQ(0, linfuse_cpu_weights_reordered(w, bytes));
        ASSERT_EQ(LINFUSE_OK, linfuse_cpu_hand_over_weights(w, bytes));
        std::vector<double> want =
            reference(g, ops.a, original, ops.c, nullptr);
        ASSERT_EQ(LINFUSE_OK, g.run(ops.a, ops.b, ops.c))
            << linfuse_last_error_message();
        expectClose(ops.c, want);
        ASSERT_EQ(1, linfuse_cpu_weights_reordered(w, bytes));
        EXPECT_EQ(0, linfuse_cpu_weights_reordered(w, bytes + 1));
        // The whole pages of the plain values left memory: zeros now (the
        // first and the last).
        size_t firstPage = firstWholePage(w, page);
        size_t lastPage =
            (reinterpret_cast<uintptr_t>(w) + size_t(bytes)) / page * page -
            page - reinterpret_cast<uintptr_t>(w);
        ASSERT_LE(firstPage, lastPage);
        for (size_t at : {firstPage, lastPage})
          EXPECT_EQ(std::vector<uint8_t>(page, 0),
                    std::vector<uint8_t>(w + at, w + at + page))
              << "page at byte " << at;
        ops.b = randomized(std::move(ops.b), 5); // same buffer, new values
        ASSERT_EQ(w, ops.b.bytes.data());
        expectEveryRowCountReadsTheCopy(g, type, n, k, original, ops.b);
        expectBatchedProductFailsAt(w, type, n, k, flags);
        linfuse_cpu_forget_weights(w, bytes);
        EXPECT_EQ(0, linfuse_cpu_weights_reordered(w, bytes));
      }
  linfuse_cpu_set_weight_reorder(before);
}

/// Page faults this process has taken without I/O (first touches).
long minorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

/// Where oneDNN's layout takes exactly the plain values' bytes (N and K
/// multiples of its blocks) and a handed-over weight is sliced along the
/// layout's outermost dimension, the copy is written over the plain values
/// (InPlace): no new memory (the first GEMM on a 67 MB weight touches
/// fewer new pages than half of it: a copy in new memory would touch all
/// of them, at ~2 us each on the VMs measured), the buffer holds
/// other bytes than the plain values but not the zeros of dropped pages,
/// and every M, before and after linfuse_cpu_release_packed_weights, reads
/// it correctly. A range handed over short of the weight's last byte is
/// not overwritten (the copy goes to new memory and whole pages are
/// dropped, as above). f32 (oneDNN 2) and bf16 (3); a weight of one slice
/// (InPlace::kSliceBytes) and one of many.
TEST_F(RuntimeTest, HandedOverWeightsAreReorderedInPlace) {
  int32_t before = linfuse_cpu_set_weight_reorder(LINFUSE_REORDER_ALWAYS);
  ASSERT_GE(before, 0);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  struct Shape {
    int64_t n, k, first;
  };
  for (const Shape &shape :
       {Shape{192, 64, 16}, Shape{192, 64, 1}, Shape{16448, 1024, 1}})
    for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16})
      for (bool whole : {true, false}) {
        SCOPED_TRACE("type " + std::to_string(type) + " first m " +
                     std::to_string(shape.first) + " n " +
                     std::to_string(shape.n) + (whole ? "" : " short"));
        const int64_t n = shape.n, k = shape.k;
        bool big = n > 1000;
        if (!whole && !big)
          continue;
        int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
        Operands ops =
            contiguousOperands(type, LINFUSE_F32, flags, shape.first, n, k);
        Gemm g;
        g.abType = type;
        g.flags = flags;
        uint8_t *w = ops.b.bytes.data();
        int64_t bytes = int64_t(ops.b.bytes.size());
        const Tensor original = ops.b;
        ASSERT_EQ(LINFUSE_OK,
                  linfuse_cpu_hand_over_weights(w, whole ? bytes : bytes - 1));
        std::vector<double> want =
            reference(g, ops.a, original, ops.c, nullptr);
        long faults = minorFaults();
        ASSERT_EQ(LINFUSE_OK, g.run(ops.a, ops.b, ops.c))
            << linfuse_last_error_message();
        faults = minorFaults() - faults;
        expectClose(ops.c, want);
        ASSERT_EQ(1, linfuse_cpu_weights_reordered(w, bytes));
        size_t firstPage = firstWholePage(w, page);
        bool zeros = std::vector<uint8_t>(page, 0) ==
                     std::vector<uint8_t>(w + firstPage, w + firstPage + page);
        if (!whole) {
          EXPECT_TRUE(zeros) << "the short range was overwritten";
          EXPECT_GT(faults, bytes / long(page) / 2)
              << "a copy in new memory touches its pages";
        } else {
          EXPECT_FALSE(zeros) << "pages dropped: not reordered in place";
          EXPECT_NE(original.bytes, ops.b.bytes)
              << "the plain values are still there";
          if (big)
            EXPECT_LT(faults, bytes / long(page) / 2)
                << "the first GEMM touched " << faults << " new pages";
        }
        expectEveryRowCountReadsTheCopy(g, type, n, k, original, ops.b);
        expectBatchedProductFailsAt(w, type, n, k, flags);
        linfuse_cpu_forget_weights(w, bytes);
        EXPECT_EQ(0, linfuse_cpu_weights_reordered(w, bytes));
      }
  linfuse_cpu_set_weight_reorder(before);
}

/// A handed-over weight in memory the runtime must not write is reordered
/// into new memory, never over its bytes: a read-only private mapping of a
/// file (writing would fault) and a writable shared one (writing would
/// change the file). Both files keep their bytes, and the products are
/// right.
TEST_F(RuntimeTest, HandedOverWeightsInFilesAreNotOverwritten) {
  int32_t before = linfuse_cpu_set_weight_reorder(LINFUSE_REORDER_ALWAYS);
  ASSERT_GE(before, 0);
  for (bool shared : {false, true})
    for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16}) {
      SCOPED_TRACE(std::string(shared ? "shared" : "read-only") + " type " +
                   std::to_string(type));
      const int64_t n = 256, k = 256;
      int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
      Operands ops = contiguousOperands(type, LINFUSE_F32, flags, 16, n, k);
      const std::vector<uint8_t> plain = ops.b.bytes;
      char path[] = "/tmp/linfuse-handed-XXXXXX";
      int fd = mkstemp(path);
      ASSERT_GE(fd, 0);
      unlink(path);
      ASSERT_EQ(ssize_t(plain.size()), write(fd, plain.data(), plain.size()));
      void *mapped = mmap(nullptr, plain.size(),
                          shared ? PROT_READ | PROT_WRITE : PROT_READ,
                          shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
      ASSERT_NE(MAP_FAILED, mapped);
      Tensor b3(type, {n, k}, {k, 1});
      auto *view = static_cast<Descriptor *>(b3.desc());
      view->allocated = view->aligned = mapped;
      ASSERT_EQ(LINFUSE_OK,
                linfuse_cpu_hand_over_weights(mapped, int64_t(plain.size())));
      Gemm g;
      g.abType = type;
      g.flags = flags;
      std::vector<double> want = reference(g, ops.a, ops.b, ops.c, nullptr);
      ASSERT_EQ(LINFUSE_OK,
                linfuse_cpu_gemm(2, ops.a.desc(), 2, view, 2, ops.c.desc(), 2,
                                 ops.c.desc(), type, LINFUSE_F32, flags,
                                 LINFUSE_EPILOGUE_NONE, 1.0f, 0.0f))
          << linfuse_last_error_message();
      expectClose(ops.c, want);
      std::vector<uint8_t> file(plain.size());
      ASSERT_EQ(ssize_t(file.size()), pread(fd, file.data(), file.size(), 0));
      EXPECT_EQ(plain, file) << "the file changed";
      linfuse_cpu_forget_weights(mapped, int64_t(plain.size()));
      munmap(mapped, plain.size());
      close(fd);
    }
  linfuse_cpu_set_weight_reorder(before);
}

/// Whichever way a handed-over weight is reordered (over its own bytes, or
/// elsewhere with its pages dropped), every product reads it correctly:
/// weights stored N x K (nn.Linear's) and K x N, dimensions that are
/// multiples of oneDNN's blocks and ones that are not (padded layouts),
/// a single block, f32, bf16 and f16, first used at one row or at many,
/// then at up to 200 rows (where oneDNN may choose another layout, made
/// from the first copy: not on the AMD EPYC, whose f32 and bf16 weights
/// keep one layout for every M); every one-matrix product has a copy to
/// read (LINFUSE_REORDER_ALWAYS).
TEST_F(RuntimeTest, HandedOverWeightsOfManyShapesStayCorrect) {
  int32_t before = linfuse_cpu_set_weight_reorder(LINFUSE_REORDER_ALWAYS);
  ASSERT_GE(before, 0);
  struct Shape {
    int64_t n, k;
  };
  for (const Shape &shape :
       {Shape{64, 64}, Shape{128, 96}, Shape{256, 48}, Shape{320, 640},
        Shape{100, 64}, Shape{64, 40}, Shape{1088, 2048}})
    for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16, LINFUSE_F16})
      for (int32_t trans : {kTransB, 0})
        for (int64_t first : {1, 16}) {
          SCOPED_TRACE("type " + std::to_string(type) + " n " +
                       std::to_string(shape.n) + " k " +
                       std::to_string(shape.k) + (trans ? " NxK" : " KxN") +
                       " first m " + std::to_string(first));
          int32_t flags = trans | LINFUSE_GEMM_CONSTANT_B;
          Operands ops = contiguousOperands(type, LINFUSE_F32, flags, first,
                                            shape.n, shape.k);
          Gemm g;
          g.abType = type;
          g.flags = flags;
          uint8_t *w = ops.b.bytes.data();
          int64_t bytes = int64_t(ops.b.bytes.size());
          const Tensor original = ops.b;
          ASSERT_EQ(LINFUSE_OK, linfuse_cpu_hand_over_weights(w, bytes));
          for (int64_t m :
               {first, int64_t(5), int64_t(1), int64_t(33), int64_t(200)}) {
            if (m > 100 && shape.n * shape.k > 320 * 640)
              continue; // the double-precision reference takes long
            SCOPED_TRACE("m " + std::to_string(m));
            Tensor a = randomized(Tensor::contiguous(type, {m, shape.k}), 7);
            Tensor c = Tensor::contiguous(LINFUSE_F32, {m, shape.n});
            std::vector<double> expected =
                reference(g, a, original, c, nullptr);
            ASSERT_EQ(LINFUSE_OK, g.run(a, ops.b, c))
                << linfuse_last_error_message();
            expectClose(c, expected);
          }
          linfuse_cpu_forget_weights(w, bytes);
        }
  linfuse_cpu_set_weight_reorder(before);
}

TEST_F(RuntimeTest, ConstantWeightsWithoutBias) {
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16})
    for (int64_t m : {16, 1}) {
      SCOPED_TRACE("type " + std::to_string(type) + " m " + std::to_string(m));
      int32_t flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
      Operands ops = contiguousOperands(type, LINFUSE_F32, flags, m, 96, 64);
      Gemm g;
      g.abType = type;
      g.flags = flags;
      runAndCheck(g, ops.a, ops.b, ops.c);
      runAndCheck(g, ops.a, ops.b, ops.c); // the reordered copy
      const uint8_t *address = ops.b.bytes.data();
      ops.b = randomized(std::move(ops.b), 7); // same buffer, new values
      ASSERT_EQ(address, ops.b.bytes.data());
      linfuse_cpu_release_packed_weights();
      runAndCheck(g, ops.a, ops.b, ops.c);
      linfuse_cpu_release_packed_weights();
    }
}

TEST_F(RuntimeTest, F32LargeEnoughForBlockedKernels) {
  for (int32_t flags : {0, kTransBoth}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    Operands ops =
        contiguousOperands(LINFUSE_F32, LINFUSE_F32, flags, 67, 45, 130);
    Gemm g;
    g.flags = flags;
    g.beta = 0.5f;
    runAndCheck(g, ops.a, ops.b, ops.c);
  }
}

TEST_F(RuntimeTest, F32WideNIsComputedInColumnBlocks) {
  // A merged GEMM wider than 4096 columns runs as several BLAS calls over
  // column blocks (B as K x N or as N x K), into a slice of a wider C; the
  // result is the same, and kernel_launches counts the calls.
  const int64_t m = 3, n = 9000, k = 5;
  for (int32_t flags : {0, kTransB}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    linfuse_reset_stats();
    Tensor a = randomized(Tensor::contiguous(LINFUSE_F32, {m, k}), 8);
    Tensor b = randomized(
        Tensor::contiguous(LINFUSE_F32, flags ? std::vector<int64_t>{n, k}
                                              : std::vector<int64_t>{k, n}),
        9);
    Tensor c = randomized({LINFUSE_F32, {m, n}, {n + 7, 1}, 3}, 10);
    Gemm g;
    g.flags = flags;
    g.beta = 0.5f;
    runAndCheck(g, a, b, c);
    linfuse_runtime_stats stats;
    linfuse_get_stats(&stats);
    EXPECT_EQ(1, stats.gemm_calls);
    EXPECT_EQ(3, stats.kernel_launches); // 4096 + 4096 + 808 columns
  }
}

TEST_F(RuntimeTest, F32SlicesOfWiderBuffers) {
  // A merged GEMM's output: C is columns 4..6 of a 5 x 10 buffer; A and B
  // are slices too (lda > K, ldb > N). The neighbours must stay as they are.
  const int64_t m = 5, n = 3, k = 6;
  Tensor a = randomized({LINFUSE_F32, {m, k}, {k + 3, 1}, 2}, 4);
  Tensor b = randomized({LINFUSE_F32, {k, n}, {n + 5, 1}, 1}, 5);
  Tensor c = randomized({LINFUSE_F32, {m, n}, {10, 1}, 4}, 6);
  Gemm g;
  runAndCheck(g, a, b, c);
  // The final pass (bias, epilogue) works in place on the slice too.
  Tensor bias = randomized(Tensor::contiguous(LINFUSE_F32, {n}), 7);
  g.flags = LINFUSE_GEMM_HAS_BIAS;
  g.epilogue = LINFUSE_EPILOGUE_RELU;
  g.beta = 2.0f;
  runAndCheck(g, a, b, c, &bias);
}

TEST_F(RuntimeTest, F32ColumnMajorViews) {
  // Strides [1, rows]: the transpose of a row-major matrix, used in place
  // (C as C^T = op(B)^T op(A)^T).
  const int64_t m = 4, n = 5, k = 3;
  for (int32_t flags : {0, kTransBoth}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    bool transA = flags & LINFUSE_GEMM_TRANSPOSE_A;
    bool transB = flags & LINFUSE_GEMM_TRANSPOSE_B;
    int64_t aRows = transA ? k : m, aCols = transA ? m : k;
    int64_t bRows = transB ? n : k, bCols = transB ? k : n;
    Tensor a = randomized({LINFUSE_F32, {aRows, aCols}, {1, aRows}}, 8);
    Tensor b = randomized({LINFUSE_F32, {bRows, bCols}, {1, bRows}}, 9);
    // Column-major slice.
    Tensor c = randomized({LINFUSE_F32, {m, n}, {1, m + 2}, 1}, 10);
    Tensor bias = randomized(Tensor::contiguous(LINFUSE_F32, {n}), 11);
    Gemm g;
    g.flags = flags;
    g.beta = 0.5f;
    runAndCheck(g, a, b, c);
    g.flags |= LINFUSE_GEMM_HAS_BIAS;
    g.epilogue = LINFUSE_EPILOGUE_SILU;
    runAndCheck(g, a, b, c, &bias);
  }
}

TEST_F(RuntimeTest, F32NonUnitInnerStrideIsCopied) {
  // Every other element: no BLAS layout fits, so A and B are copied and C
  // is computed in a temporary; the interleaved neighbours of C stay.
  const int64_t m = 4, n = 3, k = 5;
  Tensor a = randomized({LINFUSE_F32, {m, k}, {2 * k, 2}}, 12);
  Tensor b = randomized({LINFUSE_F32, {k, n}, {3 * n, 3}}, 13);
  Tensor c = randomized({LINFUSE_F32, {m, n}, {2 * n, 2}, 1}, 14);
  Gemm g;
  g.beta = -1.0f;
  runAndCheck(g, a, b, c);
  g.flags = kTransBoth;
  // Odd strides, no overlap.
  Tensor at = randomized({LINFUSE_F32, {k, m}, {3, 3 * k}}, 15);
  Tensor bt = randomized({LINFUSE_F32, {n, k}, {2 * k, 2}}, 16);
  runAndCheck(g, at, bt, c);
}

TEST_F(RuntimeTest, F32SingleRowAcceptsAnyRowStride) {
  // MLIR may give a size-1 dimension any stride; BLAS still gets ld >= cols.
  const int64_t n = 6, k = 4;
  for (int64_t rowStride : {int64_t(1), int64_t(0), int64_t(1000)}) {
    SCOPED_TRACE("row stride " + std::to_string(rowStride));
    Tensor a = randomized({LINFUSE_F32, {1, k}, {rowStride, 1}}, 17);
    Tensor b = randomized(Tensor::contiguous(LINFUSE_F32, {k, n}), 18);
    Tensor c = randomized({LINFUSE_F32, {1, n}, {rowStride, 1}}, 19);
    Gemm g;
    g.beta = 1.0f;
    runAndCheck(g, a, b, c);
  }
}

/// One row of output (decode) is described to oneDNN so that it runs its
/// matrix-vector kernels, for B stored K x N as well as N x K (a batch
/// stride that does not make B look like a dense 3-d array). The results
/// stay those of the product: f32 and bf16, with and without the weight
/// flag, B whole or a column slice of a wider (merged) weight, with a bias
/// and an epilogue.
TEST_F(RuntimeTest, SingleRowWithEitherWeightLayout) {
  const int64_t n = 320, k = 257, wider = 400;
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16})
    for (int32_t flags : {0, int32_t(kTransB)})
      for (int32_t constant : {0, int32_t(LINFUSE_GEMM_CONSTANT_B)})
        for (bool slice : {false, true}) {
          SCOPED_TRACE("type " + std::to_string(type) + " flags " +
                       std::to_string(flags | constant) + " slice " +
                       std::to_string(slice));
          Tensor a = randomized(Tensor::contiguous(type, {1, k}), 40);
          // A slice: columns 16..16+n of a K x 400 weight (rows of a 400 x K
          // one when transposed).
          int64_t ld = slice ? wider : (flags ? k : n);
          Tensor b = randomized(
              flags ? Tensor(type, {n, k}, {k, 1}, slice ? 16 * k : 0)
                    : Tensor(type, {k, n}, {ld, 1}, slice ? 16 : 0),
              41);
          Tensor c = randomized(Tensor::contiguous(LINFUSE_F32, {1, n}), 42);
          Tensor bias = randomized(Tensor::contiguous(LINFUSE_F32, {n}), 43);
          Gemm g;
          g.abType = type;
          g.cType = LINFUSE_F32;
          g.flags = flags | constant | LINFUSE_GEMM_HAS_BIAS;
          g.epilogue = LINFUSE_EPILOGUE_SILU;
          runAndCheck(g, a, b, c, &bias);
          runAndCheck(g, a, b, c, &bias); // a cached primitive
          linfuse_cpu_release_packed_weights();
        }
}

TEST_F(RuntimeTest, F32Batched) {
  const int64_t batch = 3, m = 4, n = 5, k = 6;
  for (int32_t flags : {0, kTransA, kTransB}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    Operands ops =
        contiguousOperands(LINFUSE_F32, LINFUSE_F32, flags, m, n, k, {batch});
    Gemm g;
    g.flags = flags;
    g.beta = 1.5f;
    runAndCheck(g, ops.a, ops.b, ops.c);
  }
  // Padded batch stride and a column slice per batch element for C.
  Tensor a = randomized({LINFUSE_F32, {batch, m, k}, {m * k + 7, k, 1}}, 20);
  // B broadcast over batch.
  Tensor b = randomized({LINFUSE_F32, {batch, k, n}, {0, n, 1}}, 21);
  Tensor c =
      randomized({LINFUSE_F32, {batch, m, n}, {m * (n + 2), n + 2, 1}, 1}, 22);
  Tensor bias = randomized(Tensor::contiguous(LINFUSE_F32, {n}), 23);
  Gemm g;
  g.flags = LINFUSE_GEMM_HAS_BIAS;
  g.epilogue = LINFUSE_EPILOGUE_GELU_TANH;
  runAndCheck(g, a, b, c, &bias);
}

TEST_F(RuntimeTest, F32Bias) {
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 3, 7, 2);
  // Strided bias.
  Tensor bias = randomized({LINFUSE_F32, {7}, {2}, 1}, 24);
  Gemm g;
  g.flags = LINFUSE_GEMM_HAS_BIAS;
  runAndCheck(g, ops.a, ops.b, ops.c, &bias);
}

/// The 1x1 C = epilogue(alpha * 1 * 1), A, B and C all of `type`.
Tensor scalarGemm(linfuse_dtype type, float alpha, int32_t epilogue) {
  Tensor a = Tensor::contiguous(type, {1, 1});
  Tensor b = Tensor::contiguous(type, {1, 1});
  Tensor c = Tensor::contiguous(type, {1, 1});
  a.set(0, 0, 0, 1.0);
  b.set(0, 0, 0, 1.0);
  Gemm g;
  g.abType = g.cType = type;
  g.alpha = alpha;
  g.epilogue = epilogue;
  EXPECT_EQ(LINFUSE_OK, g.run(a, b, c)) << linfuse_last_error_message();
  return c;
}

TEST_F(RuntimeTest, F32Epilogues) {
  for (int32_t epilogue : {LINFUSE_EPILOGUE_RELU, LINFUSE_EPILOGUE_GELU_ERF,
                           LINFUSE_EPILOGUE_GELU_TANH, LINFUSE_EPILOGUE_SILU}) {
    SCOPED_TRACE("epilogue " + std::to_string(epilogue));
    Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 8, 9, 5);
    Tensor bias = randomized(Tensor::contiguous(LINFUSE_F32, {9}), 25);
    Gemm g;
    g.epilogue = epilogue;
    g.alpha = 0.75f;
    runAndCheck(g, ops.a, ops.b, ops.c);
    g.flags = LINFUSE_GEMM_HAS_BIAS;
    runAndCheck(g, ops.a, ops.b, ops.c, &bias);
  }
  // The activations themselves, at points where they differ from identity.
  const double expected[] = {-1.0, 0.0, -0.15865525393145707,
                             -0.15880800939172324, -0.2689414213699951};
  for (int32_t epilogue = 0; epilogue <= LINFUSE_EPILOGUE_SILU; ++epilogue)
    EXPECT_NEAR(expected[epilogue],
                scalarGemm(LINFUSE_F32, -1.0f, epilogue).at(0, 0, 0), 1e-6)
        << epilogue;
}

TEST_F(RuntimeTest, F32AlphaBeta) {
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 5, 6, 7);
  Gemm g;
  g.alpha = 0.5f;
  g.beta = -1.5f;
  runAndCheck(g, ops.a, ops.b, ops.c);
  g.alpha = 0.0f; // C = beta * C
  runAndCheck(g, ops.a, ops.b, ops.c);
}

TEST_F(RuntimeTest, BetaZeroDoesNotReadC) {
  // C full of NaN: with beta == 0 none of it may leak (NaN * 0 is NaN).
  struct Case {
    linfuse_dtype abType, cType;
    int64_t m, n, k;
    int64_t cColStride; // != 1: C computed in a temporary
  };
  const Case cases[] = {
      {LINFUSE_F32, LINFUSE_F32, 2, 3, 4, 1},
      {LINFUSE_F32, LINFUSE_F32, 67, 45, 33, 1},
      // M == 1 / N == 1: some BLAS builds turn these into gemv.
      {LINFUSE_F32, LINFUSE_F32, 1, 45, 33, 1},
      {LINFUSE_F32, LINFUSE_F32, 67, 1, 33, 1},
      {LINFUSE_F32, LINFUSE_F32, 5, 4, 3, 2},
      {LINFUSE_F32, LINFUSE_F32, 5, 4, 0, 1},
      {LINFUSE_F32, LINFUSE_F32, 5, 4, 0, 2},
      {LINFUSE_F16, LINFUSE_F16, 6, 5, 4, 1},
      {LINFUSE_BF16, LINFUSE_F32, 6, 5, 4, 1},
  };
  for (const Case &cs : cases) {
    SCOPED_TRACE("m " + std::to_string(cs.m) + " k " + std::to_string(cs.k) +
                 " c stride " + std::to_string(cs.cColStride));
    Operands ops = contiguousOperands(cs.abType, cs.cType, 0, cs.m, cs.n, cs.k);
    Tensor c(cs.cType, {cs.m, cs.n}, {cs.n * cs.cColStride, cs.cColStride});
    fillAll(c, kNaN);
    Gemm g;
    g.abType = cs.abType;
    g.cType = cs.cType;
    runAndCheck(g, ops.a, ops.b, c);
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j)
        ASSERT_FALSE(std::isnan(c.at(0, i, j))) << i << ", " << j;
  }
}

//===----------------------------------------------------------------------===//
// f16 / bf16
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, LowPrecisionInputs) {
  struct Types {
    linfuse_dtype ab, c;
  };
  const Types types[] = {{LINFUSE_F16, LINFUSE_F16},
                         {LINFUSE_F16, LINFUSE_F32},
                         {LINFUSE_BF16, LINFUSE_BF16},
                         {LINFUSE_BF16, LINFUSE_F32}};
  for (Types t : types) {
    for (int32_t flags : {0, kTransBoth}) {
      SCOPED_TRACE("ab " + std::to_string(t.ab) + " c " + std::to_string(t.c) +
                   " flags " + std::to_string(flags));
      Gemm g;
      g.abType = t.ab;
      g.cType = t.c;
      g.flags = flags;
      Operands ops = contiguousOperands(t.ab, t.c, flags, 7, 6, 9);
      runAndCheck(g, ops.a, ops.b, ops.c);

      // Batched, bias (of C's type), beta, epilogue.
      Operands batched = contiguousOperands(t.ab, t.c, flags, 5, 4, 3, {2});
      // Offset in elements of C's type.
      Tensor bias = randomized({t.c, {4}, {1}, 3}, 26);
      g.flags |= LINFUSE_GEMM_HAS_BIAS;
      g.epilogue = LINFUSE_EPILOGUE_GELU_ERF;
      g.alpha = 1.25f;
      g.beta = 0.75f;
      runAndCheck(g, batched.a, batched.b, batched.c, &bias);
    }
    // Strided views of low-precision data: a column slice of C.
    SCOPED_TRACE("slices");
    Tensor a = randomized({t.ab, {3, 4}, {1, 5}}, 27);
    Tensor b = randomized({t.ab, {4, 2}, {3, 1}}, 28);
    Tensor c = randomized({t.c, {3, 2}, {6, 1}, 2}, 29);
    Gemm g;
    g.abType = t.ab;
    g.cType = t.c;
    g.beta = 1.0f;
    runAndCheck(g, a, b, c);
  }
}

/// The raw bits of epilogue(alpha * 1 * 1) rounded into a 1x1 C.
uint16_t roundedBits(linfuse_dtype type, float alpha) {
  return scalarGemm(type, alpha, LINFUSE_EPILOGUE_NONE).rawBits(0);
}

TEST_F(RuntimeTest, F16RoundsToNearestEven) {
  EXPECT_EQ(0x3c00, roundedBits(LINFUSE_F16, 1.0f));
  EXPECT_EQ(0xbc00, roundedBits(LINFUSE_F16, -1.0f));
  EXPECT_EQ(0x3c00, roundedBits(LINFUSE_F16, 1.0f + 0x1p-11f)); // tie: even
  EXPECT_EQ(0x3c02, roundedBits(LINFUSE_F16, 1.0f + 3 * 0x1p-11f));
  EXPECT_EQ(0x3c01, roundedBits(LINFUSE_F16, 1.0f + 0x1p-11f + 0x1p-20f));
  EXPECT_EQ(0x7bff, roundedBits(LINFUSE_F16, 65519.0f)); // max finite
  EXPECT_EQ(0x7c00, roundedBits(LINFUSE_F16, 65520.0f)); // overflows
  EXPECT_EQ(0xfc00, roundedBits(LINFUSE_F16, -1e30f));
  EXPECT_EQ(0x0001, roundedBits(LINFUSE_F16, 0x1p-24f)); // smallest subnormal
  EXPECT_EQ(0x0002, roundedBits(LINFUSE_F16, 1.5f * 0x1p-24f)); // tie: even
  EXPECT_EQ(0x0002, roundedBits(LINFUSE_F16, 2.5f * 0x1p-24f)); // tie: even
  EXPECT_EQ(0x0000, roundedBits(LINFUSE_F16, 0x1p-25f));        // tie: zero
  EXPECT_EQ(0x0001, roundedBits(LINFUSE_F16, 0x1p-25f * 1.0001f));
  EXPECT_EQ(0x0400, roundedBits(LINFUSE_F16, 0x1p-14f * (1 - 0x1p-12f)));
  uint16_t nan =
      roundedBits(LINFUSE_F16, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(0x7c00, nan & 0x7c00);
  EXPECT_NE(0, nan & 0x3ff);
}

TEST_F(RuntimeTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(0x3f80, roundedBits(LINFUSE_BF16, 1.0f));
  EXPECT_EQ(0xc000, roundedBits(LINFUSE_BF16, -2.0f));
  EXPECT_EQ(0x3f80, roundedBits(LINFUSE_BF16, 1.0f + 0x1p-8f)); // tie: even
  EXPECT_EQ(0x3f82, roundedBits(LINFUSE_BF16, 1.0f + 3 * 0x1p-8f));
  EXPECT_EQ(0x7f80,
            roundedBits(LINFUSE_BF16, std::numeric_limits<float>::max()));
  uint16_t nan =
      roundedBits(LINFUSE_BF16, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(0x7f80, nan & 0x7f80);
  EXPECT_NE(0, nan & 0x7f);
}

TEST_F(RuntimeTest, F16InputsWidenExactly) {
  // Subnormal, largest finite and NaN f16 inputs, read into an f32 C.
  Tensor a = Tensor::contiguous(LINFUSE_F16, {3, 1});
  Tensor b = Tensor::contiguous(LINFUSE_F16, {1, 1});
  Tensor c = Tensor::contiguous(LINFUSE_F32, {3, 1});
  const uint16_t bits[] = {0x0001, 0x7bff, 0x7e00};
  std::memcpy(a.bytes.data(), bits, sizeof(bits));
  b.set(0, 0, 0, 1.0);
  Gemm g;
  g.abType = LINFUSE_F16;
  ASSERT_EQ(LINFUSE_OK, g.run(a, b, c));
  EXPECT_EQ(0x1p-24, c.at(0, 0, 0));
  EXPECT_EQ(65504.0, c.at(0, 1, 0));
  EXPECT_TRUE(std::isnan(c.at(0, 2, 0)));
}

//===----------------------------------------------------------------------===//
// Zero sizes
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, ZeroMOrNIsANoOp) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 4}, {3, 0}, {0, 0}}) {
    SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n));
    Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, m, n, 5);
    Tensor bias = Tensor::contiguous(LINFUSE_F32, {n});
    Gemm g;
    g.flags = LINFUSE_GEMM_HAS_BIAS;
    g.epilogue = LINFUSE_EPILOGUE_RELU;
    EXPECT_EQ(LINFUSE_OK, g.run(ops.a, ops.b, ops.c, &bias));
  }
  // Empty memrefs may come with null data pointers.
  Tensor a = Tensor::contiguous(LINFUSE_F16, {0, 5});
  Tensor b = randomized(Tensor::contiguous(LINFUSE_F16, {5, 3}), 30);
  Tensor c = Tensor::contiguous(LINFUSE_F16, {0, 3});
  a.nullData = c.nullData = true;
  Gemm g;
  g.abType = g.cType = LINFUSE_F16;
  EXPECT_EQ(LINFUSE_OK, g.run(a, b, c));
  // An empty batch.
  Operands batch0 =
      contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 3, 4, {0});
  EXPECT_EQ(LINFUSE_OK, Gemm{}.run(batch0.a, batch0.b, batch0.c));
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(5, stats.gemm_calls);
  EXPECT_EQ(0, stats.kernel_launches);
}

TEST_F(RuntimeTest, ZeroKIsBetaCPlusBias) {
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_F16}) {
    for (int64_t cColStride : {int64_t(1), int64_t(2)}) {
      SCOPED_TRACE("type " + std::to_string(type) + " c stride " +
                   std::to_string(cColStride));
      Tensor a = Tensor::contiguous(type, {4, 0});
      Tensor b = Tensor::contiguous(type, {0, 3});
      a.nullData = b.nullData = true;
      Tensor c = randomized({type, {4, 3}, {3 * cColStride, cColStride}}, 31);
      Tensor bias = randomized(Tensor::contiguous(type, {3}), 32);
      Gemm g;
      g.abType = g.cType = type;
      g.flags = LINFUSE_GEMM_HAS_BIAS;
      g.epilogue = LINFUSE_EPILOGUE_RELU;
      g.beta = -0.5f;
      runAndCheck(g, a, b, c, &bias);
      g.beta = 0.0f; // C = relu(bias), whatever C held
      fillAll(c, kNaN);
      runAndCheck(g, a, b, c, &bias);
    }
  }
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(8, stats.gemm_calls);
  EXPECT_EQ(0, stats.kernel_launches); // BLAS is never called with K == 0
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Expects `status` from `call`, recorded with a message containing every
/// one of `words`; C is left unchanged. Clears the error afterwards.
template <typename Call>
void expectError(int32_t status, std::vector<std::string> words, Call call) {
  linfuse_clear_error();
  EXPECT_EQ(status, call());
  EXPECT_EQ(status, linfuse_last_error());
  std::string message = linfuse_last_error_message();
  EXPECT_EQ(0u, message.find("linfuse_cpu_gemm: ")) << message;
  for (const std::string &word : words)
    EXPECT_NE(std::string::npos, message.find(word))
        << "'" << word << "' not in: " << message;
  EXPECT_EQ(std::string::npos, message.find('\n')) << message;
  linfuse_clear_error();
}

TEST_F(RuntimeTest, ShapeErrors) {
  Tensor a = Tensor::contiguous(LINFUSE_F32, {4, 8});
  Tensor b = Tensor::contiguous(LINFUSE_F32, {6, 3});
  Tensor b8 = Tensor::contiguous(LINFUSE_F32, {8, 3});
  Tensor c = randomized(Tensor::contiguous(LINFUSE_F32, {4, 3}), 33);
  Tensor c53 = Tensor::contiguous(LINFUSE_F32, {5, 3});
  Tensor c45 = Tensor::contiguous(LINFUSE_F32, {4, 5});
  const Tensor c0 = c;
  Gemm g;
  const int32_t invalid = LINFUSE_ERROR_INVALID_ARGUMENT;

  expectError(invalid, {"K mismatch: op(A) is 4x8 but op(B) is 6x3"},
              [&] { return g.run(a, b, c); });
  expectError(invalid, {"M mismatch", "op(A) is 4x8", "C is 5x3"},
              [&] { return g.run(a, b8, c53); });
  expectError(invalid, {"N mismatch", "op(B) is 8x3", "C is 4x5"},
              [&] { return g.run(a, b8, c45); });
  // With TRANSPOSE_A, the 4x8 A is op(A) = 8x4.
  Gemm gt = g;
  gt.flags = LINFUSE_GEMM_TRANSPOSE_A;
  expectError(invalid, {"K mismatch", "op(A) is 8x4", "op(B) is 8x3"},
              [&] { return gt.run(a, b8, c); });

  Tensor bias5 = Tensor::contiguous(LINFUSE_F32, {5});
  Gemm gb = g;
  gb.flags = LINFUSE_GEMM_HAS_BIAS;
  expectError(invalid, {"N mismatch", "bias has 5", "4x3"},
              [&] { return gb.run(a, b8, c, &bias5); });
  Tensor bias2d = Tensor::contiguous(LINFUSE_F32, {1, 3});
  expectError(invalid, {"bias", "rank 1", "rank 2"},
              [&] { return gb.run(a, b8, c, &bias2d); });
  // Without HAS_BIAS the bias argument is not looked at.
  EXPECT_EQ(LINFUSE_OK, g.run(a, b8, c, &bias2d));
  c = c0;

  Tensor a3 = Tensor::contiguous(LINFUSE_F32, {2, 4, 8});
  Tensor b3 = Tensor::contiguous(LINFUSE_F32, {3, 8, 3});
  Tensor c3 = Tensor::contiguous(LINFUSE_F32, {2, 4, 3});
  expectError(invalid, {"batch mismatch", "A has 2", "B has 3", "C has 2"},
              [&] { return g.run(a3, b3, c3); });
  expectError(invalid, {"rank", "2, 3 and 2"}, [&] { return g.run(a, b3, c); });
  Tensor a1 = Tensor::contiguous(LINFUSE_F32, {8});
  expectError(invalid, {"rank", "1, 2 and 2"},
              [&] { return g.run(a1, b8, c); });
  expectError(invalid, {"rank", "4"}, [&] {
    return linfuse_cpu_gemm(4, a.desc(), 4, b8.desc(), 1, c.desc(), 4, c.desc(),
                            LINFUSE_F32, LINFUSE_F32, 0, 0, 1, 0);
  });

  Tensor negative(LINFUSE_F32, {4, -8}, {8, 1});
  negative.bytes.assign(128, 0);
  expectError(invalid, {"A", "negative size -8", "dimension 1"},
              [&] { return g.run(negative, b8, c); });
  Tensor nullA = Tensor::contiguous(LINFUSE_F32, {4, 8});
  nullA.nullData = true;
  expectError(invalid, {"A", "null"}, [&] { return g.run(nullA, b8, c); });
  Tensor nullBias = Tensor::contiguous(LINFUSE_F32, {3});
  nullBias.nullData = true;
  expectError(invalid, {"bias", "null"},
              [&] { return gb.run(a, b8, c, &nullBias); });
  expectError(invalid, {"B", "null descriptor"}, [&] {
    return linfuse_cpu_gemm(2, a.desc(), 2, nullptr, 2, c.desc(), 2, c.desc(),
                            LINFUSE_F32, LINFUSE_F32, 0, 0, 1, 0);
  });
  expectError(invalid, {"C", "null descriptor"}, [&] {
    return linfuse_cpu_gemm(2, a.desc(), 2, b8.desc(), 2, nullptr, 2, nullptr,
                            LINFUSE_F32, LINFUSE_F32, 0, 0, 1, 0);
  });
  EXPECT_EQ(c0.bytes, c.bytes) << "a failing call wrote C";

  // Calls that fail validation are not counted: only the one good call.
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(1, stats.gemm_calls);
}

TEST_F(RuntimeTest, CodeErrors) {
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 2, 2);
  const int32_t invalid = LINFUSE_ERROR_INVALID_ARGUMENT;
  auto run = [&](int32_t abType, int32_t cType, int32_t flags,
                 int32_t epilogue) {
    return [&ops, abType, cType, flags, epilogue] {
      return linfuse_cpu_gemm(2, ops.a.desc(), 2, ops.b.desc(), 2, ops.c.desc(),
                              2, ops.c.desc(), abType, cType, flags, epilogue,
                              1, 0);
    };
  };
  expectError(invalid, {"ab_type", "7"}, run(7, LINFUSE_F32, 0, 0));
  expectError(invalid, {"c_type", "-1"}, run(LINFUSE_F32, -1, 0, 0));
  expectError(invalid, {"c_type f16", "bf16", "f32"},
              run(LINFUSE_BF16, LINFUSE_F16, 0, 0));
  expectError(invalid, {"c_type bf16", "f32"},
              run(LINFUSE_F32, LINFUSE_BF16, 0, 0));
  expectError(invalid, {"epilogue", "5"}, run(LINFUSE_F32, LINFUSE_F32, 0, 5));
  expectError(invalid, {"epilogue", "-1"},
              run(LINFUSE_F32, LINFUSE_F32, 0, -1));
  expectError(invalid, {"flags", "0x10"}, run(LINFUSE_F32, LINFUSE_F32, 16, 0));
  // Integer GEMMs: i8 into i32 only, no activation.
  expectError(invalid, {"i8 into i32, not i8 into f32"},
              run(LINFUSE_I8, LINFUSE_F32, 0, 0));
  expectError(invalid, {"i8 into i32, not f32 into i32"},
              run(LINFUSE_F32, LINFUSE_I32, 0, 0));
  expectError(invalid, {"i8 into i32, not i32 into i32"},
              run(LINFUSE_I32, LINFUSE_I32, 0, 0));
  expectError(invalid, {"integer GEMM takes no activation"},
              run(LINFUSE_I8, LINFUSE_I32, 0, LINFUSE_EPILOGUE_RELU));
  Operands ints = contiguousOperands(LINFUSE_I8, LINFUSE_I32, 0, 2, 2, 2);
  expectError(invalid, {"integer GEMM takes alpha 1 and beta 0 or 1", "2"},
              [&] {
                return linfuse_cpu_gemm(2, ints.a.desc(), 2, ints.b.desc(), 2,
                                        ints.c.desc(), 2, ints.c.desc(),
                                        LINFUSE_I8, LINFUSE_I32, 0, 0, 1, 2);
              });
}

/// i8 x i8 -> i32, on oneDNN (beta 0) and on the exact integer loop (beta
/// 1, a transposed strided A, a bias): every value against int64 sums, and
/// products that wrap modulo 2^32 as linalg's i32 arithmetic does.
TEST_F(RuntimeTest, Int8IntoInt32IsExact) {
  const int64_t m = 5, n = 7, k = 300;
  std::vector<int8_t> a(m * k), b(k * n);
  std::vector<int32_t> bias(n), c(m * n), c1(m * n);
  uint32_t state = 7;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (auto &v : a)
    v = int8_t(next() >> 24);
  for (auto &v : b)
    v = int8_t(next() >> 24);
  for (auto &v : bias)
    v = int32_t(next() >> 8) - (1 << 23);
  for (auto &v : c1)
    v = int32_t(next()); // The whole range: the sum wraps.
  std::vector<int32_t> start = c1;
  struct View2 {
    void *allocated, *aligned;
    int64_t offset, sizes[2], strides[2];
  };
  struct View1 {
    void *allocated, *aligned;
    int64_t offset, sizes[1], strides[1];
  };
  View2 va{a.data(), a.data(), 0, {m, k}, {k, 1}};
  // The same A as the transpose of a k x m column-major view of its data.
  View2 vat{a.data(), a.data(), 0, {k, m}, {1, k}};
  View2 vb{b.data(), b.data(), 0, {k, n}, {n, 1}};
  View2 vc{c.data(), c.data(), 0, {m, n}, {n, 1}};
  View2 vc1{c1.data(), c1.data(), 0, {m, n}, {n, 1}};
  View1 vbias{bias.data(), bias.data(), 0, {n}, {1}};
  ASSERT_EQ(linfuse_cpu_gemm(2, &va, 2, &vb, 1, &vbias, 2, &vc, LINFUSE_I8,
                             LINFUSE_I32, LINFUSE_GEMM_HAS_BIAS, 0, 1, 0),
            LINFUSE_OK)
      << linfuse_last_error_message();
  ASSERT_EQ(linfuse_cpu_gemm(
                2, &vat, 2, &vb, 1, &vbias, 2, &vc1, LINFUSE_I8, LINFUSE_I32,
                LINFUSE_GEMM_HAS_BIAS | LINFUSE_GEMM_TRANSPOSE_A, 0, 1, 1),
            LINFUSE_OK)
      << linfuse_last_error_message();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = bias[j];
      for (int64_t q = 0; q < k; ++q)
        sum += int64_t(a[i * k + q]) * b[q * n + j];
      EXPECT_EQ(c[i * n + j], int32_t(sum)) << i << "," << j;
      int64_t transposed = bias[j] + int64_t(start[i * n + j]);
      for (int64_t q = 0; q < k; ++q)
        transposed += int64_t(a[i * k + q]) * b[q * n + j];
      EXPECT_EQ(c1[i * n + j], int32_t(uint32_t(uint64_t(transposed))))
          << i << "," << j;
    }
}

TEST_F(RuntimeTest, SizeErrors) {
  // Sizes past BLAS's int: rejected before any data is touched (the data
  // pointers below point at one float).
  float dummy = 0;
  const int64_t big = int64_t(INT_MAX) + 1;
  Descriptor a{&dummy, &dummy, 0, {1, big, big, 1}};
  Descriptor b{&dummy, &dummy, 0, {big, 1, 1, 1}};
  Descriptor c{&dummy, &dummy, 0, {1, 1, 1, 1}};
  expectError(LINFUSE_ERROR_UNSUPPORTED, {"K=2147483648", "BLAS"}, [&] {
    return linfuse_cpu_gemm(2, &a, 2, &b, 2, &c, 2, &c, LINFUSE_F32,
                            LINFUSE_F32, 0, 0, 1, 0);
  });
  // A 2^30 x 2^30 f32 accumulator (C is strided, so it is not used in
  // place) cannot be allocated. (Under ASan, run with
  // ASAN_OPTIONS=allocator_may_return_null=1.)
  const int64_t huge = int64_t(1) << 30;
  Descriptor ha{&dummy, &dummy, 0, {huge, 1, 1, 1}};
  Descriptor hb{&dummy, &dummy, 0, {1, huge, huge, 1}};
  Descriptor hc{&dummy, &dummy, 0, {huge, huge, 2 * huge, 2}};
  expectError(LINFUSE_ERROR_OUT_OF_MEMORY, {"out of memory"}, [&] {
    return linfuse_cpu_gemm(2, &ha, 2, &hb, 2, &hc, 2, &hc, LINFUSE_F32,
                            LINFUSE_F32, 0, 0, 1, 0);
  });
}

TEST_F(RuntimeTest, FirstErrorIsKeptUntilCleared) {
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
  EXPECT_STREQ("", linfuse_last_error_message());
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 2, 2);
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_cpu_gemm(2, ops.a.desc(), 2, ops.b.desc(), 2, ops.c.desc(),
                             2, ops.c.desc(), LINFUSE_F32, LINFUSE_F32, 0, 9, 1,
                             0));
  std::string first = linfuse_last_error_message();
  EXPECT_NE(std::string::npos, first.find("epilogue")) << first;
  // A later error and a later success leave the first error in place.
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_cpu_gemm(3, ops.a.desc(), 2, ops.b.desc(), 2, ops.c.desc(),
                             2, ops.c.desc(), LINFUSE_F32, LINFUSE_F32, 0, 0, 1,
                             0));
  EXPECT_EQ(LINFUSE_OK, Gemm{}.run(ops.a, ops.b, ops.c));
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT, linfuse_last_error());
  EXPECT_EQ(first, linfuse_last_error_message());
  linfuse_clear_error();
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
  EXPECT_STREQ("", linfuse_last_error_message());
}

TEST_F(RuntimeTest, ErrorsArePerThread) {
  // An error on one thread is neither seen nor cleared by another: two
  // concurrent calls (two Python threads) keep their own status.
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 2, 2);
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT,
            linfuse_cpu_gemm(2, ops.a.desc(), 2, ops.b.desc(), 2, ops.c.desc(),
                             2, ops.c.desc(), LINFUSE_F32, LINFUSE_F32, 0, 9, 1,
                             0));
  int32_t otherStatus = -1;
  std::string otherMessage = "unset";
  std::thread other([&] {
    otherStatus = linfuse_last_error();
    otherMessage = linfuse_last_error_message();
    linfuse_clear_error();
  });
  other.join();
  EXPECT_EQ(LINFUSE_OK, otherStatus);
  EXPECT_EQ("", otherMessage);
  EXPECT_EQ(LINFUSE_ERROR_INVALID_ARGUMENT, linfuse_last_error());
  linfuse_clear_error();
}

//===----------------------------------------------------------------------===//
// Stats and threads
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, StatsCountCallsAndBlasLaunches) {
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(0, stats.gemm_calls);
  EXPECT_EQ(0, stats.kernel_launches);

  Operands plain = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 3, 4, 5);
  ASSERT_EQ(LINFUSE_OK, Gemm{}.run(plain.a, plain.b, plain.c));
  Operands batched =
      contiguousOperands(LINFUSE_BF16, LINFUSE_F32, 0, 3, 4, 5, {4});
  Gemm bf16;
  bf16.abType = LINFUSE_BF16;
  ASSERT_EQ(LINFUSE_OK, bf16.run(batched.a, batched.b, batched.c));
  // A failed validation counts nothing.
  Gemm bad;
  bad.epilogue = 17;
  ASSERT_NE(LINFUSE_OK, bad.run(plain.a, plain.b, plain.c));
  linfuse_get_stats(&stats);
  EXPECT_EQ(2, stats.gemm_calls);
  // One oneDNN matmul per call, its batch included.
  EXPECT_EQ(2, stats.kernel_launches);

  linfuse_reset_stats();
  linfuse_get_stats(&stats);
  EXPECT_EQ(0, stats.gemm_calls);
  EXPECT_EQ(0, stats.kernel_launches);
  linfuse_get_stats(nullptr); // tolerated
}

TEST_F(RuntimeTest, ConcurrentCalls) {
  const int threads = 8, callsPerThread = 20;
  std::vector<int> wrong(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &wrong] {
      for (int i = 0; i < callsPerThread; ++i) {
        linfuse_dtype type = (t + i) % 2 ? LINFUSE_F16 : LINFUSE_F32;
        Operands ops = contiguousOperands(type, type, 0, 9 + t, 7, 11 + i);
        Gemm g;
        g.abType = g.cType = type;
        g.epilogue = LINFUSE_EPILOGUE_SILU;
        std::vector<double> ref = reference(g, ops.a, ops.b, ops.c, nullptr);
        if (g.run(ops.a, ops.b, ops.c) != LINFUSE_OK) {
          ++wrong[t];
          continue;
        }
        double rel = type == LINFUSE_F32 ? 1e-5 : 0x1p-10;
        size_t n = 0;
        for (int64_t r = 0; r < ops.c.sizes[0]; ++r)
          for (int64_t col = 0; col < ops.c.sizes[1]; ++col, ++n)
            if (std::fabs(ops.c.at(0, r, col) - ref[n]) >
                rel * std::fabs(ref[n]) + 1e-5)
              ++wrong[t];
      }
    });
  for (std::thread &th : pool)
    th.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(0, wrong[t]) << "thread " << t;
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  EXPECT_EQ(threads * callsPerThread, stats.gemm_calls);
  EXPECT_EQ(threads * callsPerThread, stats.kernel_launches);
}

TEST_F(RuntimeTest, ConcurrentErrorsStayWithTheirThread) {
  // Threads failing at once: each keeps its own first, complete message.
  const int threads = 8;
  std::vector<std::string> messages(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &messages] {
      Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 2, 2);
      for (int i = 0; i < 50; ++i)
        linfuse_cpu_gemm(2, ops.a.desc(), 2, ops.b.desc(), 2, ops.c.desc(), 2,
                         ops.c.desc(), LINFUSE_F32, LINFUSE_F32, 0, 100 + t + i,
                         1, 0);
      messages[t] = linfuse_last_error_message();
      linfuse_clear_error();
    });
  for (std::thread &th : pool)
    th.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ("linfuse_cpu_gemm: unknown epilogue code " +
                  std::to_string(100 + t),
              messages[t]);
  EXPECT_EQ(LINFUSE_OK, linfuse_last_error());
}

//===----------------------------------------------------------------------===//
// oneMKL (MklGemm.cpp)
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// f16 products of a few rows (FewRowGemm.cpp)
//===----------------------------------------------------------------------===//

int64_t fewRowCalls() {
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  return stats.few_row_gemm_calls;
}

/// Why f16 products of 1-4 rows do not run on linfuse's own kernels here,
/// or "" where they do.
std::string whyNoFewRowKernels() {
  const char *off = std::getenv("LINFUSE_FEW_ROW_GEMM");
  if (off && std::string(off) == "0")
    return "$LINFUSE_FEW_ROW_GEMM=0";
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("f16c"))
    return "the CPU has no AVX2, FMA and F16C: oneDNN computes them";
  return "";
}

/// f16 GEMMs with 1 to 4 rows run on the few-row kernels and match the
/// reference: B stored N x K (a Linear's weight), A transposed, f16 and
/// f32 C, with and without a bias, every epilogue; B stored K x N goes to
/// oneDNN, right too. The sizes reach every tail: K not a multiple of the
/// vector width, K over a dot pass's x chunk (4096 / M floats), N not a
/// multiple of 4 or of a thread's 64 columns, and products big enough to be
/// split over threads.
TEST_F(RuntimeTest, FewRowF16ProductsMatchTheReference) {
  if (std::string why = whyNoFewRowKernels(); !why.empty())
    GTEST_SKIP() << why;
  struct Size {
    int64_t k, n;
  };
  const Size sizes[] = {{37, 131}, {1200, 70}, {16, 64}, {4100, 9}, {1, 5}};
  const int32_t epilogues[] = {LINFUSE_EPILOGUE_NONE, LINFUSE_EPILOGUE_SILU,
                               LINFUSE_EPILOGUE_GELU_ERF, LINFUSE_EPILOGUE_RELU,
                               LINFUSE_EPILOGUE_GELU_TANH};
  int variant = 0;
  for (int64_t m = 1; m <= 4; ++m)
    for (Size size : sizes)
      for (int32_t flags : {kTransB, 0, kTransBoth}) {
        ++variant;
        linfuse_dtype cType = variant % 2 ? LINFUSE_F16 : LINFUSE_F32;
        SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(size.k) +
                     " N " + std::to_string(size.n) + " flags " +
                     std::to_string(flags) + " C " + std::to_string(cType));
        Operands ops =
            contiguousOperands(LINFUSE_F16, cType, flags, m, size.n, size.k);
        Gemm g;
        g.abType = LINFUSE_F16;
        g.cType = cType;
        g.flags = flags | (variant % 3 ? LINFUSE_GEMM_CONSTANT_B : 0);
        g.epilogue = epilogues[variant % 5];
        Tensor bias = randomized(Tensor::contiguous(cType, {size.n}), 44);
        bool withBias = variant % 4 != 0;
        if (withBias)
          g.flags |= LINFUSE_GEMM_HAS_BIAS;
        int64_t before = fewRowCalls();
        runAndCheck(g, ops.a, ops.b, ops.c, withBias ? &bias : nullptr);
        // A K x N B (flags 0) is left to oneDNN, unless it is one row.
        bool taken = (flags & kTransB) || size.k == 1;
        EXPECT_EQ(fewRowCalls(), before + (taken ? 1 : 0));
      }
  linfuse_cpu_release_packed_weights();
}

/// The few-row kernels read and write views: A a column slice of a wider
/// buffer or transposed with padding, B's rows further apart than K (a
/// slice of a merged weight), a strided bias, C a column slice or the
/// transpose of a row-major matrix; nothing outside C's view is written.
TEST_F(RuntimeTest, FewRowF16ProductsOnViews) {
  if (std::string why = whyNoFewRowKernels(); !why.empty())
    GTEST_SKIP() << why;
  const int64_t m = 3, k = 70, n = 150;
  for (int layout = 0; layout < 2; ++layout)
    for (linfuse_dtype cType : {LINFUSE_F16, LINFUSE_F32}) {
      SCOPED_TRACE("layout " + std::to_string(layout) + " C " +
                   std::to_string(cType));
      Gemm g;
      g.abType = LINFUSE_F16;
      g.cType = cType;
      g.flags = kTransB | LINFUSE_GEMM_HAS_BIAS | LINFUSE_GEMM_CONSTANT_B;
      g.epilogue = LINFUSE_EPILOGUE_GELU_TANH;
      // A: columns 5..5+K of an M x 90 buffer, or (transposed) K x M rows
      // 4 apart.
      Tensor a = layout == 0
                     ? randomized(Tensor(LINFUSE_F16, {m, k}, {90, 1}, 5), 50)
                     : randomized(Tensor(LINFUSE_F16, {k, m}, {4, 1}, 1), 50);
      if (layout == 1)
        g.flags |= kTransA;
      // B: rows 100 apart, from row 2 of a wider weight.
      Tensor b = randomized(Tensor(LINFUSE_F16, {n, k}, {100, 1}, 200), 51);
      Tensor bias = randomized(Tensor(cType, {n}, {3}, 1), 52);
      Tensor c = layout == 0
                     ? randomized(Tensor(cType, {m, n}, {n + 9, 1}, 4), 53)
                     : randomized(Tensor(cType, {m, n}, {1, m + 2}, 1), 53);
      int64_t before = fewRowCalls();
      runAndCheck(g, a, b, c, &bias);
      EXPECT_EQ(fewRowCalls(), before + 1);
    }
  linfuse_cpu_release_packed_weights();
}

/// What the few-row kernels do not take goes to oneDNN, right: five rows,
/// a B with no unit stride, a batch, alpha != 1, f32 and bf16.
TEST_F(RuntimeTest, FewRowKernelsTakeOnlyTheirProducts) {
  if (std::string why = whyNoFewRowKernels(); !why.empty())
    GTEST_SKIP() << why;
  Gemm g;
  g.abType = LINFUSE_F16;
  g.cType = LINFUSE_F32;
  Operands five = contiguousOperands(LINFUSE_F16, LINFUSE_F32, 0, 5, 33, 20);
  runAndCheck(g, five.a, five.b, five.c);
  Tensor a = randomized(Tensor::contiguous(LINFUSE_F16, {2, 20}), 45);
  Tensor b = randomized(Tensor(LINFUSE_F16, {20, 33}, {66, 2}), 46);
  Tensor c = randomized(Tensor::contiguous(LINFUSE_F32, {2, 33}), 47);
  runAndCheck(g, a, b, c);
  Operands batched =
      contiguousOperands(LINFUSE_F16, LINFUSE_F32, 0, 1, 33, 20, {2});
  runAndCheck(g, batched.a, batched.b, batched.c);
  Gemm scaled = g;
  scaled.alpha = 0.5f;
  Operands one = contiguousOperands(LINFUSE_F16, LINFUSE_F32, 0, 1, 33, 20);
  runAndCheck(scaled, one.a, one.b, one.c);
  for (linfuse_dtype type : {LINFUSE_F32, LINFUSE_BF16}) {
    Gemm other;
    other.abType = type;
    other.flags = kTransB;
    Operands ops = contiguousOperands(type, LINFUSE_F32, kTransB, 1, 33, 20);
    runAndCheck(other, ops.a, ops.b, ops.c);
  }
  EXPECT_EQ(fewRowCalls(), 0);
}

/// Sets the MKL mode for one test and restores the previous one.
class MklMode {
public:
  explicit MklMode(int32_t mode) : saved(linfuse_cpu_set_mkl(mode)) {}
  ~MklMode() {
    linfuse_cpu_set_mkl(saved);
    linfuse_cpu_release_packed_weights();
  }

private:
  int32_t saved;
};

int64_t mklCalls() {
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);
  return stats.mkl_gemm_calls;
}

/// Why products cannot run on oneMKL here, or "" where they can.
std::string whyNoMkl() {
  if (!linfuse_cpu_mkl_available())
    return "oneMKL cannot be loaded (scripts/setup.sh --python installs "
           "PyPI's mkl into the venv)";
  if (linfuse_cpu_get_weight_reorder() == LINFUSE_REORDER_NEVER)
    return "$LINFUSE_REORDER_WEIGHTS=0: no packed copies";
  return "";
}

/// With LINFUSE_MKL_ALWAYS, products on weights run on oneMKL's packed
/// GEMMs and match the reference: f32 into f32, bf16 into f32 and bf16, B
/// stored either way, A transposed, a bias, every epilogue, C a column
/// slice of a wider buffer. One row of output stays on oneDNN (gemm:jit on
/// the plain weight), before and after the weight is packed; new values at the
/// weight's address are not seen until linfuse_cpu_release_packed_weights.
TEST_F(RuntimeTest, WeightsOnMklMatchTheReference) {
  MklMode mode(LINFUSE_MKL_ALWAYS);
  if (std::string why = whyNoMkl(); !why.empty())
    GTEST_SKIP() << why;
  struct Case {
    linfuse_dtype ab, c;
    int64_t n, k;
    int32_t flags, epilogue;
    bool bias, sliceC;
  };
  const int32_t constant = LINFUSE_GEMM_CONSTANT_B;
  // Weights under 2^22 elements or 1024 columns stay on oneDNN.
  const Case cases[] = {
      {LINFUSE_F32, LINFUSE_F32, 4096, 1024, kTransB | constant,
       LINFUSE_EPILOGUE_NONE, false, false},
      {LINFUSE_F32, LINFUSE_F32, 4096, 1024, constant, LINFUSE_EPILOGUE_RELU,
       true, true},
      {LINFUSE_F32, LINFUSE_F32, 1030, 4100, kTransBoth | constant,
       LINFUSE_EPILOGUE_GELU_ERF, true, false},
      {LINFUSE_F32, LINFUSE_F32, 4096, 1024, kTransB | constant,
       LINFUSE_EPILOGUE_GELU_TANH, true, true},
      {LINFUSE_BF16, LINFUSE_BF16, 4096, 1024, kTransB | constant,
       LINFUSE_EPILOGUE_SILU, true, false},
      {LINFUSE_BF16, LINFUSE_F32, 1024, 4096, constant, LINFUSE_EPILOGUE_NONE,
       false, true},
  };
  for (const Case &t : cases) {
    SCOPED_TRACE("ab " + std::to_string(t.ab) + " c " + std::to_string(t.c) +
                 " n " + std::to_string(t.n) + " flags " +
                 std::to_string(t.flags) + " epilogue " +
                 std::to_string(t.epilogue));
    Gemm g;
    g.abType = t.ab;
    g.cType = t.c;
    g.flags = t.flags | (t.bias ? LINFUSE_GEMM_HAS_BIAS : 0);
    g.epilogue = t.epilogue;
    Tensor bias = randomized(Tensor::contiguous(t.c, {t.n}), 41);
    Tensor *biasArg = t.bias ? &bias : nullptr;
    auto operands = [&](int64_t m) {
      Operands ops = contiguousOperands(t.ab, t.c, g.flags, m, t.n, t.k);
      if (t.sliceC) // columns [0, n) of an m x (n + 5) buffer
        ops.c = randomized(Tensor(t.c, {m, t.n}, {t.n + 5, 1}), 5);
      return ops;
    };
    Operands wide = operands(5), one = operands(1);
    one.b = wide.b;
    // One row first: oneDNN, on the plain weight.
    int64_t before = mklCalls();
    runAndCheck(g, one.a, wide.b, one.c, biasArg);
    EXPECT_EQ(before, mklCalls()) << "a one-row product packed the weight";
    runAndCheck(g, wide.a, wide.b, wide.c, biasArg);
    EXPECT_EQ(before + 1, mklCalls()) << "not on oneMKL";
    runAndCheck(g, one.a, wide.b, one.c, biasArg);
    EXPECT_EQ(before + 1, mklCalls()) << "one row is oneDNN's";
    // The packed copy is what later calls read, until released.
    const std::vector<uint8_t> first = wide.c.bytes;
    wide.b = randomized(std::move(wide.b), 9);
    ASSERT_EQ(LINFUSE_OK, g.run(wide.a, wide.b, wide.c, biasArg));
    EXPECT_EQ(first, wide.c.bytes) << "the new values were read";
    linfuse_cpu_release_packed_weights();
    runAndCheck(g, wide.a, wide.b, wide.c, biasArg);
    EXPECT_NE(first, wide.c.bytes);
    linfuse_cpu_release_packed_weights();
  }
}

/// The final pass after MKL's product (shared with the OpenBLAS fallback)
/// computes the activations with its own vectorized approximations of erf,
/// tanh and exp: every epilogue over inputs from -120 to 120, near zero,
/// and NaN, +Inf and -Inf (from the bias) against the double reference.
/// A one-hot A makes the product exact: C(i, j) = B(i, j) + bias(j).
TEST_F(RuntimeTest, MklEpiloguesMatchTheReferenceOverTheirRange) {
  MklMode mode(LINFUSE_MKL_ALWAYS);
  if (std::string why = whyNoMkl(); !why.empty())
    GTEST_SKIP() << why;
  const int64_t m = 4, k = 1024, n = 4096; // a weight MKL takes
  const double scales[] = {120.0, 6.0, 1e-3};
  Tensor a = Tensor::contiguous(LINFUSE_F32, {m, k});
  Tensor b = Tensor::contiguous(LINFUSE_F32, {k, n});
  Tensor bias = Tensor::contiguous(LINFUSE_F32, {n});
  for (int64_t i = 0; i < 3; ++i) {
    a.set(0, i, i, 1.0); // row 3 of A is zero: C(3, j) = bias(j)
    for (int64_t j = 0; j < n; ++j)
      b.set(0, i, j, scales[i] * (2.0 * j / (n - 1) - 1.0));
  }
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  for (int64_t j = 0; j < 3; ++j)
    bias.set(0, 0, j, specials[j]);
  for (int64_t j = 3; j < n; ++j)
    bias.set(0, 0, j, j % 7 == 0 ? -0.25 : 0.0);
  for (int32_t epilogue = LINFUSE_EPILOGUE_NONE;
       epilogue <= LINFUSE_EPILOGUE_SILU; ++epilogue) {
    SCOPED_TRACE("epilogue " + std::to_string(epilogue));
    Gemm g;
    g.flags = LINFUSE_GEMM_CONSTANT_B | LINFUSE_GEMM_HAS_BIAS;
    g.epilogue = epilogue;
    Tensor c = Tensor::contiguous(LINFUSE_F32, {m, n});
    int64_t before = mklCalls();
    ASSERT_EQ(LINFUSE_OK, g.run(a, b, c, &bias))
        << linfuse_last_error_message();
    EXPECT_EQ(before + 1, mklCalls()) << "not on oneMKL";
    int64_t wrong = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // The sum the pass makes (in f32), then the activation in double.
        float x = float(i < 3 ? b.at(0, i, j) : 0.0) + float(bias.at(0, 0, j));
        double want = epilogueRef(epilogue, x), got = c.at(0, i, j);
        bool ok = std::isnan(want)
                      ? std::isnan(got)
                      : (std::isinf(want) ? got == want
                                          : std::fabs(got - want) <=
                                                1e-6 + 1e-6 * std::fabs(want));
        if (!ok && ++wrong <= 5)
          ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got
                        << " for x = " << x << ", want " << want;
      }
    EXPECT_EQ(0, wrong);
    linfuse_cpu_release_packed_weights();
  }
}

/// What stays on oneDNN whatever the mode: weights under 2^22 elements or
/// 1024 columns, f16, B that is not a weight, batched products; and
/// everything with LINFUSE_MKL_NEVER. Unknown modes are refused.
TEST_F(RuntimeTest, MklTakesOnlyItsProducts) {
  MklMode mode(LINFUSE_MKL_ALWAYS);
  if (std::string why = whyNoMkl(); !why.empty())
    GTEST_SKIP() << why;
  EXPECT_EQ(-1, linfuse_cpu_set_mkl(3));
  EXPECT_EQ(-1, linfuse_cpu_set_mkl(-1));
  EXPECT_EQ(LINFUSE_MKL_ALWAYS, linfuse_cpu_get_mkl());
  int64_t before = mklCalls();
  struct Shape {
    linfuse_dtype type;
    int64_t n, k;
  };
  // Small (just under 2^22 elements), narrow (512 columns), f16.
  for (Shape s :
       {Shape{LINFUSE_F32, 4095, 1024}, Shape{LINFUSE_BF16, 96, 64},
        Shape{LINFUSE_F32, 512, 16384}, Shape{LINFUSE_F16, 4096, 1024}}) {
    SCOPED_TRACE("type " + std::to_string(s.type) + " n " +
                 std::to_string(s.n));
    Gemm g;
    g.abType = s.type;
    g.flags = kTransB | LINFUSE_GEMM_CONSTANT_B;
    Operands ops =
        contiguousOperands(s.type, LINFUSE_F32, g.flags, 3, s.n, s.k);
    runAndCheck(g, ops.a, ops.b, ops.c);
  }
  Gemm notAWeight;
  Operands plain =
      contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 3, 4096, 1024);
  runAndCheck(notAWeight, plain.a, plain.b, plain.c);
  Gemm batched;
  batched.flags = LINFUSE_GEMM_CONSTANT_B;
  Operands three =
      contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 2, 4096, 1024, {2});
  runAndCheck(batched, three.a, three.b, three.c);
  EXPECT_EQ(before, mklCalls());

  linfuse_cpu_set_mkl(LINFUSE_MKL_NEVER);
  Gemm weight;
  weight.flags = LINFUSE_GEMM_CONSTANT_B;
  Operands ops = contiguousOperands(LINFUSE_F32, LINFUSE_F32, 0, 3, 4096, 1024);
  runAndCheck(weight, ops.a, ops.b, ops.c);
  EXPECT_EQ(before, mklCalls());
  // The same product is MKL's in mode ALWAYS: the test above can fail.
  linfuse_cpu_set_mkl(LINFUSE_MKL_ALWAYS);
  linfuse_cpu_release_packed_weights();
  runAndCheck(weight, ops.a, ops.b, ops.c);
  EXPECT_EQ(before + 1, mklCalls());
}

} // namespace
