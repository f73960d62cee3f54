//===- OneDnnGemm.h - the host GEMM on oneDNN's matmul ------------*- C++
//-*-===//
//
// Not installed: linfuse_cpu_gemm's fast path (HostGemm.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_ONEDNNGEMM_H
#define LINFUSE_LIB_RUNTIME_ONEDNNGEMM_H

#include <cstddef>
#include <cstdint>

namespace linfuse::runtime {

/// `batch` matrices of rows x cols; element (b, i, j) is element
/// b * batchStride + i * rowStride + j * colStride of `data` (strides in
/// elements, the batch stride 0 for one matrix shared by the batch).
struct GemmMatrix {
  char *data = nullptr;
  int64_t batch = 1, rows = 1, cols = 0;
  int64_t batchStride = 0, rowStride = 0, colStride = 1;

  /// Bytes from the first element to one past the last (0 when empty).
  size_t spanBytes(int64_t elementBytes) const {
    if (batch <= 0 || rows <= 0 || cols <= 0)
      return 0;
    return size_t(1 + (batch - 1) * batchStride + (rows - 1) * rowStride +
                  (cols - 1) * colStride) *
           size_t(elementBytes);
  }
};

/// C = epilogue(op(A) * op(B) + bias) with oneDNN's matmul, reading and
/// writing every operand in place in its own type (f32, f16, bf16 inputs
/// accumulate in f32) and layout. `bias` may be null. Returns false where
/// oneDNN has no implementation for the problem (before reading or writing
/// anything) or its execution failed: the caller then computes C itself.
/// True once C is written. Safe to call from several threads at once.
/// `constantB`: B holds the same values at the same address on every call
/// until linfuse_cpu_release_packed_weights (a weight): it is reordered
/// once into the layout oneDNN reads fastest, and that copy is used.
bool oneDnnGemm(int32_t abType, int32_t cType, const GemmMatrix &a, bool transA,
                const GemmMatrix &b, bool transB, const GemmMatrix *bias,
                const GemmMatrix &c, int32_t epilogue, bool constantB);

/// The same on oneDNN 3 when it can be loaded (OneDnn3Gemm.cpp): for f16
/// A and B (oneDNN 2 has no f16 matmul on the CPU) and for bf16 weights it
/// reorders (packsWeight: M > 1; its AMX kernels on them are faster); false
/// for other bf16 problems, when it cannot be loaded, or has no kernel for
/// the problem.
bool oneDnn3Gemm(int32_t abType, int32_t cType, const GemmMatrix &a,
                 bool transA, const GemmMatrix &b, bool transB,
                 const GemmMatrix *bias, const GemmMatrix &c, int32_t epilogue,
                 bool constantB);

/// The same on oneMKL's packed GEMMs (MklGemm.cpp), which run large f32
/// and bf16 weights faster than oneDNN on Intel CPUs: for single products
/// whose B is a weight (`constantB`) with more than one row of output.
/// False, before reading or writing anything, for other problems, other
/// CPUs, or where MKL cannot be loaded.
bool mklGemm(int32_t abType, int32_t cType, const GemmMatrix &a, bool transA,
             const GemmMatrix &b, bool transB, const GemmMatrix *bias,
             const GemmMatrix &c, int32_t epilogue, bool constantB);

/// The same for f16 products of 1 to kFewRowsMax rows, at memory speed
/// (FewRowGemm.cpp): false, before reading or writing anything, for other
/// problems, for strides its kernels do not read, on CPUs without AVX2 and
/// F16C, and for a handed-over weight whose plain values are gone.
bool fewRowGemm(int32_t abType, int32_t cType, const GemmMatrix &a, bool transA,
                const GemmMatrix &b, bool transB, const GemmMatrix *bias,
                const GemmMatrix &c, int32_t epilogue, bool constantB);

/// Frees MKL's packed weights (part of linfuse_cpu_release_packed_weights).
void releaseMklPackedWeights();

/// Frees oneDNN 3's reordered weights (part of
/// linfuse_cpu_release_packed_weights).
void releaseOneDnn3PackedWeights();

/// Frees the host fallback's widened f32 copies of constant f16/bf16
/// weights (HostGemm.cpp; part of linfuse_cpu_release_packed_weights).
void releaseWidenedWeights();
/// Those of the weights that start in [begin, end).
void releaseWidenedWeights(uintptr_t begin, uintptr_t end);

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_ONEDNNGEMM_H
