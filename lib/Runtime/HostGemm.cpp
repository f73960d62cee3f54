//===- HostGemm.cpp - linfuse_cpu_gemm on oneDNN and OpenBLAS -------------===//
//
// C = epilogue(alpha * op(A) * op(B) + beta * C + bias) on the host.
//
// With alpha = 1 and beta = 0 (what the compiler emits) the product runs on
// oneDNN's matmul (OneDnnGemm.cpp): native f16/bf16, bias and activation
// fused, operands in place. What oneDNN does not take (alpha != 1, beta !=
// 0, K = 0, layouts it has no kernel for) takes the path below.
//
// f32 operands are handed to cblas_sgemm in place whenever their strides
// allow it (row-major, or the transpose of row-major, with a leading
// dimension BLAS accepts); anything else is first copied into a contiguous
// f32 temporary. f16/bf16 inputs are widened into such temporaries
// (products accumulate in f32); a constant f16/bf16 B (a weight, flagged
// LINFUSE_GEMM_CONSTANT_B) only once, kept until
// linfuse_cpu_release_packed_weights (WidenedWeights). sgemm writes an f32 C in
// place if its strides allow, else an f32 accumulator; one final pass then adds
// the bias, applies the epilogue and rounds into C (skipped when there is
// nothing to do).
//
// Everything is validated before any operand is read, so a bad descriptor
// returns an error instead of crashing; no call aborts.
//
// Threads: the function keeps no state besides the atomic stats and the
// recorded error, so callers may run it concurrently (OpenBLAS's pthread
// build accepts concurrent callers). Each sgemm may use all of OpenBLAS's
// own threads (OPENBLAS_NUM_THREADS, or linfuse_set_num_threads, sizes
// them), so many calling threads can oversubscribe the cores.
//
//===----------------------------------------------------------------------===//

#include "HostBlas.h"
#include "OneDnnGemm.h"
#include "RuntimeInternal.h"

#include <cblas.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

using namespace linfuse::runtime;

namespace {

constexpr const char *kFn = "linfuse_cpu_gemm";

/// Whether bf16 GEMMs are offered to oneDNN 3 (which takes the weights it
/// reorders, at M > 1): yes unless $LINFUSE_DNNL3_BF16 is 0 (everything
/// bf16 on oneDNN 2, as before).
bool bf16OnOneDnn3() {
  static const bool on = !switchedOff("LINFUSE_DNNL3_BF16");
  return on;
}

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

/// A rows x cols matrix whose element (i, j) is element
/// i * rowStride + j * colStride of `data` (strides in elements).
struct Matrix {
  char *data;
  int64_t rows, cols, rowStride, colStride;
};

/// A validated memref argument of rank 1, 2 or 3: `batch` matrices (1 for
/// ranks 1 and 2; rank 1 is read as one row) `batchStride` elements apart;
/// `data` is aligned + offset.
struct Operand : GemmMatrix {
  int64_t elementSize = 4;

  Matrix at(int64_t b) const {
    return {data + b * batchStride * elementSize, rows, cols, rowStride,
            colStride};
  }
};

/// Reads the descriptor of argument `name`, rejecting what would make it
/// unsafe to use: a null descriptor, negative sizes, and a null data pointer
/// for a non-empty memref.
int32_t readOperand(const char *name, int64_t rank, void *descriptor,
                    int32_t dtype, Operand &out) {
  if (!descriptor)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: %s has a null descriptor",
                kFn, name);
  const auto *view = static_cast<const linfuse_memref_view *>(descriptor);
  const int64_t *sizes = view->sizes_and_strides;
  const int64_t *strides = view->sizes_and_strides + rank;
  bool empty = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0)
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: %s has a negative size %" PRId64
                  " in dimension %" PRId64,
                  kFn, name, sizes[d], d);
    empty |= sizes[d] == 0;
  }
  if (!view->aligned && !empty)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: %s is not empty but its data pointer is null", kFn, name);

  out.elementSize = dtypeBytes(dtype);
  out.data =
      static_cast<char *>(view->aligned) + view->offset * out.elementSize;
  out.cols = sizes[rank - 1];
  out.colStride = strides[rank - 1];
  if (rank >= 2) {
    out.rows = sizes[rank - 2];
    out.rowStride = strides[rank - 2];
  }
  if (rank == 3) {
    out.batch = sizes[0];
    out.batchStride = strides[0];
  }
  return LINFUSE_OK;
}

//===----------------------------------------------------------------------===//
// Temporaries
//===----------------------------------------------------------------------===//

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float[], FreeDeleter>;

/// malloc rather than new: an allocation failure must become an error
/// status, whether or not the library is built with exceptions.
int32_t allocate(int64_t count, const char *what, FloatBuffer &out) {
  size_t bytes;
  bool overflow = __builtin_mul_overflow(std::max<int64_t>(count, 1),
                                         sizeof(float), &bytes);
  out.reset(overflow ? nullptr : static_cast<float *>(std::malloc(bytes)));
  if (!out)
    return fail(LINFUSE_ERROR_OUT_OF_MEMORY,
                "%s: out of memory allocating %" PRId64 " floats for %s", kFn,
                count, what);
  return LINFUSE_OK;
}

/// Copies `m` (element type `dtype`) into the contiguous row-major `dst`,
/// widened to f32.
void gather(int32_t dtype, const Matrix &m, float *dst) {
  withStorageType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = reinterpret_cast<const T *>(m.data);
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j)
        dst[i * m.cols + j] = toFloat(src[i * m.rowStride + j * m.colStride]);
  });
}

/// f32 copies of constant f16/bf16 weights for the path below, made on a
/// weight's first call and kept until linfuse_cpu_release_packed_weights
/// (the contract of LINFUSE_GEMM_CONSTANT_B, as for oneDNN's reordered
/// weights). Without them every call widened the whole weight: f16 Q/K/V
/// at hidden 4096, M = 1, took 185 ms per call on an AMD EPYC, which has no
/// oneDNN f16 kernels, against 4.2 ms in PyTorch. Costs twice the f16
/// weight's bytes while kept.
class WidenedWeights {
public:
  /// `b`'s matrices (one if its batch stride is 0) widened into contiguous
  /// row-major f32 matrices rows * cols apart; null if out of memory.
  const float *find(int32_t dtype, const Operand &b) {
    Key key{b.data, dtype,         b.batch,     b.rows,
            b.cols, b.batchStride, b.rowStride, b.colStride};
    std::lock_guard<std::mutex> lock(mutex);
    auto it = copies.find(key);
    if (it != copies.end())
      return it->second.get();
    int64_t matrices = b.batchStride == 0 ? 1 : b.batch;
    FloatBuffer copy;
    if (allocate(matrices * b.rows * b.cols, "a widened weight", copy))
      return nullptr;
    for (int64_t i = 0; i < matrices; ++i)
      gather(dtype, b.at(i), copy.get() + i * b.rows * b.cols);
    return copies.emplace(key, std::move(copy)).first->second.get();
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    copies.clear();
  }

  /// The copies of weights that start in [begin, end).
  void clear(uintptr_t begin, uintptr_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = copies.begin(); it != copies.end();) {
      auto p = reinterpret_cast<uintptr_t>(std::get<0>(it->first));
      it = p >= begin && p < end ? copies.erase(it) : std::next(it);
    }
  }

private:
  using Key = std::tuple<const char *, int32_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t>;
  std::mutex mutex;
  std::map<Key, FloatBuffer> copies;
};

WidenedWeights &widenedWeights() {
  static WidenedWeights *instance = new WidenedWeights; // never destroyed:
  return *instance; // calls may come from other static destructors
}

//===----------------------------------------------------------------------===//
// BLAS layout
//===----------------------------------------------------------------------===//

/// How a matrix is passed to cblas_sgemm (row-major order): `data` with
/// leading dimension `ld`, transposed if `trans`.
struct BlasMatrix {
  float *data;
  blasint ld;
  bool trans;
};

/// How an f32 matrix can be used in place: as row-major (`trans` false) or
/// as the transpose of a row-major matrix (`trans` true). False if neither.
bool inPlaceLayout(int32_t dtype, const Matrix &m, BlasMatrix &out) {
  int64_t ld;
  bool transposed;
  if (dtype != LINFUSE_F32 ||
      !blasLayout(m.rows, m.cols, m.rowStride, m.colStride,
                  std::numeric_limits<blasint>::max(), ld, transposed))
    return false;
  out = {reinterpret_cast<float *>(m.data), blasint(ld), transposed};
  return true;
}

/// An input (A or B) of one batch element for sgemm: in place if possible,
/// else widened into `scratch` (sized for it by the caller).
BlasMatrix prepareInput(int32_t dtype, const Matrix &m, bool opTrans,
                        float *scratch) {
  BlasMatrix blas;
  if (inPlaceLayout(dtype, m, blas)) {
    blas.trans = blas.trans != opTrans;
    return blas;
  }
  gather(dtype, m, scratch);
  return {scratch, blasint(std::max<int64_t>(m.cols, 1)), opTrans};
}

CBLAS_TRANSPOSE blasTrans(bool trans) {
  return trans ? CblasTrans : CblasNoTrans;
}

/// c = alpha * op(a) * op(b) + beta * c, c M x N. A transposed `c` (the
/// transpose of a row-major matrix) is computed as
/// c^T = op(b)^T * op(a)^T. beta == 0 does not read c (OpenBLAS).
/// Returns the number of BLAS calls made.
int64_t sgemm(const BlasMatrix &a, const BlasMatrix &b, const BlasMatrix &c,
              int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  // One row (decode, M = 1): a matrix-vector product. OpenBLAS's sgemm has
  // no M = 1 fast path and threads a merged (wide) call badly; sgemv reads
  // B once at memory speed, which is what merging wide weights is for.
  if (m == 1 && !c.trans && k > 0) {
    const float *x = a.data;
    blasint incx = a.trans ? a.ld : 1; // op(A) = 1 x K: a row or a column.
    if (beta == 0.0f)
      std::fill(c.data, c.data + n, 0.0f); // Never read what C held.
    if (b.trans)                           // B stored N x K: y = B x.
      cblas_sgemv(CblasRowMajor, CblasNoTrans, blasint(n), blasint(k), alpha,
                  b.data, b.ld, x, incx, beta, c.data, 1);
    else // B stored K x N: y = B^T x.
      cblas_sgemv(CblasRowMajor, CblasTrans, blasint(k), blasint(n), alpha,
                  b.data, b.ld, x, incx, beta, c.data, 1);
    return 1;
  }
  if (c.trans) {
    cblas_sgemm(CblasRowMajor, blasTrans(!b.trans), blasTrans(!a.trans),
                blasint(n), blasint(m), blasint(k), alpha, b.data, b.ld, a.data,
                a.ld, beta, c.data, c.ld);
    return 1;
  }
  // A merged GEMM is wide (N = the sum of its members' N). OpenBLAS runs
  // one very wide sgemm slower than the same columns in blocks of 4096
  // (measured on the 2-core machine at hidden 4096, docs/Benchmarks.md:
  // merged Q/K/V at M = 16 went from 0.84-0.91x of three separate calls to
  // 0.96-0.99x, gate/up at M = 128 from 0.94x to 0.98x), so wide C is
  // computed in column blocks: one linfuse GEMM, several BLAS calls.
  // LINFUSE_CPU_GEMM_BLOCK_N overrides the width (0: never split).
  static const int64_t splitN = [] {
    const char *v = std::getenv("LINFUSE_CPU_GEMM_BLOCK_N");
    return v ? std::atoll(v) : int64_t(4096);
  }();
  if (splitN > 0 && n > splitN) {
    int64_t calls = 0;
    for (int64_t n0 = 0; n0 < n; n0 += splitN, ++calls) {
      int64_t w = std::min(splitN, n - n0);
      const float *bb = b.trans ? b.data + n0 * b.ld : b.data + n0;
      cblas_sgemm(CblasRowMajor, blasTrans(a.trans), blasTrans(b.trans),
                  blasint(m), blasint(w), blasint(k), alpha, a.data, a.ld, bb,
                  b.ld, beta, c.data + n0, c.ld);
    }
    return calls;
  }
  cblas_sgemm(CblasRowMajor, blasTrans(a.trans), blasTrans(b.trans), blasint(m),
              blasint(n), blasint(k), alpha, a.data, a.ld, b.data, b.ld, beta,
              c.data, c.ld);
  return 1;
}

//===----------------------------------------------------------------------===//
// Bias, epilogue and rounding
//===----------------------------------------------------------------------===//

/// C = round(epilogue(acc + bias)) for one batch element, in one pass
/// (acc may be C itself; bias: N values or null).
void finish(int32_t cType, int32_t epilogue, const BlasMatrix &acc,
            const Matrix &c, const float *bias) {
  FinishRows f{acc.data,
               acc.trans ? 1 : int64_t(acc.ld),
               acc.trans ? int64_t(acc.ld) : 1,
               c.data,
               c.rowStride,
               c.colStride,
               c.cols,
               bias};
  finishRows(cType, epilogue, f, 0, c.rows);
}

/// acc = beta * acc for K == 0 (no BLAS call: its ld checks would reject
/// the empty A and B). beta == 0 writes zeros without reading.
void scale(const BlasMatrix &acc, int64_t m, int64_t n, float beta) {
  int64_t rows = acc.trans ? n : m, cols = acc.trans ? m : n;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float &x = acc.data[i * acc.ld + j];
      x = beta == 0.0f ? 0.0f : beta * x;
    }
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

struct Problem {
  Operand a, b, c, bias;
  int64_t batch, m, n, k;
};

int32_t validateShapes(int64_t aRank, void *a, int64_t bRank, void *b,
                       int64_t biasRank, void *bias, int64_t cRank, void *c,
                       int32_t abType, int32_t cType, int32_t flags,
                       Problem &p) {
  if ((aRank != 2 && aRank != 3) || bRank != aRank || cRank != aRank)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: A, B and C must all have rank 2 or all rank 3, got ranks "
                "%" PRId64 ", %" PRId64 " and %" PRId64,
                kFn, aRank, bRank, cRank);
  bool hasBias = flags & LINFUSE_GEMM_HAS_BIAS;
  if (hasBias && biasRank != 1)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: bias must have rank 1, got rank %" PRId64, kFn, biasRank);
  if (int32_t s = readOperand("A", aRank, a, abType, p.a))
    return s;
  if (int32_t s = readOperand("B", bRank, b, abType, p.b))
    return s;
  if (int32_t s = readOperand("C", cRank, c, cType, p.c))
    return s;
  if (hasBias)
    if (int32_t s = readOperand("bias", 1, bias, cType, p.bias))
      return s;

  // op(A) is M x K, op(B) is K x N.
  bool transA = flags & LINFUSE_GEMM_TRANSPOSE_A;
  bool transB = flags & LINFUSE_GEMM_TRANSPOSE_B;
  int64_t am = transA ? p.a.cols : p.a.rows, ak = transA ? p.a.rows : p.a.cols;
  int64_t bk = transB ? p.b.cols : p.b.rows, bn = transB ? p.b.rows : p.b.cols;
  if (p.a.batch != p.b.batch || p.a.batch != p.c.batch)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: batch mismatch: A has %" PRId64 ", B has %" PRId64
                ", C has %" PRId64,
                kFn, p.a.batch, p.b.batch, p.c.batch);
  if (ak != bk)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: K mismatch: op(A) is %" PRId64 "x%" PRId64
                " but op(B) is %" PRId64 "x%" PRId64,
                kFn, am, ak, bk, bn);
  if (am != p.c.rows)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: M mismatch: op(A) is %" PRId64 "x%" PRId64
                " but C is %" PRId64 "x%" PRId64,
                kFn, am, ak, p.c.rows, p.c.cols);
  if (bn != p.c.cols)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: N mismatch: op(B) is %" PRId64 "x%" PRId64
                " but C is %" PRId64 "x%" PRId64,
                kFn, bk, bn, p.c.rows, p.c.cols);
  if (hasBias && p.bias.cols != bn)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: N mismatch: bias has %" PRId64
                " elements but C is %" PRId64 "x%" PRId64,
                kFn, p.bias.cols, p.c.rows, p.c.cols);
  p.batch = p.c.batch;
  p.m = am;
  p.n = bn;
  p.k = ak;

  // Temporaries use ld = cols, so only the sizes themselves must fit.
  constexpr int64_t kMaxBlas = std::numeric_limits<blasint>::max();
  if (p.m > kMaxBlas || p.n > kMaxBlas || p.k > kMaxBlas)
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: M=%" PRId64 ", N=%" PRId64 ", K=%" PRId64
                " exceeds the BLAS integer range (%" PRId64 ")",
                kFn, p.m, p.n, p.k, kMaxBlas);
  return LINFUSE_OK;
}

} // namespace

void linfuse::runtime::setBlasThreads(int n) { openblas_set_num_threads(n); }

/// i8 x i8 -> i32 where oneDNN did not take it (beta = 1, K = 0, no
/// kernel): exact, as linalg defines it (operands sign-extended, products
/// and sums wrapping modulo 2^32; computed in uint32_t, where wrapping is
/// defined).
static void integerGemm(const Problem &p, bool transA, bool transB,
                        bool hasBias, bool accumulate) {
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    Matrix a = p.a.at(batch), b = p.b.at(batch), c = p.c.at(batch);
    auto at = [](const Matrix &m, bool trans, int64_t i, int64_t j) {
      return trans ? i * m.colStride + j * m.rowStride
                   : i * m.rowStride + j * m.colStride;
    };
    const auto *aData = reinterpret_cast<const int8_t *>(a.data);
    const auto *bData = reinterpret_cast<const int8_t *>(b.data);
    auto *cData = reinterpret_cast<int32_t *>(c.data);
    Matrix bias = p.bias.at(0);
    const auto *biasData =
        hasBias ? reinterpret_cast<const int32_t *>(bias.data) : nullptr;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        int32_t &out = cData[i * c.rowStride + j * c.colStride];
        uint32_t sum = accumulate ? uint32_t(out) : 0u;
        for (int64_t q = 0; q < p.k; ++q)
          sum += uint32_t(int32_t(aData[at(a, transA, i, q)]) *
                          int32_t(bData[at(b, transB, q, j)]));
        if (biasData)
          sum += uint32_t(biasData[j * bias.colStride]);
        out = int32_t(sum);
      }
  }
}

int32_t linfuse_cpu_gemm(int64_t a_rank, void *a, int64_t b_rank, void *b,
                         int64_t bias_rank, void *bias, int64_t c_rank, void *c,
                         int32_t ab_type, int32_t c_type, int32_t flags,
                         int32_t epilogue, float alpha, float beta) {
  if (int32_t s =
          validateGemmCodes(kFn, ab_type, c_type, flags, epilogue, alpha, beta))
    return s;
  Problem p;
  if (int32_t s = validateShapes(a_rank, a, b_rank, b, bias_rank, bias, c_rank,
                                 c, ab_type, c_type, flags, p))
    return s;
  countGemmCall();
  if (p.batch == 0 || p.m == 0 || p.n == 0)
    return LINFUSE_OK;

  bool transA = flags & LINFUSE_GEMM_TRANSPOSE_A;
  bool transB = flags & LINFUSE_GEMM_TRANSPOSE_B;
  bool hasBias = flags & LINFUSE_GEMM_HAS_BIAS;

  // The common case, C = epilogue(op(A) op(B) + bias), on oneDNN: every
  // type natively, in place, the bias and the activation fused.
  if (p.k > 0 && alpha == 1.0f && beta == 0.0f) {
    const GemmMatrix *biasMatrix = hasBias ? &p.bias : nullptr;
    bool constantB = flags & LINFUSE_GEMM_CONSTANT_B;
    // f16 has only oneDNN 3; bf16 weights it reorders (M > 1) run faster
    // there (AMX kernels, docs/Design.md) and it declines other bf16
    // problems; the rest runs on oneDNN 2, which is also where bf16 goes
    // when oneDNN 3 is missing.
    bool three =
        ab_type == LINFUSE_F16 || (ab_type == LINFUSE_BF16 && bf16OnOneDnn3());
    // f16 products of a few rows go to linfuse's own kernels
    // (FewRowGemm.cpp), f32 and large bf16 weights to oneMKL where it
    // serves them (Intel CPUs, MklGemm.cpp).
    if (fewRowGemm(ab_type, c_type, p.a, transA, p.b, transB, biasMatrix, p.c,
                   epilogue, constantB) ||
        mklGemm(ab_type, c_type, p.a, transA, p.b, transB, biasMatrix, p.c,
                epilogue, constantB) ||
        (three && oneDnn3Gemm(ab_type, c_type, p.a, transA, p.b, transB,
                              biasMatrix, p.c, epilogue, constantB)) ||
        (ab_type != LINFUSE_F16 &&
         oneDnnGemm(ab_type, c_type, p.a, transA, p.b, transB, biasMatrix, p.c,
                    epilogue, constantB))) {
      countKernelLaunches(1);
      return LINFUSE_OK;
    }
  }

  // The fallback reads B's plain values, which may have been handed over
  // (linfuse_cpu_hand_over_weights) and dropped: only copies are left.
  if ((flags & LINFUSE_GEMM_CONSTANT_B) &&
      plainValuesGone(p.b.data, p.b.spanBytes(p.b.elementSize)))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: the weight at %p was handed over to its reordered "
                "copies, but this %" PRId64 "x%" PRId64 "x%" PRId64
                " product cannot read them (a oneDNN copy serves only "
                "single products with alpha 1 and beta 0)",
                kFn, static_cast<void *>(p.b.data), p.m, p.k, p.n);
  countFallbackGemmCall();
  if (ab_type == LINFUSE_I8) {
    integerGemm(p, transA, transB, hasBias, beta != 0.0f);
    countKernelLaunches(1);
    return LINFUSE_OK;
  }
  // Strides are the same for every batch element, so batch element 0
  // decides which temporaries are needed; they are reused across the batch.
  BlasMatrix probe;
  FloatBuffer aScratch, bScratch, accScratch, biasValues;
  if (p.k > 0 && !inPlaceLayout(ab_type, p.a.at(0), probe))
    if (int32_t s = allocate(p.m * p.k, "the A temporary", aScratch))
      return s;
  // A constant narrow B is widened once (WidenedWeights), else per call.
  const float *widenedB = nullptr;
  if (keepsWeightCopies() && p.k > 0 && ab_type != LINFUSE_F32 &&
      (flags & LINFUSE_GEMM_CONSTANT_B))
    if (!(widenedB = widenedWeights().find(ab_type, p.b)))
      return LINFUSE_ERROR_OUT_OF_MEMORY;
  if (p.k > 0 && !widenedB && !inPlaceLayout(ab_type, p.b.at(0), probe))
    if (int32_t s = allocate(p.k * p.n, "the B temporary", bScratch))
      return s;
  // An f32 C that BLAS can address is its own accumulator, whatever the
  // input type.
  bool accInC = inPlaceLayout(c_type, p.c.at(0), probe);
  if (!accInC)
    if (int32_t s = allocate(p.m * p.n, "the f32 accumulator", accScratch))
      return s;
  if (hasBias) {
    if (int32_t s = allocate(p.n, "the bias", biasValues))
      return s;
    gather(c_type, p.bias.at(0), biasValues.get());
  }
  // With the accumulator in C, C is done after sgemm unless something is
  // left to apply.
  bool needFinish = !accInC || hasBias || epilogue != LINFUSE_EPILOGUE_NONE;

  int64_t launches = 0;
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    Matrix cMatrix = p.c.at(batch);
    BlasMatrix acc;
    if (accInC) {
      inPlaceLayout(c_type, cMatrix, acc);
    } else {
      acc = {accScratch.get(), blasint(p.n), false};
      if (beta != 0.0f) // beta == 0 never reads C (it may hold NaN).
        gather(c_type, cMatrix, acc.data);
    }

    if (p.k == 0) {
      scale(acc, p.m, p.n, beta);
    } else {
      BlasMatrix aBlas =
          prepareInput(ab_type, p.a.at(batch), transA, aScratch.get());
      BlasMatrix bBlas =
          widenedB
              ? BlasMatrix{const_cast<float *>(widenedB) +
                               (p.b.batchStride == 0 ? 0 : batch) * p.b.rows *
                                   p.b.cols,
                           blasint(std::max<int64_t>(p.b.cols, 1)), transB}
              : prepareInput(ab_type, p.b.at(batch), transB, bScratch.get());
      launches += sgemm(aBlas, bBlas, acc, p.m, p.n, p.k, alpha, beta);
    }

    if (needFinish)
      finish(c_type, epilogue, acc, cMatrix, biasValues.get());
  }
  countKernelLaunches(launches);
  return LINFUSE_OK;
}

void linfuse::runtime::releaseWidenedWeights() { widenedWeights().clear(); }

void linfuse::runtime::releaseWidenedWeights(uintptr_t begin, uintptr_t end) {
  widenedWeights().clear(begin, end);
}
