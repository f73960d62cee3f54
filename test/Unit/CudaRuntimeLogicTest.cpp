//===- CudaRuntimeLogicTest.cpp - the CUDA runtime's device-free logic ----===//
//
// The decisions of the CUDA backend that need no device, from its internal
// headers: GEMM pointer alignments and heuristic answers (CudaGemmPlan.h),
// and the capture bookkeeping of a thread, i.e. whether a free may run now
// (CudaCapture.h). They run everywhere; what needs a GPU is in
// CudaRuntimeTest.cpp's *Device* tests.
//
//===----------------------------------------------------------------------===//

#include "CudaCapture.h"
#include "CudaGemmPlan.h"
#include "CudaLaunchLimits.h"

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

//===----------------------------------------------------------------------===//
// Capture bookkeeping: which frees may run now
//===----------------------------------------------------------------------===//

void *ptr(uintptr_t address) { return reinterpret_cast<void *>(address); }

TEST(CudaCaptureState, FreesOutsideCapturesRunNow) {
  CaptureState state;
  EXPECT_FALSE(state.capturing());
  EXPECT_FALSE(state.replaying());
  EXPECT_EQ(state.onFree(ptr(0x1000)), FreeAction::Now);
  EXPECT_TRUE(state.end().deferredFrees.empty());
}

TEST(CudaCaptureState, CaptureFreesItsOwnAllocationsAndDefersOthers) {
  CaptureState state;
  state.beginCapture();
  EXPECT_TRUE(state.capturing());
  state.noteAllocation(ptr(0x2000), 64);
  state.noteAllocation(ptr(0x3000), 128);
  // An allocation of this capture: its free is the graph's free node.
  EXPECT_EQ(state.onFree(ptr(0x2000)), FreeAction::Now);
  // Memory from before the capture (or another graph's): a free inside
  // the capture would invalidate it; it waits for the capture's end.
  EXPECT_EQ(state.onFree(ptr(0x1000)), FreeAction::Defer);
  EXPECT_EQ(state.onFree(ptr(0x4000)), FreeAction::Defer);
  CaptureState::Ended ended = state.end();
  EXPECT_FALSE(state.capturing());
  ASSERT_EQ(ended.allocations.size(), 2u);
  EXPECT_EQ(ended.allocations[1].ptr, ptr(0x3000));
  EXPECT_EQ(ended.allocations[1].bytes, 128u);
  EXPECT_EQ(ended.deferredFrees,
            (std::vector<void *>{ptr(0x1000), ptr(0x4000)}));
  // After the end, frees run at once again, and nothing is left over.
  EXPECT_EQ(state.onFree(ptr(0x1000)), FreeAction::Now);
  state.beginCapture();
  EXPECT_TRUE(state.end().deferredFrees.empty());
}

TEST(CudaCaptureState, ReplaySkipsTheGraphsAllocationsAndDefersOthers) {
  CaptureState state;
  state.beginReplay({{ptr(0x2000), 64}, {ptr(0x3000), 128}});
  EXPECT_TRUE(state.replaying());
  EXPECT_FALSE(state.capturing());
  EXPECT_EQ(state.nextAllocation(64), ptr(0x2000));
  // The graph frees its own intermediates.
  EXPECT_EQ(state.onFree(ptr(0x2000)), FreeAction::Skip);
  // Anything else may still be read by the graph, launched at the end.
  EXPECT_EQ(state.onFree(ptr(0x1000)), FreeAction::Defer);
  EXPECT_EQ(state.nextAllocation(128), ptr(0x3000));
  EXPECT_EQ(state.cursor(), state.allocationCount());
  EXPECT_FALSE(state.diverged());
  EXPECT_EQ(state.end().deferredFrees, std::vector<void *>{ptr(0x1000)});
  EXPECT_FALSE(state.replaying());
}

TEST(CudaCaptureState, ReplayThatAsksForOtherAllocationsDiverges) {
  CaptureState state;
  state.beginReplay({{ptr(0x2000), 64}});
  EXPECT_EQ(state.nextAllocation(32), nullptr);
  EXPECT_TRUE(state.diverged());
  EXPECT_EQ(state.nextAllocation(64), nullptr); // Stays diverged.
  state.beginReplay({{ptr(0x2000), 64}});
  EXPECT_FALSE(state.diverged());
  EXPECT_EQ(state.nextAllocation(64), ptr(0x2000));
  EXPECT_EQ(state.nextAllocation(64), nullptr); // More than the capture.
  EXPECT_TRUE(state.diverged());
}

TEST(CudaCaptureState, AllocationsAreNotedOnlyWhileCapturing) {
  CaptureState state;
  state.noteAllocation(ptr(0x2000), 64);
  state.beginCapture();
  EXPECT_EQ(state.onFree(ptr(0x2000)), FreeAction::Defer);
  EXPECT_TRUE(state.end().allocations.empty());
}

TEST(CudaPendingFrees, FreesWithoutAContextAreKeptForTheNextChance) {
  PendingFrees pending;
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(pending.take({ptr(0x1000)}, true),
            std::vector<void *>{ptr(0x1000)});
  // No context at the end of a capture: freeing would fail, and the
  // memory would be lost. Kept instead.
  EXPECT_TRUE(pending.take({ptr(0x2000), ptr(0x3000)}, false).empty());
  EXPECT_FALSE(pending.empty());
  EXPECT_TRUE(pending.take({ptr(0x4000)}, false).empty());
  // The next point with a context frees them first, then its own.
  EXPECT_EQ(pending.take({ptr(0x5000)}, true),
            (std::vector<void *>{ptr(0x2000), ptr(0x3000), ptr(0x4000),
                                 ptr(0x5000)}));
  EXPECT_TRUE(pending.empty());
  EXPECT_TRUE(pending.take({}, true).empty());
}

TEST(CudaCaptureState, EventsRecordedIntoTheGraphAreNotWaitedFor) {
  CaptureState state;
  const void *before = ptr(0x10), *inside = ptr(0x20), *user = ptr(0x30);
  // Outside a capture nothing is noted: every event is waited for.
  state.noteEventRecord(before, /*intoGraph=*/true);
  EXPECT_FALSE(state.isGraphEvent(before));
  state.beginCapture();
  // Recorded before the capture: it stands for work that ran, wait for it.
  EXPECT_FALSE(state.isGraphEvent(before));
  state.noteEventRecord(inside, /*intoGraph=*/true);
  state.noteEventRecord(user, /*intoGraph=*/false); // A stream that runs.
  EXPECT_TRUE(state.isGraphEvent(inside));
  EXPECT_FALSE(state.isGraphEvent(user));
  // Recorded again on a stream that runs: waited for again.
  state.noteEventRecord(inside, /*intoGraph=*/false);
  EXPECT_FALSE(state.isGraphEvent(inside));
  state.noteEventRecord(inside, /*intoGraph=*/true);
  state.end();
  EXPECT_FALSE(state.isGraphEvent(inside)); // Over with the capture.
  state.beginReplay({});
  state.noteEventRecord(user, /*intoGraph=*/true);
  EXPECT_TRUE(state.isGraphEvent(user));
  state.end();
  EXPECT_FALSE(state.isGraphEvent(user));
}

//===----------------------------------------------------------------------===//
// Which stream a call runs on
//===----------------------------------------------------------------------===//

TEST(CudaStreams, TheRuntimesStreamByAnyHandleIsTheCaptureOnACapturingThread) {
  const void *runtime = ptr(0x100), *capture = ptr(0x200), *user = ptr(0x300);
  const void *oldCapture = ptr(0x400), *none = nullptr;
  // Not capturing: null, the runtime's stream and any capture stream (a
  // handle from mgpuStreamCreate inside an earlier capture) are the
  // runtime's stream; a stream of the caller's is its own.
  EXPECT_EQ(resolveStream(none, runtime, none, false), runtime);
  EXPECT_EQ(resolveStream(runtime, runtime, none, false), runtime);
  EXPECT_EQ(resolveStream(oldCapture, runtime, none, true), runtime);
  EXPECT_EQ(resolveStream(user, runtime, none, false), user);
  // Capturing: a handle to the runtime's stream from before the capture
  // (linfuse_cuda_stream, mgpuStreamCreate) is recorded like null is.
  EXPECT_EQ(resolveStream(none, runtime, capture, false), capture);
  EXPECT_EQ(resolveStream(runtime, runtime, capture, false), capture);
  EXPECT_EQ(resolveStream(capture, runtime, capture, true), capture);
  EXPECT_EQ(resolveStream(oldCapture, runtime, capture, true), capture);
  EXPECT_EQ(resolveStream(user, runtime, capture, false), user);
  // The runtime's stream not created yet: null, for the caller to create.
  EXPECT_EQ(resolveStream(none, none, none, false), none);
  EXPECT_EQ(resolveStream(oldCapture, none, none, true), none);
}

//===----------------------------------------------------------------------===//
// Dynamic shared memory limits
//===----------------------------------------------------------------------===//

TEST(CudaSharedMemory, TheLimitIsOnlyEverRaised) {
  DynamicSharedMemoryLimits limits;
  const void *kernel = ptr(0x10), *other = ptr(0x20), *module = ptr(0x1);
  limits.noteFunction(kernel, module);
  EXPECT_FALSE(limits.needsRaise(kernel, 0)); // No dynamic part.
  EXPECT_TRUE(limits.needsRaise(kernel, 4));  // The first with any.
  limits.raised(kernel, 64 << 10);
  // Thread A set 64 KiB; thread B's launch with 4 bytes must not lower it
  // under A's launch, nor need to set anything.
  EXPECT_FALSE(limits.needsRaise(kernel, 4));
  EXPECT_FALSE(limits.needsRaise(kernel, 64 << 10));
  EXPECT_TRUE(limits.needsRaise(kernel, 100 << 10));
  limits.raised(kernel, 100 << 10);
  limits.raised(kernel, 80 << 10); // Never lowered.
  EXPECT_FALSE(limits.needsRaise(kernel, 90 << 10));
  // Each function has its own; one never looked up is set on first use.
  EXPECT_TRUE(limits.needsRaise(other, 4));
  // Unchanged if the setting failed (raised is not called).
  EXPECT_TRUE(limits.needsRaise(kernel, 300 << 10));
  EXPECT_TRUE(limits.needsRaise(kernel, 300 << 10));
}

TEST(CudaSharedMemory, AReusedFunctionAddressStartsFromTheDefault) {
  DynamicSharedMemoryLimits limits;
  const void *kernel = ptr(0x10), *module = ptr(0x1), *next = ptr(0x2);
  limits.noteFunction(kernel, module);
  limits.raised(kernel, 64 << 10);
  limits.noteFunction(kernel, module); // Looked up again: still set.
  EXPECT_FALSE(limits.needsRaise(kernel, 64 << 10));
  limits.forgetModule(module); // Unloaded.
  EXPECT_TRUE(limits.needsRaise(kernel, 64 << 10));
  limits.noteFunction(kernel, module);
  limits.raised(kernel, 64 << 10);
  // Found under another module without an unload in between.
  limits.noteFunction(kernel, next);
  EXPECT_TRUE(limits.needsRaise(kernel, 64 << 10));
}

TEST(CudaFailedKeys, OnlyFailuresThatWouldRecurAreHeldAgainstAKey) {
  // The body, or what it did (an invalidated capture, a graph the driver
  // rejects), fails the same way with the same arguments.
  EXPECT_TRUE(failsAgain(CaptureFailure::Body));
  EXPECT_TRUE(failsAgain(CaptureFailure::Capture));
  EXPECT_TRUE(failsAgain(CaptureFailure::Instantiate));
  // Out of memory instantiating, no context: the next call tries again.
  EXPECT_FALSE(failsAgain(CaptureFailure::Transient));
  EXPECT_FALSE(failsAgain(CaptureFailure::None));
}

TEST(CudaFailedKeys, AFailedKeyRunsWithoutAGraphFromThenOn) {
  FailedKeys failed(2);
  std::vector<int64_t> a{1, 2}, b{3}, c{4, 5, 6};
  EXPECT_FALSE(failed.contains(a));
  failed.add(a);
  failed.add(a); // Once.
  EXPECT_TRUE(failed.contains(a));
  EXPECT_FALSE(failed.contains(b));
  failed.add(b);
  failed.add(c); // Over capacity: the oldest (a) is forgotten.
  EXPECT_FALSE(failed.contains(a));
  EXPECT_TRUE(failed.contains(b));
  EXPECT_TRUE(failed.contains(c));
  failed.clear();
  EXPECT_FALSE(failed.contains(c));
}

} // namespace
