//===- CudaCapture.h - One thread's graph capture or replay -----*- C++ -*-===//
//
// The bookkeeping of a thread that captures or replays a CUDA graph
// (CudaGraphs.cpp), without the device: which stream a call runs on, which
// allocations the graph made, which frees must wait, which events stand for
// work that has not run, and which function keys failed to capture. Plain
// C++ (no CUDA header), so that the unit tests check it without a GPU.
//
// A free may run now outside captures and replays, and inside a capture
// for an allocation of that capture (cuMemFreeAsync then records the
// graph's free node). Inside a capture any other free would invalidate the
// capture (cuMemFreeAsync there accepts only graph allocations, and
// cuMemFree is not capturable), and inside a replay it would free memory
// the graph, launched at the replay's end, may still read: those frees are
// deferred. A function call's run when it ends, after its graph's launch;
// a keyed capture's are kept with its graph, which may read that memory at
// every launch, and run when the graph is dropped.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_CUDACAPTURE_H
#define LINFUSE_LIB_RUNTIME_CUDACAPTURE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace linfuse::runtime::cuda {

/// The stream a call that names `requested` runs on: `runtime` is the
/// runtime's stream, `capture` this thread's capture stream (null unless
/// this thread captures), `requestedIsCaptureStream` whether `requested` is
/// one of the streams captures record. Null, the runtime's stream and a
/// capture stream all stand for the runtime's stream, which on a capturing
/// thread is its capture stream and elsewhere the runtime's own: a handle
/// obtained before a capture (linfuse_cuda_stream, mgpuStreamCreate) is
/// recorded into it, and one obtained inside a capture is ordered with the
/// rest once the capture is over (or on another thread). Any other stream
/// is the caller's and used as it is (never recorded into a capture).
template <typename Stream>
Stream resolveStream(Stream requested, Stream runtime, Stream capture,
                     bool requestedIsCaptureStream) {
  if (requested && requested != runtime && !requestedIsCaptureStream)
    return requested;
  return capture ? capture : runtime;
}

/// A device allocation a graph makes (at the same address every launch).
struct Allocation {
  void *ptr;
  uint64_t bytes;
};

/// What mgpuMemFree does with a pointer.
enum class FreeAction {
  Now,   ///< Free it now (a graph free node while capturing).
  Defer, ///< Later: CaptureState::end hands it back (see above).
  Skip,  ///< Nothing: the replayed graph frees its own allocations.
};

/// One thread's capture or replay of a graph.
class CaptureState {
public:
  enum class Mode { None, Capture, Replay };

  bool capturing() const { return mode_ == Mode::Capture; }
  bool replaying() const { return mode_ == Mode::Replay; }

  void beginCapture() {
    *this = CaptureState();
    mode_ = Mode::Capture;
  }

  /// A replay hands out `allocations` (its capture's) in order.
  void beginReplay(std::vector<Allocation> allocations) {
    *this = CaptureState();
    mode_ = Mode::Replay;
    allocations_ = std::move(allocations);
  }

  /// While capturing: notes an allocation of the graph, in order.
  void noteAllocation(void *ptr, uint64_t bytes) {
    if (capturing())
      allocations_.push_back({ptr, bytes});
  }

  /// While replaying: the address of the capture's next allocation, which
  /// must have had `bytes` bytes; null, and diverged() from then on, if the
  /// replay asks for anything else.
  void *nextAllocation(uint64_t bytes) {
    if (diverged_ || cursor_ >= allocations_.size() ||
        allocations_[cursor_].bytes != bytes) {
      diverged_ = true;
      return nullptr;
    }
    return allocations_[cursor_++].ptr;
  }
  bool diverged() const { return diverged_; }
  /// How many allocations the replay has handed out, of allocationCount().
  size_t cursor() const { return cursor_; }
  size_t allocationCount() const { return allocations_.size(); }

  /// Whether a free of `ptr` may run now: the one place that decides it.
  /// A deferred pointer is handed back by end().
  FreeAction onFree(void *ptr) {
    if (mode_ == Mode::None)
      return FreeAction::Now;
    bool own = std::any_of(allocations_.begin(), allocations_.end(),
                           [&](const Allocation &a) { return a.ptr == ptr; });
    if (own)
      return capturing() ? FreeAction::Now : FreeAction::Skip;
    deferred_.push_back(ptr);
    return FreeAction::Defer;
  }

  /// Notes that `event` was recorded on a stream: into the graph
  /// (`intoGraph`, on the capture stream, or any record while replaying,
  /// which enqueues nothing) or on a stream that runs now.
  void noteEventRecord(const void *event, bool intoGraph) {
    if (mode_ == Mode::None)
      return;
    auto it = std::find(graphEvents_.begin(), graphEvents_.end(), event);
    if (intoGraph && it == graphEvents_.end())
      graphEvents_.push_back(event);
    else if (!intoGraph && it != graphEvents_.end())
      graphEvents_.erase(it);
  }
  /// Whether `event` was last recorded into this capture or replay: a
  /// wait for it must not run (nothing it stands for has run, and in a
  /// capture the wait would invalidate it). An event recorded before the
  /// capture or replay, or on a stream that runs now, is waited for.
  bool isGraphEvent(const void *event) const {
    return std::find(graphEvents_.begin(), graphEvents_.end(), event) !=
           graphEvents_.end();
  }

  struct Ended {
    std::vector<Allocation> allocations; ///< The capture's, in order.
    std::vector<void *> deferredFrees;   ///< To free now, in order.
  };

  /// Ends the capture or replay (this thread is back to plain calls).
  Ended end() {
    Ended ended{std::move(allocations_), std::move(deferred_)};
    *this = CaptureState();
    return ended;
  }

private:
  Mode mode_ = Mode::None;
  std::vector<Allocation> allocations_;
  size_t cursor_ = 0;
  bool diverged_ = false;
  std::vector<void *> deferred_;
  std::vector<const void *> graphEvents_;
};

/// Deferred frees that cannot run yet (no context where they were due):
/// kept rather than lost, and run first at the next point that can.
class PendingFrees {
public:
  /// What to free now: nothing if `canFree` is false (`frees` are kept),
  /// else what was kept before, then `frees`.
  std::vector<void *> take(std::vector<void *> frees, bool canFree) {
    if (!canFree) {
      kept_.insert(kept_.end(), frees.begin(), frees.end());
      return {};
    }
    std::vector<void *> now = std::move(kept_);
    kept_.clear();
    now.insert(now.end(), frees.begin(), frees.end());
    return now;
  }
  bool empty() const { return kept_.empty(); }

private:
  std::vector<void *> kept_;
};

/// Where a function's capture failed: whether its key is remembered
/// (FailedKeys) depends on it.
enum class CaptureFailure {
  None,
  Body,        ///< A call in the body failed while it was recorded.
  Capture,     ///< The capture was invalidated (cuStreamEndCapture).
  Instantiate, ///< The driver rejected the recorded graph.
  Transient,   ///< No context at the end, or out of memory instantiating.
};

/// Whether a capture that failed this way would fail again with the same
/// arguments, so that later calls with its key had better run without a
/// graph. A transient failure (an out-of-memory instantiation, a context
/// that could not be made current) is not held against the key: its next
/// call captures again.
inline bool failsAgain(CaptureFailure failure) {
  return failure == CaptureFailure::Body ||
         failure == CaptureFailure::Capture ||
         failure == CaptureFailure::Instantiate;
}

/// The argument keys of one function whose capture failed (failsAgain):
/// calls with them run without a graph from then on instead of capturing
/// (and failing) again. At most `capacity`, the oldest forgotten first (a
/// forgotten key fails once more, and is remembered again).
class FailedKeys {
public:
  explicit FailedKeys(size_t capacity) : capacity_(capacity) {}

  void add(std::vector<int64_t> key) {
    if (contains(key))
      return;
    keys_.push_front(std::move(key));
    if (keys_.size() > capacity_)
      keys_.pop_back();
  }
  bool contains(const std::vector<int64_t> &key) const {
    return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
  }
  void clear() { keys_.clear(); }

private:
  size_t capacity_;
  std::deque<std::vector<int64_t>> keys_;
};

} // namespace linfuse::runtime::cuda

#endif // LINFUSE_LIB_RUNTIME_CUDACAPTURE_H
