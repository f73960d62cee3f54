//===- MklGemm.cpp - GEMMs on weights packed for oneMKL -------------------===//
//
// On Intel Xeons (AVX-512, AMX) oneMKL's packed GEMMs beat oneDNN at the
// sizes that decide prefill: measured on the 2-core Xeon, 2 threads, B a
// weight packed once (docs/Design.md, "oneMKL for weights on Intel"):
// f32 128x4096x12288 0.86x oneDNN 2.6's time, bf16 0.50x (0.67x of oneDNN
// 3.2's reordered-weight kernels). PyTorch's Inductor reads f32 weights the
// same way (freezing: mkl._mkl_linear over cblas_sgemm_pack'ed weights).
// oneDNN stays for what it does better: one row of output (gemm:jit on the
// plain weight), small and narrow weights (MKL is slower to start, and
// threads few columns badly), f16, and every CPU that is not Intel's (MKL's
// code paths there were not measured).
//
// Which products come here: a single product (batch 1) whose B is a weight
// (LINFUSE_GEMM_CONSTANT_B) of f32 or bf16, A and C addressable by BLAS,
// with more than one row of output (any number in mode
// LINFUSE_REORDER_ALWAYS), of kMinWeight elements and kMinColumns columns
// or more. The weight is packed on first use into an anonymous mapping
// (the pack_get_size functions ask for more than MKL writes: 1.07-1.33x the
// weight at LLaMA-7B sizes, while the touched pages come to 1.00-1.02x) and
// kept, by address, with oneDNN's reordered weights (OneDnnCommon.h's
// PackedWeights: released and forgotten alike). Handed-over weights stay on
// oneDNN, which reorders them over their own bytes. MKL writes an f32
// product; the bias, the epilogue and rounding to bf16 follow in one pass
// over C on the same threads (HostBlas.h).
//
// oneMKL is dlopen'ed on first use -- $LINFUSE_MKL_LIBRARY, else
// libmkl_rt.so.3 on the library path, else the venv's copy this build was
// configured with (PyPI's `mkl`, which `scripts/setup.sh --python`
// installs) -- and set to GNU OpenMP threading before anything else, so
// that it runs on libgomp, the pool of oneDNN, of linfuse's element-wise
// loops and of PyTorch. Without it, or with $LINFUSE_MKL=0, everything
// stays on oneDNN; $LINFUSE_MKL=1 (or linfuse_cpu_set_mkl) uses it on any
// CPU.
//
//===----------------------------------------------------------------------===//

#include "HostBlas.h"
#include "OneDnnCommon.h"
#include "OneDnnGemm.h"
#include "RuntimeInternal.h"

#include <dlfcn.h>
#include <sys/mman.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

using namespace linfuse::runtime;

namespace {

/// oneMKL's C interface, as far as it is used (values from mkl_cblas.h and
/// mkl_service.h; LP64: 32-bit integers).
namespace mkl {
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kPacked = 151;
constexpr int kMatrixB = 162;     // CblasBMatrix
constexpr int kThreadingGnu = 3;  // MKL_THREADING_GNU
constexpr int kInterfaceLp64 = 0; // MKL_INTERFACE_LP64

struct Api {
  int (*setNumThreadsLocal)(int);
  size_t (*sgemmPackGetSize)(int id, int m, int n, int k);
  void (*sgemmPack)(int layout, int id, int trans, int m, int n, int k,
                    float alpha, const float *src, int ld, float *dest);
  void (*sgemmCompute)(int layout, int transA, int transB, int m, int n, int k,
                       const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc);
  size_t (*bf16PackGetSize)(int id, int m, int n, int k);
  void (*bf16Pack)(int layout, int id, int trans, int m, int n, int k,
                   const uint16_t *src, int ld, uint16_t *dest);
  void (*bf16Compute)(int layout, int transA, int transB, int m, int n, int k,
                      float alpha, const uint16_t *a, int lda,
                      const uint16_t *b, int ldb, float beta, float *c,
                      int ldc);
};
} // namespace mkl

#ifndef LINFUSE_MKL_DEFAULT_PATH
#define LINFUSE_MKL_DEFAULT_PATH ""
#endif

/// Whether the CPU is Intel's (cpuid's vendor string).
bool intelCpu() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx))
    return false;
  char vendor[13];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  vendor[12] = 0;
  return std::strcmp(vendor, "GenuineIntel") == 0;
#else
  return false;
#endif
}

int32_t modeFromEnvironment() {
  const char *v = std::getenv("LINFUSE_MKL");
  if (v && std::strcmp(v, "0") == 0)
    return LINFUSE_MKL_NEVER;
  if (v && std::strcmp(v, "1") == 0)
    return LINFUSE_MKL_ALWAYS;
  return LINFUSE_MKL_AUTO;
}

std::atomic<int32_t> &mode() {
  static std::atomic<int32_t> m{modeFromEnvironment()};
  return m;
}

/// Whether the mode asks for MKL on this CPU.
bool wanted() {
  switch (mode().load(std::memory_order_relaxed)) {
  case LINFUSE_MKL_ALWAYS:
    return true;
  case LINFUSE_MKL_AUTO: {
    static const bool intel = intelCpu();
    return intel;
  }
  default:
    return false;
  }
}

/// The library, loaded and set up once; null where it is not there, or
/// would not run on GNU OpenMP (a second OpenMP pool next to oneDNN's would
/// oversubscribe the cores).
const mkl::Api *api() {
  static const mkl::Api *instance = []() -> const mkl::Api * {
    void *lib = openLibrary("LINFUSE_MKL_LIBRARY",
                            {"libmkl_rt.so.3", LINFUSE_MKL_DEFAULT_PATH});
    if (!lib)
      return nullptr;
    auto setThreading =
        reinterpret_cast<int (*)(int)>(dlsym(lib, "MKL_Set_Threading_Layer"));
    auto setInterface =
        reinterpret_cast<int (*)(int)>(dlsym(lib, "MKL_Set_Interface_Layer"));
    // Both must come before any other MKL call; each returns the layer in
    // effect (another one if MKL was set up already in this process).
    if (!setThreading || !setInterface ||
        setInterface(mkl::kInterfaceLp64) != mkl::kInterfaceLp64 ||
        setThreading(mkl::kThreadingGnu) != mkl::kThreadingGnu)
      return nullptr;
    auto a = std::make_unique<mkl::Api>();
    bool ok = true;
    auto load = [&](auto &slot, const char *name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
          dlsym(lib, name));
      ok &= slot != nullptr;
    };
    load(a->setNumThreadsLocal, "MKL_Set_Num_Threads_Local");
    load(a->sgemmPackGetSize, "cblas_sgemm_pack_get_size");
    load(a->sgemmPack, "cblas_sgemm_pack");
    load(a->sgemmCompute, "cblas_sgemm_compute");
    load(a->bf16PackGetSize, "cblas_gemm_bf16bf16f32_pack_get_size");
    load(a->bf16Pack, "cblas_gemm_bf16bf16f32_pack");
    load(a->bf16Compute, "cblas_gemm_bf16bf16f32_compute");
    return ok ? a.release() : nullptr; // lives as long as the process
  }();
  return instance;
}

/// Weights with fewer elements or columns than these stay on oneDNN, where
/// MKL was measured slower or level (2 threads, MKL's time / oneDNN 2.6's
/// with reordered weights): bf16 64x256x1376 2.19, 16x768x2304 1.59,
/// 128x1376x512 1.31, 128x4096x512 0.91; f32 128x688x256 1.96 (a 12-layer
/// LLaMA MLP at hidden 256 and M = 64 took 4.8 ms on MKL, 3.9 on oneDNN),
/// 128x2048x512 1.03, 128x768x2304 0.94. From 4096x1024 on, MKL takes
/// 0.48-0.99x the time (f32 0.86-0.99, bf16 0.48-0.80) at M = 16 to 128,
/// except f32 at M = 16 (1.05-1.07, Design.md).
constexpr int64_t kMinWeight = int64_t(1) << 22;
constexpr int64_t kMinColumns = 1024;

/// The number of rows of output a weight is packed for. Any number reads
/// the packed weight correctly (checked from 1 to 300 rows), but MKL lays
/// it out for this one: packed for 1 row, 16x768x2304 took 341 us against
/// 212 us packed for 128; packed for 16, 128x4096x12288 took 101 ms against
/// 38 ms. 128, 256 and 512 were level (within 5%) from 16 to 512 rows.
constexpr int kPackRows = 256;

/// A weight packed for MKL: an anonymous mapping of `bytes`.
struct Packed {
  void *data;
  size_t bytes;
};

/// All copies of one weight are in MKL's one format for its type.
struct Format {
  int32_t type;
};

using Copies = PackedWeights<Format, Packed *>;
Copies packedWeights;

void destroy(Packed *p) {
  munmap(p->data, p->bytes);
  delete p;
}

/// How one operand is passed: `data`, leading dimension `ld`, transposed
/// if `trans` (row-major order).
struct View {
  const char *data;
  int ld;
  bool trans;
};

/// `m` as BLAS reads op(m) (`opTrans`): row-major, or the transpose of
/// row-major; false if neither.
bool viewOf(const GemmMatrix &m, bool opTrans, View &out) {
  int64_t ld;
  bool transposed;
  if (!blasLayout(m.rows, m.cols, m.rowStride, m.colStride,
                  std::numeric_limits<int>::max(), ld, transposed))
    return false;
  out = {m.data, int(ld), transposed != opTrans};
  return true;
}

/// B (K x N after op, described by `view`) packed once, or null (out of
/// memory, or handed over and dropped with no packed copy).
Packed *packedWeight(const mkl::Api &mk, int32_t type, const GemmMatrix &b,
                     const Layout &layout, const View &view, int k, int n) {
  auto same = [](const Format &x, const Format &y) { return x.type == y.type; };
  return packedWeights.find(
      b.data, layout, type, Format{type}, same,
      [&](const Copies::Copy *from) -> Packed * {
        // One format per type: `from` (another layout's copy) never comes.
        if (from)
          return nullptr;
        size_t bytes = type == LINFUSE_F32
                           ? mk.sgemmPackGetSize(mkl::kMatrixB, kPackRows, n, k)
                           : mk.bf16PackGetSize(mkl::kMatrixB, kPackRows, n, k);
        if (bytes == 0)
          return nullptr;
        void *data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (data == MAP_FAILED)
          return nullptr;
        int trans = view.trans ? mkl::kTrans : mkl::kNoTrans;
        if (type == LINFUSE_F32)
          mk.sgemmPack(mkl::kRowMajor, mkl::kMatrixB, trans, kPackRows, n, k,
                       1.0f, reinterpret_cast<const float *>(view.data),
                       view.ld, static_cast<float *>(data));
        else
          mk.bf16Pack(mkl::kRowMajor, mkl::kMatrixB, trans, kPackRows, n, k,
                      reinterpret_cast<const uint16_t *>(view.data), view.ld,
                      static_cast<uint16_t *>(data));
        // No exceptions in the runtime: a failed allocation declines.
        auto *packed = new (std::nothrow) Packed{data, bytes};
        if (!packed)
          munmap(data, bytes);
        return packed;
      });
}

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

struct FinishTask {
  int32_t cType, epilogue;
  FinishRows rows;
};

void finishTask(int64_t lo, int64_t hi, void *context) {
  const auto &t = *static_cast<const FinishTask *>(context);
  finishRows(t.cType, t.epilogue, t.rows, lo, hi);
}

/// Sets MKL's thread count for the calling thread while it lives.
class MklThreads {
public:
  MklThreads(const mkl::Api &mk, int n)
      : set(mk.setNumThreadsLocal), saved(set(n)) {}
  ~MklThreads() { set(saved); }
  MklThreads(const MklThreads &) = delete;
  MklThreads &operator=(const MklThreads &) = delete;

private:
  int (*set)(int);
  int saved;
};

} // namespace

bool linfuse::runtime::mklGemm(int32_t abType, int32_t cType,
                               const GemmMatrix &a, bool transA,
                               const GemmMatrix &b, bool transB,
                               const GemmMatrix *bias, const GemmMatrix &c,
                               int32_t epilogue, bool constantB) {
  if (!constantB || !keepsWeightCopies() ||
      (abType != LINFUSE_F32 && abType != LINFUSE_BF16) ||
      (cType != LINFUSE_F32 && cType != abType))
    return false;
  // A single product: one A, one B, one C.
  if (a.batch != 1 || b.batch != 1 || c.batch != 1)
    return false;
  int64_t m = c.rows, n = c.cols, k = transA ? a.rows : a.cols;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (m <= 0 || n <= 0 || k <= 0 || m > kMaxInt || n > kMaxInt || k > kMaxInt)
    return false;
  if (k * n < kMinWeight || n < kMinColumns)
    return false;
  View av, bv;
  if (!viewOf(a, transA, av) || !viewOf(b, transB, bv))
    return false;
  // A bias is read densely.
  if (bias && bias->cols > 1 && bias->colStride != 1)
    return false;
  const mkl::Api *mk = wanted() ? api() : nullptr;
  if (!mk)
    return false;

  // One row of output (decode) runs on oneDNN's gemm:jit over the plain
  // weight, as without MKL, unless every product reads copies (then MKL's
  // where it has one). A handed-over weight goes to oneDNN, which reorders
  // it over its own bytes (MKL's packed layout is larger: new memory).
  Layout bLayout = Layout::of(b, transB);
  if (m == 1 && weightReorder() != LINFUSE_REORDER_ALWAYS)
    return false;
  if (handedOver(b.data) && !packedWeights.has(b.data, bLayout, abType))
    return false;
  Packed *packed = packedWeight(*mk, abType, b, bLayout, bv, int(k), int(n));
  if (!packed)
    return false;

  // The f32 product goes straight into C where it can, else into a
  // temporary that the final pass rounds into C.
  int64_t cLd = rowMajorLd(c.rows, c.cols, c.rowStride, c.colStride, kMaxInt);
  bool inC = cType == LINFUSE_F32 && cLd != 0;
  std::unique_ptr<void, FreeDeleter> scratch;
  float *acc = reinterpret_cast<float *>(c.data);
  int ldAcc = int(cLd);
  if (!inC) {
    scratch.reset(std::malloc(size_t(m) * size_t(n) * sizeof(float)));
    if (!scratch)
      return false;
    acc = static_cast<float *>(scratch.get());
    ldAcc = int(n);
  }
  std::unique_ptr<void, FreeDeleter> biasScratch;
  const float *biasValues = nullptr;
  if (bias) {
    if (cType == LINFUSE_F32) {
      biasValues = reinterpret_cast<const float *>(bias->data);
    } else {
      biasScratch.reset(std::malloc(size_t(n) * sizeof(float)));
      if (!biasScratch)
        return false;
      auto *values = static_cast<float *>(biasScratch.get());
      const auto *raw = reinterpret_cast<const BFloat *>(bias->data);
      for (int64_t j = 0; j < n; ++j)
        values[j] = toFloat(raw[j * bias->colStride]);
      biasValues = values;
    }
  }

  double flops = 2.0 * double(m) * double(n) * double(k);
  int threads = flops < kSerialFlops ? 1 : configuredThreads();
  {
    MklThreads scope(*mk, threads);
    int transA_ = av.trans ? mkl::kTrans : mkl::kNoTrans;
    if (abType == LINFUSE_F32)
      mk->sgemmCompute(mkl::kRowMajor, transA_, mkl::kPacked, int(m), int(n),
                       int(k), reinterpret_cast<const float *>(av.data), av.ld,
                       static_cast<const float *>(packed->data), int(k), 0.0f,
                       acc, ldAcc);
    else
      mk->bf16Compute(mkl::kRowMajor, transA_, mkl::kPacked, int(m), int(n),
                      int(k), 1.0f, reinterpret_cast<const uint16_t *>(av.data),
                      av.ld, static_cast<const uint16_t *>(packed->data),
                      int(k), 0.0f, acc, ldAcc);
  }
  if (!inC || biasValues || epilogue != LINFUSE_EPILOGUE_NONE) {
    FinishTask task{cType, epilogue,
                    FinishRows{acc, ldAcc, 1, c.data, c.rowStride, c.colStride,
                               n, biasValues}};
    linfuse_parallel_for(finishTask, &task, m, n);
  }
  countMklGemmCall();
  return true;
}

void linfuse::runtime::releaseMklPackedWeights() {
  packedWeights.clear(destroy);
}

void linfuse::runtime::mklPackedSources(ByteRanges &out) {
  packedWeights.sources(out);
}

void linfuse::runtime::forgetMklCopies(uintptr_t begin, uintptr_t end,
                                       bool keepHandedOver) {
  packedWeights.forget(begin, end, destroy, keepHandedOver);
}

int32_t linfuse_cpu_set_mkl(int32_t m) {
  if (m < LINFUSE_MKL_NEVER || m > LINFUSE_MKL_ALWAYS)
    return -1;
  return mode().exchange(m);
}

int32_t linfuse_cpu_get_mkl(void) {
  return mode().load(std::memory_order_relaxed);
}

int32_t linfuse_cpu_mkl_available(void) { return api() ? 1 : 0; }
