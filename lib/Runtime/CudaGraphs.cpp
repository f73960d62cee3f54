//===- CudaGraphs.cpp - CUDA graphs: keyed captures and function graphs ---===//
//
// Two ways to turn a function's launches into one CUDA graph launch:
//
// - linfuse_cuda_graph_begin/_end/_launch: the caller brackets work it
//   enqueues, stores the recording under a key and launches it when it
//   likes (Runtime.h has the protocol).
// - linfuse_cuda_function_begin/_end: what `--linfuse-cuda-graph` puts
//   around a compiled function's body (linfuse-compile/linfuse-run
//   --cuda-graph). The first call with given arguments captures the body;
//   later calls with the same arguments run the body's host code again
//   (it computes the result shapes and descriptors) while every device call
//   in it enqueues nothing and every allocation hands back the address the
//   capture got; the graph launch at the end does all the work at once.
//
// Allocations inside a capture are graph memory nodes (stream-ordered
// allocation): they have fixed addresses for the life of the graph, which
// is what lets a replay hand them out again. Graphs are instantiated with
// AUTO_FREE_ON_LAUNCH, so a relaunch frees what the previous launch left
// allocated (the results) before allocating it again.
//
// Threads: one capture or function-graph call at a time (captureMutex).
// A capture records a stream of its own (captureStream), which stands in
// for the runtime's stream on the capturing thread only (setCaptureStream),
// so other threads' plain calls and graph launches run on the runtime's
// stream meanwhile and are never recorded into it. What the capturing or
// replaying thread has allocated and which of its frees must wait is kept
// in its CaptureState (CudaCapture.h); a capture is ended whatever else
// fails, so that its stream never stays in capture mode. Memory from
// outside a keyed capture that the capture freed is kept with its graph
// (Graph::frees) until the graph is dropped.
//
//===----------------------------------------------------------------------===//

#include "CudaLoader.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace linfuse::runtime;
using namespace linfuse::runtime::cuda;

extern "C" void mgpuMemFree(void *ptr, CUstream stream);

namespace {

/// An instantiated graph and the work it replays (for the stats).
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  int64_t gemmCalls = 0, kernelLaunches = 0;
  /// A keyed graph's: memory from outside its capture that the capture
  /// freed. Every launch may read it, so it is freed when the graph is
  /// dropped (replaced or destroyed), not at the end of the capture.
  std::vector<void *> frees;
};

std::mutex graphMutex;
std::map<std::string, Graph> graphs; // guarded by graphMutex
std::string captureKey;              // guarded by graphMutex
Graph captured;                      // guarded by graphMutex: counts so far

/// Held from the start of a capture (keyed, or of a function call) or of a
/// function graph's replay to its end: one capture stream, one capture and
/// one set of counts (captured) at a time.
std::mutex captureMutex;
/// The stream captures record (guarded by captureMutex).
CUstream captureStream = nullptr;

/// This thread's capture or replay: its graph's allocations and the frees
/// that wait for its end. Capturing or replaying is this and nothing else.
thread_local CaptureState captureState;

/// failureCount() when this thread's keyed capture began: a call that
/// failed while it was recorded is missing from the graph.
thread_local uint64_t keyedFailuresAtBegin = 0;

void addToStats(int64_t gemmCalls, int64_t kernelLaunches) {
  for (int64_t i = 0; i < gemmCalls; ++i)
    countGemmCall();
  countKernelLaunches(kernelLaunches);
}

/// Destroys `g`'s handles (call with a context current), dropping its
/// frees: see retire.
void destroy(Graph &g) {
  if (g.exec)
    driver().cuGraphExecDestroy(g.exec);
  if (g.graph)
    driver().cuGraphDestroy(g.graph);
  g = Graph();
}

/// Destroys `g` (destroy), adding the memory it kept to `frees`, to be
/// freed (freeDeferred) on the runtime's stream, after its launches.
void retire(Graph &g, std::vector<void *> &frees) {
  frees.insert(frees.end(), g.frees.begin(), g.frees.end());
  destroy(g);
}

bool validKey(const char *fn, const char *key) {
  if (key && *key)
    return true;
  fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: the graph key is null or empty",
       fn);
  return false;
}

/// Whether `stream` is recording a capture.
bool isCapturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver().cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/// The capture stream, ready for a new capture (captureMutex held, context
/// current). Should an earlier capture not have been ended, it is ended and
/// dropped here or, if that fails, its stream is left to it.
int32_t readyCaptureStream(const char *fn) {
  if (captureStream && isCapturing(captureStream)) {
    CUgraph stale = nullptr;
    if (driver().cuStreamEndCapture(captureStream, &stale) == CUDA_SUCCESS &&
        stale)
      driver().cuGraphDestroy(stale);
    if (isCapturing(captureStream))
      captureStream = nullptr;
  }
  if (captureStream)
    return LINFUSE_OK;
  // Non-blocking, like the runtime's stream. Never destroyed: a handle to
  // it that lowered code got during a capture (mgpuStreamCreate) stands for
  // the runtime's stream afterwards.
  if (int32_t s =
          check(driver().cuStreamCreate(&captureStream, CU_STREAM_NON_BLOCKING),
                fn, "cuStreamCreate"))
    return s;
  registerCaptureStream(captureStream);
  return LINFUSE_OK;
}

/// Starts this thread's capture (captureMutex held, context current). The
/// GEMM workspace is allocated first: allocating it inside the capture
/// would make it a graph allocation.
int32_t beginCapture(const char *fn, const char *key) {
  if (cublasLtUsable())
    if (int32_t s = prepareGemm(fn))
      return s;
  if (int32_t s = readyCaptureStream(fn))
    return s;
  // Thread-local mode: calls that cannot be captured (a synchronization,
  // cuMemAlloc) fail on this thread and invalidate the capture, which the
  // end of the capture then reports; other threads are not affected.
  if (int32_t s = check(driver().cuStreamBeginCapture(
                            captureStream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                        fn, "cuStreamBeginCapture"))
    return s;
  {
    std::lock_guard<std::mutex> lock(graphMutex);
    captureKey = key;
    captured = Graph();
  }
  captureState.beginCapture();
  setCaptureStream(captureStream);
  return LINFUSE_OK;
}

/// Ends this thread's capture, whatever else fails (a context that cannot
/// be made current included: the stream names its context), so that the
/// capture stream never stays in capture mode; this thread is back to
/// plain calls. The recording (null if the capture was invalidated) goes
/// to `recording`, what the capture allocated and the frees that waited
/// for its end to `ended`. Returns cuStreamEndCapture's result.
CUresult stopCapture(CUgraph &recording, CaptureState::Ended &ended) {
  recording = nullptr;
  CUresult result = driver().cuStreamEndCapture(captureStream, &recording);
  setCaptureStream(nullptr);
  ended = captureState.end();
  return result;
}

/// Ends this thread's capture (stopCapture) and instantiates it into `out`
/// (with its counts). Relaunching frees what the previous launch left
/// allocated. `failure` says where it failed, if it did.
int32_t endCapture(const char *fn, Graph &out, CaptureState::Ended &ended,
                   CaptureFailure &failure) {
  ScopedContext context(fn);
  Graph g;
  {
    std::lock_guard<std::mutex> lock(graphMutex);
    g = captured;
    captured = Graph();
  }
  CUresult result = stopCapture(g.graph, ended);
  failure = CaptureFailure::Transient;
  int32_t s = context.status();
  if (s == LINFUSE_OK) {
    failure = CaptureFailure::Capture;
    s = check(result, fn, "cuStreamEndCapture");
  }
  if (s == LINFUSE_OK) {
    CUresult instantiated = driver().cuGraphInstantiateWithFlags(
        &g.exec, g.graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    failure = instantiated == CUDA_ERROR_OUT_OF_MEMORY
                  ? CaptureFailure::Transient
                  : CaptureFailure::Instantiate;
    s = check(instantiated, fn, "cuGraphInstantiateWithFlags");
  }
  if (s != LINFUSE_OK) {
    destroy(g);
    return s;
  }
  failure = CaptureFailure::None;
  out = g;
  return LINFUSE_OK;
}

std::mutex pendingMutex;
PendingFrees pendingFrees; // guarded by pendingMutex

/// Runs the frees that waited for the end of a capture or replay (after
/// its graph's launch, if any) or for their graph to be dropped, now that
/// this thread makes plain calls, on the runtime's stream. Without a
/// context they would fail and be lost: they are kept for the next call
/// here that has one (PendingFrees).
void freeDeferred(const char *fn, std::vector<void *> frees) {
  {
    std::lock_guard<std::mutex> lock(pendingMutex);
    if (frees.empty() && pendingFrees.empty())
      return;
  }
  ScopedContext context(fn);
  {
    std::lock_guard<std::mutex> lock(pendingMutex);
    frees = pendingFrees.take(std::move(frees), context.status() == LINFUSE_OK);
  }
  for (void *ptr : frees)
    mgpuMemFree(ptr, nullptr);
}

int32_t launchGraph(const char *fn, CUstream stream, const Graph &g) {
  if (int32_t s =
          check(driver().cuGraphLaunch(g.exec, stream), fn, "cuGraphLaunch"))
    return s;
  addToStats(g.gemmCalls, g.kernelLaunches);
  return LINFUSE_OK;
}

//===----------------------------------------------------------------------===//
// Function graphs
//===----------------------------------------------------------------------===//

/// One captured call of a function: its argument key, its graph and the
/// allocations its body made, in order.
struct FunctionGraph {
  std::vector<int64_t> key;
  Graph graph;
  std::vector<Allocation> allocations;

  FunctionGraph() = default;
  FunctionGraph(const FunctionGraph &) = delete;
  FunctionGraph &operator=(const FunctionGraph &) = delete;
  ~FunctionGraph() {
    ScopedContext context("linfuse_cuda_function_end");
    if (context.status() == LINFUSE_OK)
      destroy(graph);
  }
};
using FunctionGraphPtr = std::shared_ptr<FunctionGraph>;

/// Graphs kept per function, most recently used first: a function called
/// with ever new buffers (no caching allocator in front of it) would
/// otherwise grow without bound.
constexpr size_t kGraphsPerFunction = 16;

/// The graphs of one function, most recently used first, the keys whose
/// capture failed (they run without a graph), and the generation of its
/// slot they belong to.
struct FunctionGraphs {
  int64_t generation = 0;
  std::deque<FunctionGraphPtr> list;
  FailedKeys failed{kGraphsPerFunction};
};

/// Per function (its slot's address), guarded by graphMutex. Never
/// destroyed: destroying graphs from a static destructor would call the
/// driver while the process tears it down.
auto &functionGraphs = *new std::map<uintptr_t, FunctionGraphs>();

/// Slots are zero-initialized globals of the compiled module; the first
/// call writes a fresh generation into its slot. A module unloaded and
/// another loaded at the same address (a JIT-compiled function destroyed
/// and a new one compiled) starts from zero again, so the graphs of the
/// old one, whose kernels are gone, are never replayed.
std::atomic<int64_t> lastGeneration{0};

int64_t slotGeneration(uintptr_t slot) {
  auto *word = reinterpret_cast<int64_t *>(slot);
  if (*word == 0)
    *word = ++lastGeneration;
  return *word;
}

/// What this thread's function call is doing. PassThrough: no graph of
/// its own (an outer capture records the body, or its key failed to
/// capture before and it runs plainly).
struct FunctionCall {
  enum class Mode { None, PassThrough, Capture, Replay };
  Mode mode = Mode::None;
  int depth = 0; // Nested calls are part of the outermost one.
  std::vector<int64_t> key;
  int64_t generation = 0;
  FunctionGraphPtr replay;
  uint64_t failuresAtBegin = 0;
};
thread_local FunctionCall call;

/// The graphs of the function of `slot` (graphMutex held), emptied if they
/// belong to an earlier module at that address.
FunctionGraphs &graphsOf(uintptr_t slot, int64_t generation) {
  FunctionGraphs &function = functionGraphs[slot];
  if (function.generation != generation) {
    function.list.clear();
    function.failed.clear();
    function.generation = generation;
  }
  return function;
}

/// The graph to replay for `key`, or null; `failedBefore` if that key's
/// capture failed before (then the call runs without a graph).
FunctionGraphPtr findGraph(uintptr_t slot, int64_t generation,
                           const std::vector<int64_t> &key,
                           bool &failedBefore) {
  std::lock_guard<std::mutex> lock(graphMutex);
  FunctionGraphs &function = graphsOf(slot, generation);
  failedBefore = function.failed.contains(key);
  std::deque<FunctionGraphPtr> &list = function.list;
  auto hit =
      std::find_if(list.begin(), list.end(),
                   [&](const FunctionGraphPtr &g) { return g->key == key; });
  if (hit == list.end())
    return nullptr;
  FunctionGraphPtr g = *hit;
  list.erase(hit);
  list.push_front(g);
  return g;
}

/// Ends this thread's function call: back to normal calls, and the next
/// captured or replayed call (any thread) may start.
void finishCall() {
  bool locked = call.mode == FunctionCall::Mode::Capture ||
                call.mode == FunctionCall::Mode::Replay;
  call = FunctionCall();
  if (locked)
    captureMutex.unlock();
}

} // namespace

bool cuda::capturing() { return captureState.capturing(); }

bool cuda::replaying() { return captureState.replaying(); }

FreeAction cuda::freeAction(void *ptr) { return captureState.onFree(ptr); }

void *cuda::replayAllocation(uint64_t bytes, const char *fn) {
  bool divergedBefore = captureState.diverged();
  size_t index = captureState.cursor();
  void *ptr = captureState.nextAllocation(bytes);
  if (!ptr && !divergedBefore)
    fail(LINFUSE_ERROR_BACKEND,
         "%s: the replayed function asked for allocation %zu of %llu bytes, "
         "which its capture did not make (a graph replays only calls that "
         "repeat the captured one)",
         fn, index, static_cast<unsigned long long>(bytes));
  return ptr;
}

void cuda::noteEventRecord(CUevent event, bool intoGraph) {
  captureState.noteEventRecord(event, intoGraph);
}

bool cuda::isGraphEvent(CUevent event) {
  return captureState.isGraphEvent(event);
}

void cuda::noteCapturedAllocation(void *ptr, uint64_t bytes) {
  captureState.noteAllocation(ptr, bytes);
}

void cuda::countDeviceWork(int64_t gemmCalls, int64_t kernelLaunches) {
  if (capturing()) {
    std::lock_guard<std::mutex> lock(graphMutex);
    captured.gemmCalls += gemmCalls;
    captured.kernelLaunches += kernelLaunches;
    return;
  }
  addToStats(gemmCalls, kernelLaunches);
}

/// Why this thread cannot start a capture or drop graphs now, or null.
static const char *busy() {
  if (capturing())
    return "a capture is in progress on this thread";
  if (call.depth > 0)
    return "this thread is inside a function's graph call";
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Runtime.h: keyed graphs
//===----------------------------------------------------------------------===//

int32_t linfuse_cuda_graph_begin(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_begin";
  if (!validKey(fn, key))
    return LINFUSE_ERROR_INVALID_ARGUMENT;
  if (const char *why = busy())
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: cannot capture '%s': %s",
                fn, key, why);
  return inContext(fn, nullptr, [&](CUstream) {
    // Held until _end: another thread's capture or graph call waits.
    captureMutex.lock();
    int32_t s = beginCapture(fn, key);
    if (s != LINFUSE_OK)
      captureMutex.unlock();
    keyedFailuresAtBegin = failureCount();
    return s;
  });
}

int32_t linfuse_cuda_graph_end(void) {
  constexpr const char *fn = "linfuse_cuda_graph_end";
  if (!capturing() || call.mode == FunctionCall::Mode::Capture)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: no capture in progress on this thread (call "
                "linfuse_cuda_graph_begin)",
                fn);
  bool failed = failureCount() != keyedFailuresAtBegin;
  Graph g;
  CaptureState::Ended ended;
  CaptureFailure failure;
  int32_t status = endCapture(fn, g, ended, failure);
  if (status == LINFUSE_OK && failed) {
    // A call failed while it was recorded (a GEMM's arguments, say): the
    // graph lacks that work, so it is not kept. The call's error stays the
    // one reported, if it is still pending.
    ScopedContext context(fn);
    destroy(g);
    std::lock_guard<std::mutex> lock(graphMutex);
    status = fail(LINFUSE_ERROR_BACKEND,
                  "%s: a call failed while '%s' was captured; the graph "
                  "would lack it and is not kept",
                  fn, captureKey.c_str());
  }
  // Memory from outside the capture that the capture freed: the graph may
  // read it at every launch, so the graph keeps it until it is dropped. A
  // graph that is not kept never runs: its frees run now.
  std::vector<void *> frees;
  if (status == LINFUSE_OK) {
    ScopedContext context(fn); // For the graph it replaces.
    std::lock_guard<std::mutex> lock(graphMutex);
    Graph &slot = graphs[captureKey];
    // The replaced graph's memory is freed after its launches (all on the
    // runtime's stream).
    retire(slot, frees);
    slot = g;
    slot.frees = std::move(ended.deferredFrees);
  } else {
    frees = std::move(ended.deferredFrees);
  }
  freeDeferred(fn, std::move(frees));
  captureMutex.unlock();
  return status;
}

int32_t linfuse_cuda_graph_launch(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_launch";
  if (!validKey(fn, key))
    return LINFUSE_ERROR_INVALID_ARGUMENT;
  // No captureMutex: another thread's capture records its own stream, so
  // the launch goes on the runtime's stream (on this thread's capture
  // stream, recorded, if this thread captures).
  return inContext(fn, nullptr, [&](CUstream stream) {
    // Held while launching, so that linfuse_cuda_graph_destroy cannot free
    // the graph under the launch.
    std::lock_guard<std::mutex> lock(graphMutex);
    auto it = graphs.find(key);
    if (it == graphs.end())
      return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                  "%s: no graph was captured under '%s'", fn, key);
    return launchGraph(fn, stream, it->second);
  });
}

int32_t linfuse_cuda_graph_exists(const char *key) {
  if (!key)
    return 0;
  std::lock_guard<std::mutex> lock(graphMutex);
  return graphs.count(key) != 0;
}

int32_t linfuse_cuda_graph_destroy(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_destroy";
  // Not during a capture (the synchronization below would invalidate it):
  // another thread's capture ends first.
  if (const char *why = busy())
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: %s", fn, why);
  std::vector<void *> frees; // What the dropped keyed graphs kept.
  int32_t status;
  {
    std::lock_guard<std::mutex> captures(captureMutex);
    std::lock_guard<std::mutex> lock(graphMutex);
    if (graphs.empty() && (key || functionGraphs.empty()))
      return LINFUSE_OK; // Also without a device: nothing was captured.
    status = inContext(fn, nullptr, [&](CUstream stream) {
      // A replay still in flight keeps using the graph: wait for it.
      if (int32_t s = check(driver().cuStreamSynchronize(stream), fn,
                            "cuStreamSynchronize"))
        return s;
      for (auto it = graphs.begin(); it != graphs.end();) {
        if (key && it->first != key) {
          ++it;
          continue;
        }
        retire(it->second, frees);
        it = graphs.erase(it);
      }
      if (!key)
        functionGraphs.clear();
      return int32_t(LINFUSE_OK);
    });
  }
  freeDeferred(fn, std::move(frees));
  return status;
}

//===----------------------------------------------------------------------===//
// Runtime.h: function graphs
//===----------------------------------------------------------------------===//

int32_t linfuse_cuda_function_begin(uintptr_t slot, const int64_t *key,
                                    int64_t keyLength) {
  constexpr const char *fn = "linfuse_cuda_function_begin";
  if (call.depth++ > 0)
    return LINFUSE_OK; // A call inside a captured or replayed one.
  if (!slot || keyLength < 0 || (keyLength > 0 && !key))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: invalid function slot or argument key", fn);
  return inContext(fn, nullptr, [&](CUstream) {
    // Inside this thread's linfuse_cuda_graph_begin capture the body is
    // recorded into that one.
    if (capturing()) {
      call.mode = FunctionCall::Mode::PassThrough;
      return int32_t(LINFUSE_OK);
    }
    std::vector<int64_t> argumentKey(key, key + keyLength);
    // Held until _end: another thread's capture or graph call waits.
    captureMutex.lock();
    call.key = std::move(argumentKey);
    call.generation = slotGeneration(slot);
    call.failuresAtBegin = failureCount();
    bool failedBefore = false;
    if ((call.replay =
             findGraph(slot, call.generation, call.key, failedBefore))) {
      call.mode = FunctionCall::Mode::Replay;
      captureState.beginReplay(call.replay->allocations);
      return int32_t(LINFUSE_OK);
    }
    if (failedBefore) {
      // Its capture failed before: capturing again would fail again, so
      // the body runs plainly.
      captureMutex.unlock();
      call.mode = FunctionCall::Mode::PassThrough;
      return int32_t(LINFUSE_OK);
    }
    if (int32_t s = beginCapture(fn, "a function call")) {
      captureMutex.unlock();
      call.key.clear();
      return s;
    }
    call.mode = FunctionCall::Mode::Capture;
    return int32_t(LINFUSE_OK);
  });
}

namespace {

/// Ends this thread's replay: launches the graph unless the body failed or
/// diverged from the capture. `deferred` gets the frees to run after it.
int32_t endReplay(const char *fn, bool failed, std::vector<void *> &deferred) {
  size_t made = captureState.cursor(),
         expected = captureState.allocationCount();
  bool diverged = captureState.diverged();
  deferred = captureState.end().deferredFrees;
  if (failed || diverged)
    return LINFUSE_ERROR_BACKEND; // Already recorded.
  if (made != expected)
    return fail(LINFUSE_ERROR_BACKEND,
                "%s: the replayed function made %zu of the %zu allocations "
                "its capture made",
                fn, made, expected);
  return inContext(fn, nullptr, [&](CUstream stream) {
    return launchGraph(fn, stream, call.replay->graph);
  });
}

/// Ends this thread's function capture: instantiates, launches and keeps
/// the graph, or, if the capture or the body failed in a way that would
/// happen again (failsAgain), remembers the key so that its later calls
/// run without a graph. `deferred` gets the frees to run after the launch.
int32_t endFunctionCapture(const char *fn, uintptr_t slot, bool failed,
                           std::vector<void *> &deferred) {
  auto g = std::make_shared<FunctionGraph>();
  CaptureState::Ended ended;
  CaptureFailure failure;
  int32_t s = endCapture(fn, g->graph, ended, failure);
  deferred = std::move(ended.deferredFrees);
  // Something in the body failed while it was recorded (a GEMM's
  // arguments, say): the graph lacks that work, so it is not kept.
  if (failed) {
    s = LINFUSE_ERROR_BACKEND; // The graph goes with g.
    failure = CaptureFailure::Body;
  }
  if (s != LINFUSE_OK) {
    // Only a failure that would happen again stops the key capturing.
    if (failsAgain(failure)) {
      std::lock_guard<std::mutex> lock(graphMutex);
      graphsOf(slot, call.generation).failed.add(std::move(call.key));
    }
    return s;
  }
  g->key = std::move(call.key);
  g->allocations = std::move(ended.allocations);
  s = inContext(fn, nullptr, [&](CUstream stream) {
    return launchGraph(fn, stream, g->graph);
  });
  if (s != LINFUSE_OK)
    return s;
  std::lock_guard<std::mutex> lock(graphMutex);
  std::deque<FunctionGraphPtr> &list = graphsOf(slot, call.generation).list;
  list.push_front(std::move(g));
  if (list.size() > kGraphsPerFunction)
    list.pop_back(); // Not in flight: every launch is waited for.
  return LINFUSE_OK;
}

} // namespace

int32_t linfuse_cuda_function_end(uintptr_t slot) {
  constexpr const char *fn = "linfuse_cuda_function_end";
  if (call.depth == 0)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: no function call in progress", fn);
  if (--call.depth > 0)
    return LINFUSE_OK;
  if (call.mode == FunctionCall::Mode::None ||
      call.mode == FunctionCall::Mode::PassThrough) {
    // Begin failed (and said why), an outer capture records the body, or
    // the body ran plainly.
    finishCall();
    return LINFUSE_OK;
  }
  bool failed = failureCount() != call.failuresAtBegin;
  std::vector<void *> deferred;
  int32_t status = call.mode == FunctionCall::Mode::Replay
                       ? endReplay(fn, failed, deferred)
                       : endFunctionCapture(fn, slot, failed, deferred);
  // After the launch, on the runtime's stream.
  freeDeferred(fn, std::move(deferred));
  // The compiled function returns to its caller with its work done, as
  // without a graph.
  if (status == LINFUSE_OK)
    status = inContext(fn, nullptr, [&](CUstream stream) {
      return check(driver().cuStreamSynchronize(stream), fn,
                   "cuStreamSynchronize");
    });
  finishCall();
  return status;
}

void linfuse_cuda_function_abandon(void) {
  if (call.depth == 0)
    return;
  CaptureState::Ended ended;
  if (call.mode == FunctionCall::Mode::Capture) {
    // Ends the capture; the partial recording is dropped uninstantiated.
    ScopedContext context("linfuse_cuda_function_abandon");
    CUgraph partial = nullptr;
    if (stopCapture(partial, ended) == CUDA_SUCCESS && partial)
      driver().cuGraphDestroy(partial);
  } else if (call.mode == FunctionCall::Mode::Replay) {
    ended = captureState.end();
  }
  freeDeferred("linfuse_cuda_function_abandon", std::move(ended.deferredFrees));
  finishCall();
}
