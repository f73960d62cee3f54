//===- CudaGemmPlan.h - Device-free rules of linfuse_cuda_gemm --*- C++ -*-===//
//
// What linfuse_cuda_gemm decides from its arguments and cuBLASLt's answers
// alone: the pointer alignments it promises cuBLASLt's heuristic, and what
// the heuristic's status means. Header-only and free of device calls, so
// that the unit tests check it on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_CUDAGEMMPLAN_H
#define LINFUSE_LIB_RUNTIME_CUDAGEMMPLAN_H

#include "linfuse/Runtime/Runtime.h"

#include <cublasLt.h>

#include <cstdint>

namespace linfuse::runtime::cuda {

/// The largest power of two (up to 256, cuBLASLt's default requirement)
/// that divides `address`.
inline uint32_t alignmentOf(uintptr_t address) {
  address |= 256;
  return uint32_t(address & -address);
}

/// The alignment every matrix of a strided batch has: matrix i starts at
/// `base` + i * `strideBytes`, for i < `batch`.
inline uint32_t batchAlignment(const void *base, int64_t strideBytes,
                               int64_t batch) {
  // Every start is base + a multiple of the stride, and batch 1 is base +
  // stride: the power of two dividing both is the most all of them have.
  uintptr_t address = reinterpret_cast<uintptr_t>(base);
  if (batch > 1)
    address |= uintptr_t(strideBytes);
  return alignmentOf(address);
}

/// What cublasLtMatmulAlgoGetHeuristic's answer means for the call:
/// LINFUSE_OK (an algorithm was found), LINFUSE_ERROR_UNSUPPORTED (cuBLASLt
/// has no kernel for this problem) or LINFUSE_ERROR_BACKEND (the call
/// itself failed).
inline linfuse_status heuristicOutcome(cublasStatus_t status, int found) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return found > 0 ? LINFUSE_OK : LINFUSE_ERROR_UNSUPPORTED;
  // INVALID_VALUE is how cuBLASLt usually answers a layout, epilogue or
  // type combination no kernel takes; NOT_SUPPORTED the rest.
  case CUBLAS_STATUS_NOT_SUPPORTED:
  case CUBLAS_STATUS_INVALID_VALUE:
    return LINFUSE_ERROR_UNSUPPORTED;
  default:
    return LINFUSE_ERROR_BACKEND;
  }
}

/// Why cuBLASLt's int8 GEMM (i8 x i8 -> i32, CUBLAS_COMPUTE_32I, IMMA
/// kernels on the regular column-major ordering) cannot take a problem, or
/// nullptr if it can. In cuBLASLt's own terms: D (m x n) = op(A) op(B),
/// with leading dimensions and pointer alignments (bytes) of A, B and C.
/// cuBLASLt's documented requirements for that ordering: the "TN" format
/// (A transposed, B not), m, k and every leading dimension multiples of 4,
/// every pointer 4-byte aligned; and it has no bias for integer outputs
/// here (the compiler never fuses one into an integer GEMM).
inline const char *int8Refusal(cublasOperation_t opA, cublasOperation_t opB,
                               uint64_t m, uint64_t k, int64_t lda, int64_t ldb,
                               int64_t ldc, uint32_t alignA, uint32_t alignB,
                               uint32_t alignC, bool hasBias) {
  if (hasBias)
    return "takes no bias";
  if (opA != CUBLAS_OP_T || opB != CUBLAS_OP_N)
    return "needs B stored N x K and A stored M x K, both row-major "
           "(cuBLASLt's TN format)";
  if (m % 4 || k % 4)
    return "needs N and K to be multiples of 4";
  if (lda % 4 || ldb % 4 || ldc % 4)
    return "needs leading dimensions that are multiples of 4";
  if (alignA < 4 || alignB < 4 || alignC < 4)
    return "needs 4-byte aligned A, B and C";
  return nullptr;
}

} // namespace linfuse::runtime::cuda

#endif // LINFUSE_LIB_RUNTIME_CUDAGEMMPLAN_H
