//===- CudaGemm.cpp - linfuse_cuda_gemm on cuBLASLt -----------------------===//
//
// C = epilogue(alpha * op(A) * op(B) + beta * C + bias) on the device, one
// cublasLtMatmul per call (a rank-3 call is one strided-batched matmul).
//
// Row-major views on column-major cuBLASLt: a row-major C (M x N, row
// stride ldc) is, read column-major, the N x M matrix C^T with leading
// dimension ldc. So the call computes C^T = op(B)^T * op(A)^T with B in
// cuBLASLt's A slot and A in its B slot; an operand stored row-major is its
// own transpose read column-major, one stored column-major (a transposed
// view) is itself. Strided column slices (ld > width) are used in place;
// any other layout (non-unit strides in both dimensions, a C that is not
// row-major) is LINFUSE_ERROR_UNSUPPORTED.
//
// Epilogues are cuBLASLt's: bias (added per column of C, i.e. per row of
// C^T, which is what CUBLASLT_EPILOGUE_BIAS broadcasts; its element type is
// C's, the default cuBLASLt requires for non-integer, non-fp8 outputs),
// RELU and GELU. cuBLASLt's GELU is the tanh approximation
// 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), so it implements gelu_tanh;
// gelu_erf is not mapped to it (TOOLCHAIN.md: check numerically on a GPU
// first; the device tests compare it with both forms) and, with silu, is
// UNSUPPORTED here: the compiler fuses only the supported epilogues for cuda.
//
// Products accumulate in f32 (CUBLAS_COMPUTE_32F) for every float input
// type; f32 inputs are exact FP32 unless LINFUSE_CUDA_ALLOW_TF32=1 is set in
// the environment. i8 x i8 -> i32 runs on cuBLASLt's int8 (IMMA) kernels
// (CUBLAS_COMPUTE_32I, int32 alpha 1 and beta 0 or 1, no bias or
// activation) where their layout rules hold (int8Refusal: the TN format,
// sizes and leading dimensions multiples of 4); what breaks them is
// LINFUSE_ERROR_UNSUPPORTED, and the compiler raises only matmuls whose
// static shapes keep them.
//
// Shared state, created once: the cuBLASLt handle, a 32 MiB workspace
// (every call runs on the runtime's stream, so calls never overlap on it;
// calls recorded into a graph run when it is launched, on that stream too)
// and the algorithm that cublasLtMatmulAlgoGetHeuristic picked for each
// problem key (shapes, types, transposes, leading dimensions, batch
// strides, epilogue and pointer alignments).
//
//===----------------------------------------------------------------------===//

#include "CudaGemmPlan.h"
#include "CudaLoader.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace linfuse::runtime;
using namespace linfuse::runtime::cuda;

namespace {

constexpr const char *kFn = "linfuse_cuda_gemm";
constexpr uint64_t kWorkspaceBytes = uint64_t(32) << 20;

/// Returns the recorded error of a failing cuBLASLt call `name(args)`.
#define LINFUSE_LT_TRY(name, args)                                             \
  do {                                                                         \
    cublasStatus_t status_ = cublasLt().name args;                             \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                      \
      return check(status_, kFn, #name);                                       \
  } while (false)

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

cudaDataType cudaType(int32_t dtype) {
  switch (dtype) {
  case LINFUSE_F16:
    return CUDA_R_16F;
  case LINFUSE_BF16:
    return CUDA_R_16BF;
  case LINFUSE_I8:
    return CUDA_R_8I;
  case LINFUSE_I32:
    return CUDA_R_32I;
  default:
    return CUDA_R_32F;
  }
}

/// A memref argument as batch x rows x cols (lower ranks have leading 1s;
/// rank 1 is one row) with element strides, data at aligned + offset.
struct View {
  char *data = nullptr;
  std::array<int64_t, 3> size{1, 1, 1};
  std::array<int64_t, 3> stride{0, 0, 1};

  int64_t batch() const { return size[0]; }
  int64_t rows() const { return size[1]; }
  int64_t cols() const { return size[2]; }
};

int32_t readView(const char *name, int64_t rank, void *descriptor,
                 int32_t dtype, View &view) {
  if (!descriptor)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: %s has a null descriptor",
                kFn, name);
  const auto *memref = static_cast<const linfuse_memref_view *>(descriptor);
  int64_t elements = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = memref->sizes_and_strides[d];
    if (size < 0)
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: %s has a negative size %" PRId64
                  " in dimension %" PRId64,
                  kFn, name, size, d);
    view.size[3 - rank + d] = size;
    view.stride[3 - rank + d] = memref->sizes_and_strides[rank + d];
    elements *= size;
  }
  if (!memref->aligned && elements != 0)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: %s is not empty but its data pointer is null", kFn, name);
  view.data =
      static_cast<char *>(memref->aligned) + memref->offset * dtypeBytes(dtype);
  return LINFUSE_OK;
}

/// The problem after validation: op(A) is M x K, op(B) K x N, C M x N.
struct Problem {
  View a, b, c, bias;
  bool transA, transB, hasBias;
  int64_t m, n, k;
};

/// The checks (and messages) of linfuse_cpu_gemm, on the descriptors only.
/// (The scalar codes are checked first, by validateGemmCodes.)
int32_t validate(int64_t aRank, void *a, int64_t bRank, void *b,
                 int64_t biasRank, void *bias, int64_t cRank, void *c,
                 int32_t abType, int32_t cType, int32_t flags, Problem &p) {
  p.transA = flags & LINFUSE_GEMM_TRANSPOSE_A;
  p.transB = flags & LINFUSE_GEMM_TRANSPOSE_B;
  p.hasBias = flags & LINFUSE_GEMM_HAS_BIAS;

  if ((aRank != 2 && aRank != 3) || bRank != aRank || cRank != aRank)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: A, B and C must all have rank 2 or all rank 3, got ranks "
                "%" PRId64 ", %" PRId64 " and %" PRId64,
                kFn, aRank, bRank, cRank);
  if (p.hasBias && biasRank != 1)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: bias must have rank 1, got rank %" PRId64, kFn, biasRank);
  if (int32_t s = readView("A", aRank, a, abType, p.a))
    return s;
  if (int32_t s = readView("B", bRank, b, abType, p.b))
    return s;
  if (int32_t s = readView("C", cRank, c, cType, p.c))
    return s;
  if (p.hasBias)
    if (int32_t s = readView("bias", 1, bias, cType, p.bias))
      return s;

  p.m = p.transA ? p.a.cols() : p.a.rows();
  p.k = p.transA ? p.a.rows() : p.a.cols();
  int64_t bk = p.transB ? p.b.cols() : p.b.rows();
  p.n = p.transB ? p.b.rows() : p.b.cols();
  if (p.a.batch() != p.c.batch() || p.b.batch() != p.c.batch())
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: batch mismatch: A has %" PRId64 ", B has %" PRId64
                ", C has %" PRId64,
                kFn, p.a.batch(), p.b.batch(), p.c.batch());
  if (bk != p.k)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: K mismatch: op(A) is %" PRId64 "x%" PRId64
                " but op(B) is %" PRId64 "x%" PRId64,
                kFn, p.m, p.k, bk, p.n);
  if (p.m != p.c.rows() || p.n != p.c.cols())
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: op(A) op(B) is %" PRId64 "x%" PRId64 " but C is %" PRId64
                "x%" PRId64,
                kFn, p.m, p.n, p.c.rows(), p.c.cols());
  if (p.hasBias && p.bias.cols() != p.n)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: N mismatch: bias has %" PRId64
                " elements but C is %" PRId64 "x%" PRId64,
                kFn, p.bias.cols(), p.c.rows(), p.c.cols());
  return LINFUSE_OK;
}

//===----------------------------------------------------------------------===//
// Column-major layouts
//===----------------------------------------------------------------------===//

/// A stored matrix read as cuBLASLt's column-major `rows` x `cols` matrix L
/// with leading dimension `ld`: the stored matrix is L^T if `transposed`
/// (it is row-major), else L.
struct LtMatrix {
  uint64_t rows, cols;
  int64_t ld;
  bool transposed;
};

/// False if the view is neither row- nor column-major with a usable leading
/// dimension. The stride of a dimension of size 1 is never used (MLIR
/// canonicalizes it freely), so it is not looked at.
bool asColumnMajor(const View &v, LtMatrix &out) {
  auto unit = [](int64_t size, int64_t stride) {
    return size <= 1 || stride == 1;
  };
  // The leading dimension, 0 if unusable; cuBLASLt wants ld >= its rows.
  auto lead = [](int64_t size, int64_t stride, int64_t minimum) {
    return size <= 1 ? minimum : stride >= minimum ? stride : 0;
  };
  int64_t rows = v.rows(), cols = v.cols();
  if (unit(cols, v.stride[2]))
    if (int64_t ld = lead(rows, v.stride[1], std::max<int64_t>(cols, 1))) {
      out = {uint64_t(cols), uint64_t(rows), ld, true};
      return true;
    }
  if (unit(rows, v.stride[1]))
    if (int64_t ld = lead(cols, v.stride[2], std::max<int64_t>(rows, 1))) {
      out = {uint64_t(rows), uint64_t(cols), ld, false};
      return true;
    }
  return false;
}

int32_t unsupportedLayout(const char *name, const View &v,
                          const char *requirement) {
  return fail(
      LINFUSE_ERROR_UNSUPPORTED,
      "%s: %s (%" PRId64 "x%" PRId64 ", strides [%" PRId64 ", %" PRId64 "]) %s",
      kFn, name, v.rows(), v.cols(), v.stride[1], v.stride[2], requirement);
}

//===----------------------------------------------------------------------===//
// Shared state
//===----------------------------------------------------------------------===//

std::mutex stateMutex;
cublasLtHandle_t handle = nullptr; // guarded by stateMutex
CUdeviceptr workspace = 0;         // guarded by stateMutex
/// Problem key -> the heuristic's algorithm; guarded by stateMutex.
using AlgoKey = std::array<int64_t, 24>;
std::map<AlgoKey, cublasLtMatmulAlgo_t> algorithms;
std::atomic<int64_t> heuristicQueries{0};

/// The handle and workspace, created on first use (call with the context
/// current).
int32_t resources(const char *fn, cublasLtHandle_t &outHandle,
                  CUdeviceptr &outWorkspace) {
  if (int32_t s = acquireCublasLt(fn))
    return s;
  std::lock_guard<std::mutex> lock(stateMutex);
  if (!handle)
    if (int32_t s =
            check(cublasLt().cublasLtCreate(&handle), fn, "cublasLtCreate"))
      return s;
  if (!workspace)
    if (int32_t s = check(driver().cuMemAlloc(&workspace, kWorkspaceBytes), fn,
                          "cuMemAlloc"))
      return s;
  outHandle = handle;
  outWorkspace = workspace;
  return LINFUSE_OK;
}

bool allowTf32() {
  static const bool allowed = [] {
    const char *value = std::getenv("LINFUSE_CUDA_ALLOW_TF32");
    return value && std::strcmp(value, "1") == 0;
  }();
  return allowed;
}

/// The cuBLASLt descriptors of one call, destroyed with it (x, y and c are
/// the layouts of cuBLASLt's A, B and C = D).
struct Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;

  ~Descriptors() {
    const CublasLtApi &lt = cublasLt();
    for (cublasLtMatrixLayout_t layout : {x, y, c})
      if (layout)
        lt.cublasLtMatrixLayoutDestroy(layout);
    if (matmul)
      lt.cublasLtMatmulDescDestroy(matmul);
    if (preference)
      lt.cublasLtMatmulPreferenceDestroy(preference);
  }
};

int32_t createLayout(int32_t dtype, const LtMatrix &m, int64_t batch,
                     int64_t batchStride, cublasLtMatrixLayout_t &out) {
  LINFUSE_LT_TRY(cublasLtMatrixLayoutCreate,
                 (&out, cudaType(dtype), m.rows, m.cols, m.ld));
  if (batch == 1)
    return LINFUSE_OK;
  int32_t count = int32_t(batch);
  LINFUSE_LT_TRY(
      cublasLtMatrixLayoutSetAttribute,
      (out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  LINFUSE_LT_TRY(cublasLtMatrixLayoutSetAttribute,
                 (out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                  &batchStride, sizeof(batchStride)));
  return LINFUSE_OK;
}

template <typename T>
int32_t setAttribute(cublasLtMatmulDesc_t desc,
                     cublasLtMatmulDescAttributes_t attribute, const T &value) {
  LINFUSE_LT_TRY(cublasLtMatmulDescSetAttribute,
                 (desc, attribute, &value, sizeof(value)));
  return LINFUSE_OK;
}

template <typename T>
int32_t setPreference(cublasLtMatmulPreference_t preference,
                      cublasLtMatmulPreferenceAttributes_t attribute,
                      const T &value) {
  LINFUSE_LT_TRY(cublasLtMatmulPreferenceSetAttribute,
                 (preference, attribute, &value, sizeof(value)));
  return LINFUSE_OK;
}

/// cuBLASLt's epilogue for `epilogue` (+ bias); false if it has none.
bool ltEpilogue(int32_t epilogue, bool hasBias, cublasLtEpilogue_t &out) {
  switch (epilogue) {
  case LINFUSE_EPILOGUE_NONE:
    out = hasBias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    return true;
  case LINFUSE_EPILOGUE_RELU:
    out = hasBias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    return true;
  case LINFUSE_EPILOGUE_GELU_TANH:
    out = hasBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    return true;
  default:
    return false;
  }
}

const char *epilogueName(int32_t epilogue) {
  static const char *const names[] = {"none", "relu", "gelu_erf", "gelu_tanh",
                                      "silu"};
  return epilogue >= LINFUSE_EPILOGUE_NONE && epilogue <= LINFUSE_EPILOGUE_SILU
             ? names[epilogue]
             : "?";
}

//===----------------------------------------------------------------------===//
// Planning and running one call
//===----------------------------------------------------------------------===//

/// Everything a call decides before it touches the device. The column-major
/// product is C^T = X * Y with X = op(B)^T in cuBLASLt's A slot and
/// Y = op(A)^T in its B slot.
struct Plan {
  Problem p;
  int32_t abType, cType;
  cublasLtEpilogue_t epilogue;
  cublasComputeType_t compute;
  LtMatrix x, y, c; // B, A and C read column-major
  cublasOperation_t opX, opY;
  int64_t batch;
  /// Of the data of X, Y, C (also D) and the bias (0 without one).
  uint32_t alignX, alignY, alignC, alignBias;

  /// Of alpha and beta: int32 for integer GEMMs, else f32.
  cudaDataType scaleType() const {
    return compute == CUBLAS_COMPUTE_32I ? CUDA_R_32I : CUDA_R_32F;
  }

  /// What cuBLASLt's heuristic answer depends on, pointer alignments
  /// included.
  AlgoKey key() const {
    auto matrix = [](const LtMatrix &m) {
      return std::array<int64_t, 3>{int64_t(m.rows), int64_t(m.cols), m.ld};
    };
    auto xs = matrix(x), ys = matrix(y), cs = matrix(c);
    bool batched = batch > 1;
    return {abType,
            cType,
            compute,
            epilogue,
            opX,
            opY,
            xs[0],
            xs[1],
            xs[2],
            ys[0],
            ys[1],
            ys[2],
            cs[0],
            cs[1],
            cs[2],
            batch,
            batched ? p.b.stride[0] : 0,
            batched ? p.a.stride[0] : 0,
            batched ? p.c.stride[0] : 0,
            alignX,
            alignY,
            alignC,
            alignBias,
            0};
  }
};

/// Validates the call and maps it onto cuBLASLt, without the device.
int32_t plan(int64_t aRank, void *a, int64_t bRank, void *b, int64_t biasRank,
             void *bias, int64_t cRank, void *c, int32_t abType, int32_t cType,
             int32_t flags, int32_t epilogue, float alpha, float beta,
             Plan &out) {
  if (int32_t s =
          validateGemmCodes(kFn, abType, cType, flags, epilogue, alpha, beta))
    return s;
  Problem &p = out.p;
  if (int32_t s = validate(aRank, a, bRank, b, biasRank, bias, cRank, c, abType,
                           cType, flags, p))
    return s;
  if (!ltEpilogue(epilogue, p.hasBias, out.epilogue))
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: epilogue %s has no cuBLASLt equivalent (the device "
                "supports none, relu and gelu_tanh)",
                kFn, epilogueName(epilogue));
  if (!asColumnMajor(p.a, out.y))
    return unsupportedLayout("A", p.a, "is neither row- nor column-major");
  if (!asColumnMajor(p.b, out.x))
    return unsupportedLayout("B", p.b, "is neither row- nor column-major");
  if (!asColumnMajor(p.c, out.c) || !out.c.transposed)
    return unsupportedLayout("C", p.c,
                             "must be row-major (unit column stride, row "
                             "stride >= N)");
  if (p.hasBias && p.bias.cols() > 1 && p.bias.stride[2] != 1)
    return unsupportedLayout("bias", p.bias, "must be contiguous");
  out.batch = p.c.batch();
  if (out.batch > 1 && (p.a.stride[0] < 0 || p.b.stride[0] < 0 ||
                        p.c.stride[0] <= 0 || out.batch > INT32_MAX))
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: batch strides A %" PRId64 ", B %" PRId64 ", C %" PRId64
                " for %" PRId64 " batches: cuBLASLt needs non-negative ones "
                "(positive for C) and at most 2^31-1 batches",
                kFn, p.a.stride[0], p.b.stride[0], p.c.stride[0], out.batch);
  // A stored operand is L^T (transposed) or L; op(B)^T is then L_B
  // transposed (transposed xor transB xor 1) times, likewise op(A)^T.
  out.opX = out.x.transposed != p.transB ? CUBLAS_OP_N : CUBLAS_OP_T;
  out.opY = out.y.transposed != p.transA ? CUBLAS_OP_N : CUBLAS_OP_T;
  // What every batch's matrix has: batch i starts at data + i * stride.
  int64_t abBytes = dtypeBytes(abType), cBytes = dtypeBytes(cType);
  out.alignX = batchAlignment(p.b.data, p.b.stride[0] * abBytes, out.batch);
  out.alignY = batchAlignment(p.a.data, p.a.stride[0] * abBytes, out.batch);
  out.alignC = batchAlignment(p.c.data, p.c.stride[0] * cBytes, out.batch);
  // The bias is one vector for all batches.
  out.alignBias = p.hasBias ? batchAlignment(p.bias.data, 0, 1) : 0;
  out.abType = abType;
  out.cType = cType;
  if (abType == LINFUSE_I8) {
    // cuBLASLt's m is the rows of C^T, our N.
    if (const char *why = int8Refusal(
            out.opX, out.opY, uint64_t(p.n), uint64_t(p.k), out.x.ld, out.y.ld,
            out.c.ld, out.alignX, out.alignY, out.alignC, p.hasBias))
      return fail(LINFUSE_ERROR_UNSUPPORTED,
                  "%s: cuBLASLt's int8 GEMM %s (M=%" PRId64 " N=%" PRId64
                  " K=%" PRId64 ")",
                  kFn, why, p.m, p.n, p.k);
    out.compute = CUBLAS_COMPUTE_32I;
    return LINFUSE_OK;
  }
  out.compute = abType == LINFUSE_F32 && allowTf32()
                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                    : CUBLAS_COMPUTE_32F;
  return LINFUSE_OK;
}

/// The operation and layout descriptors of `plan` (C doubles as D).
int32_t describe(const Plan &plan, Descriptors &d) {
  const Problem &p = plan.p;
  LINFUSE_LT_TRY(cublasLtMatmulDescCreate,
                 (&d.matmul, plan.compute, plan.scaleType()));
  if (int32_t s = setAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA,
                               int32_t(plan.opX)))
    return s;
  if (int32_t s = setAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB,
                               int32_t(plan.opY)))
    return s;
  if (int32_t s = setAttribute(d.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               uint32_t(plan.epilogue)))
    return s;
  // Also before the heuristic, which reads the pointer's alignment.
  if (p.hasBias)
    if (int32_t s = setAttribute(d.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                 static_cast<const void *>(p.bias.data)))
      return s;
  if (int32_t s =
          createLayout(plan.abType, plan.x, plan.batch, p.b.stride[0], d.x))
    return s;
  if (int32_t s =
          createLayout(plan.abType, plan.y, plan.batch, p.a.stride[0], d.y))
    return s;
  return createLayout(plan.cType, plan.c, plan.batch, p.c.stride[0], d.c);
}

/// The cached algorithm for `plan`, or the heuristic's (asked once per
/// key, then cached).
int32_t algorithmFor(const Plan &plan, cublasLtHandle_t ltHandle,
                     Descriptors &d, cublasLtMatmulAlgo_t &algo) {
  AlgoKey key = plan.key();
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    auto it = algorithms.find(key);
    if (it != algorithms.end()) {
      algo = it->second;
      return LINFUSE_OK;
    }
  }
  LINFUSE_LT_TRY(cublasLtMatmulPreferenceCreate, (&d.preference));
  if (int32_t s =
          setPreference(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                        kWorkspaceBytes))
    return s;
  // Only algorithms that work with the pointers' actual alignments.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, plan.alignX},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, plan.alignY},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, plan.alignC},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, plan.alignC}};
  for (const auto &[attribute, bytes] : alignments)
    if (int32_t s = setPreference(d.preference, attribute, bytes))
      return s;

  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  heuristicQueries.fetch_add(1, std::memory_order_relaxed);
  cublasStatus_t status = cublasLt().cublasLtMatmulAlgoGetHeuristic(
      ltHandle, d.matmul, d.x, d.y, d.c, d.c, d.preference, 1, &result, &found);
  const Problem &p = plan.p;
  linfuse_status outcome = heuristicOutcome(status, found);
  if (outcome == LINFUSE_ERROR_UNSUPPORTED)
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: cuBLASLt has no algorithm for %s inputs, %s C, "
                "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " batch=%" PRId64
                ", cuBLASLt epilogue %d, alignments A %u B %u C %u bias %u "
                "(heuristic: %s, %d found)",
                kFn, dtypeName(plan.abType), dtypeName(plan.cType), p.m, p.n,
                p.k, plan.batch, int(plan.epilogue), plan.alignY, plan.alignX,
                plan.alignC, plan.alignBias, statusName(status), found);
  if (outcome != LINFUSE_OK)
    return check(status, kFn, "cublasLtMatmulAlgoGetHeuristic");
  algo = result.algo;
  std::lock_guard<std::mutex> lock(stateMutex);
  algorithms.emplace(key, algo);
  return LINFUSE_OK;
}

} // namespace

int32_t cuda::prepareGemm(const char *fn) {
  cublasLtHandle_t h;
  CUdeviceptr w;
  return resources(fn, h, w);
}

int64_t linfuse_cuda_heuristic_queries(void) {
  return heuristicQueries.load(std::memory_order_relaxed);
}

int32_t linfuse_cuda_gemm(int64_t a_rank, void *a, int64_t b_rank, void *b,
                          int64_t bias_rank, void *bias, int64_t c_rank,
                          void *c, int32_t ab_type, int32_t c_type,
                          int32_t flags, int32_t epilogue, float alpha,
                          float beta) {
  // A function graph's replay: its capture enqueued this GEMM already.
  if (replaying())
    return LINFUSE_OK;
  // Everything that needs no device is checked first, so that bad
  // arguments get the same answer on every machine.
  Plan plan;
  if (int32_t s = ::plan(a_rank, a, b_rank, b, bias_rank, bias, c_rank, c,
                         ab_type, c_type, flags, epilogue, alpha, beta, plan))
    return s;

  ScopedContext context(kFn);
  if (context.status())
    return context.status();
  cublasLtHandle_t ltHandle;
  CUdeviceptr ltWorkspace;
  if (int32_t s = resources(kFn, ltHandle, ltWorkspace))
    return s;
  CUstream stream = streamOr(nullptr, kFn);
  if (!stream)
    return LINFUSE_ERROR_BACKEND;
  const Problem &p = plan.p;
  if (plan.batch == 0 || p.m == 0 || p.n == 0) {
    countDeviceWork(1, 0);
    return LINFUSE_OK;
  }
  if (p.k == 0)
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: K = 0 (C = beta * C) is not supported on the device", kFn);

  Descriptors d;
  cublasLtMatmulAlgo_t algo;
  if (int32_t s = describe(plan, d))
    return s;
  if (int32_t s = algorithmFor(plan, ltHandle, d, algo))
    return s;
  // alpha and beta in the descriptor's scale type (validated: integers
  // are 1 and 0 or 1).
  int32_t alphaInt = int32_t(alpha), betaInt = int32_t(beta);
  bool integer = plan.scaleType() == CUDA_R_32I;
  const void *alphaPtr = integer ? static_cast<const void *>(&alphaInt)
                                 : static_cast<const void *>(&alpha);
  const void *betaPtr = integer ? static_cast<const void *>(&betaInt)
                                : static_cast<const void *>(&beta);
  // C is also D: cuBLASLt computes in place when both share the layout.
  LINFUSE_LT_TRY(cublasLtMatmul,
                 (ltHandle, d.matmul, alphaPtr, p.b.data, d.x, p.a.data, d.y,
                  betaPtr, p.c.data, d.c, p.c.data, d.c, &algo,
                  reinterpret_cast<void *>(ltWorkspace), kWorkspaceBytes,
                  stream));
  countDeviceWork(1, 1);
  return LINFUSE_OK;
}
