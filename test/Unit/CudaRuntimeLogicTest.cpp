//===- CudaRuntimeLogicTest.cpp - the CUDA runtime's device-free logic ----===//
//
// The decisions of the CUDA backend that need no device, from its internal
// headers: GEMM pointer alignments and heuristic answers (CudaGemmPlan.h),
// and the capture bookkeeping of a thread, i.e. whether a free may run now
// (CudaCapture.h). They run everywhere; what needs a GPU is in
// CudaRuntimeTest.cpp's *Device* tests.
//
//===----------------------------------------------------------------------===//

#include "CudaGemmPlan.h"

#include <gtest/gtest.h>

namespace {

using namespace linfuse::runtime::cuda;

const void *at(uintptr_t address) {
  return reinterpret_cast<const void *>(address);
}

//===----------------------------------------------------------------------===//
// GEMM alignments and heuristic answers
//===----------------------------------------------------------------------===//

TEST(CudaGemmPlan, AlignmentOfOnePointer) {
  EXPECT_EQ(alignmentOf(0x1000), 256u); // Capped at 256.
  EXPECT_EQ(alignmentOf(0x1010), 16u);
  EXPECT_EQ(alignmentOf(0x1002), 2u);
  EXPECT_EQ(alignmentOf(0), 256u);
}

TEST(CudaGemmPlan, BatchAlignmentIsWhatEveryBatchStartHas) {
  // CudaDeviceGemm.Batched's B: bf16, batch stride 75 elements = 150
  // bytes, so batch 1 starts 2-byte aligned whatever the base.
  EXPECT_EQ(batchAlignment(at(0x10000), 150, 3), 2u);
  EXPECT_EQ(batchAlignment(at(0x10000), 140, 3), 4u); // A: 70 elements.
  EXPECT_EQ(batchAlignment(at(0x10000), 168, 3), 8u); // C: 42 f32.
  EXPECT_EQ(batchAlignment(at(0x10000), 4096, 2), 256u);
  // The base's own alignment still counts.
  EXPECT_EQ(batchAlignment(at(0x10004), 4096, 2), 4u);
  // One batch, or a broadcast operand (stride 0): the base alone.
  EXPECT_EQ(batchAlignment(at(0x10000), 150, 1), 256u);
  EXPECT_EQ(batchAlignment(at(0x10010), 0, 4), 16u);
}

TEST(CudaGemmPlan, HeuristicOutcome) {
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_SUCCESS, 1), LINFUSE_OK);
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_SUCCESS, 0),
            LINFUSE_ERROR_UNSUPPORTED);
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_NOT_SUPPORTED, 0),
            LINFUSE_ERROR_UNSUPPORTED);
  // How cuBLASLt usually says that no kernel takes this layout/epilogue.
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_INVALID_VALUE, 0),
            LINFUSE_ERROR_UNSUPPORTED);
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_NOT_INITIALIZED, 0),
            LINFUSE_ERROR_BACKEND);
  EXPECT_EQ(heuristicOutcome(CUBLAS_STATUS_INTERNAL_ERROR, 0),
            LINFUSE_ERROR_BACKEND);
}

} // namespace
