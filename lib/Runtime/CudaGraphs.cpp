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

namespace {

/// An instantiated graph and the work it replays (for the stats).
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  int64_t gemmCalls = 0, kernelLaunches = 0;
};

std::mutex graphMutex;
std::map<std::string, Graph> graphs; // guarded by graphMutex
std::string captureKey;              // guarded by graphMutex
Graph captured;                      // guarded by graphMutex: counts so far
/// Whether this thread is capturing: its work is recorded into the graph;
/// other threads' captures and graph calls wait for it (captureMutex).
thread_local bool ownsCapture = false;

/// Held from the start of a capture (keyed, or of a function call) or of a
/// function graph's replay to its end: the runtime's one stream can record
/// one capture at a time, and a launch from another thread during a capture
/// would be recorded into it.
std::mutex captureMutex;

void addToStats(int64_t gemmCalls, int64_t kernelLaunches) {
  for (int64_t i = 0; i < gemmCalls; ++i)
    countGemmCall();
  countKernelLaunches(kernelLaunches);
}

/// Destroys `g`'s handles (call with a context current).
void destroy(Graph &g) {
  if (g.exec)
    driver().cuGraphExecDestroy(g.exec);
  if (g.graph)
    driver().cuGraphDestroy(g.graph);
  g = Graph();
}

bool validKey(const char *fn, const char *key) {
  if (key && *key)
    return true;
  fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: the graph key is null or empty",
       fn);
  return false;
}

/// Starts capturing the runtime's stream (graphMutex held). The GEMM
/// workspace is allocated first: allocating it inside the capture would
/// make it a graph allocation.
int32_t beginCapture(const char *fn, CUstream stream, const char *key) {
  if (cublasLtUsable())
    if (int32_t s = prepareGemm(fn))
      return s;
  // Thread-local mode: calls that cannot be captured (a synchronization,
  // cuMemAlloc) fail on this thread and invalidate the capture, which the
  // end of the capture then reports; other threads are not affected.
  if (int32_t s = check(driver().cuStreamBeginCapture(
                            stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                        fn, "cuStreamBeginCapture"))
    return s;
  captureKey = key;
  captured = Graph();
  ownsCapture = true;
  return LINFUSE_OK;
}

/// Forgets this thread's capture, whether or not the stream's capture could
/// be ended.
void dropCapture() { ownsCapture = false; }

/// Ends the capture (graphMutex held) and instantiates it into `out`.
/// Relaunching frees what the previous launch left allocated.
int32_t endCapture(const char *fn, CUstream stream, Graph &out) {
  dropCapture();
  Graph g = captured;
  // Ends the capture whatever happened during it.
  int32_t s = check(driver().cuStreamEndCapture(stream, &g.graph), fn,
                    "cuStreamEndCapture");
  if (s == LINFUSE_OK)
    s = check(
        driver().cuGraphInstantiateWithFlags(
            &g.exec, g.graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
        fn, "cuGraphInstantiateWithFlags");
  if (s != LINFUSE_OK) {
    destroy(g);
    return s;
  }
  out = g;
  return LINFUSE_OK;
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

struct Allocation {
  void *ptr;
  uint64_t bytes;
};

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

/// The graphs of one function, most recently used first, and the
/// generation of its slot they belong to.
struct FunctionGraphs {
  int64_t generation = 0;
  std::deque<FunctionGraphPtr> list;
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

/// What this thread's function call is doing.
struct FunctionCall {
  enum class Mode { None, PassThrough, Capture, Replay };
  Mode mode = Mode::None;
  int depth = 0; // Nested calls are part of the outermost one.
  std::vector<int64_t> key;
  int64_t generation = 0;
  FunctionGraphPtr replay;
  size_t cursor = 0;
  bool diverged = false;
  std::vector<Allocation> recorded;
  uint64_t failuresAtBegin = 0;
};
thread_local FunctionCall call;

/// The graphs of the function of `slot` (graphMutex held), emptied if they
/// belong to an earlier module at that address.
std::deque<FunctionGraphPtr> &graphsOf(uintptr_t slot, int64_t generation) {
  FunctionGraphs &graphs = functionGraphs[slot];
  if (graphs.generation != generation) {
    graphs.list.clear();
    graphs.generation = generation;
  }
  return graphs.list;
}

FunctionGraphPtr findGraph(uintptr_t slot, int64_t generation,
                           const std::vector<int64_t> &key) {
  std::lock_guard<std::mutex> lock(graphMutex);
  std::deque<FunctionGraphPtr> &list = graphsOf(slot, generation);
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

bool cuda::capturing() { return ownsCapture; }

bool cuda::replaying() { return call.mode == FunctionCall::Mode::Replay; }

void *cuda::replayAllocation(uint64_t bytes, const char *fn) {
  if (call.diverged)
    return nullptr;
  const std::vector<Allocation> &allocations = call.replay->allocations;
  if (call.cursor >= allocations.size() ||
      allocations[call.cursor].bytes != bytes) {
    call.diverged = true;
    fail(LINFUSE_ERROR_BACKEND,
         "%s: the replayed function asked for allocation %zu of %llu bytes, "
         "which its capture did not make (a graph replays only calls that "
         "repeat the captured one)",
         fn, call.cursor, static_cast<unsigned long long>(bytes));
    return nullptr;
  }
  return allocations[call.cursor++].ptr;
}

void cuda::noteCapturedAllocation(void *ptr, uint64_t bytes) {
  if (call.mode == FunctionCall::Mode::Capture)
    call.recorded.push_back({ptr, bytes});
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
  if (ownsCapture)
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
  return inContext(fn, nullptr, [&](CUstream stream) {
    // Held until _end: another thread's capture or graph call waits.
    captureMutex.lock();
    std::lock_guard<std::mutex> lock(graphMutex);
    int32_t s = beginCapture(fn, stream, key);
    if (s != LINFUSE_OK)
      captureMutex.unlock();
    return s;
  });
}

int32_t linfuse_cuda_graph_end(void) {
  constexpr const char *fn = "linfuse_cuda_graph_end";
  if (!ownsCapture || call.mode == FunctionCall::Mode::Capture)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: no capture in progress on this thread (call "
                "linfuse_cuda_graph_begin)",
                fn);
  int32_t status = inContext(fn, nullptr, [&](CUstream stream) {
    std::lock_guard<std::mutex> lock(graphMutex);
    Graph g;
    if (int32_t s = endCapture(fn, stream, g))
      return s;
    Graph &slot = graphs[captureKey];
    destroy(slot);
    slot = g;
    return int32_t(LINFUSE_OK);
  });
  dropCapture(); // If a failure (no context) left it open.
  captureMutex.unlock();
  return status;
}

int32_t linfuse_cuda_graph_launch(const char *key) {
  constexpr const char *fn = "linfuse_cuda_graph_launch";
  if (!validKey(fn, key))
    return LINFUSE_ERROR_INVALID_ARGUMENT;
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
  std::lock_guard<std::mutex> captures(captureMutex);
  std::lock_guard<std::mutex> lock(graphMutex);
  if (graphs.empty() && (key || functionGraphs.empty()))
    return LINFUSE_OK; // Also without a device: nothing was captured.
  return inContext(fn, nullptr, [&](CUstream stream) {
    // A replay still in flight keeps using the graph: wait for it.
    if (int32_t s = check(driver().cuStreamSynchronize(stream), fn,
                          "cuStreamSynchronize"))
      return s;
    for (auto it = graphs.begin(); it != graphs.end();) {
      if (key && it->first != key) {
        ++it;
        continue;
      }
      destroy(it->second);
      it = graphs.erase(it);
    }
    if (!key)
      functionGraphs.clear();
    return int32_t(LINFUSE_OK);
  });
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
  return inContext(fn, nullptr, [&](CUstream stream) {
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
    if ((call.replay = findGraph(slot, call.generation, call.key))) {
      call.mode = FunctionCall::Mode::Replay;
      return int32_t(LINFUSE_OK);
    }
    std::lock_guard<std::mutex> lock(graphMutex);
    if (int32_t s = beginCapture(fn, stream, "a function call")) {
      captureMutex.unlock();
      call.key.clear();
      return s;
    }
    call.mode = FunctionCall::Mode::Capture;
    return int32_t(LINFUSE_OK);
  });
}

int32_t linfuse_cuda_function_end(uintptr_t slot) {
  constexpr const char *fn = "linfuse_cuda_function_end";
  if (call.depth == 0)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: no function call in progress", fn);
  if (--call.depth > 0)
    return LINFUSE_OK;
  if (call.mode == FunctionCall::Mode::None ||
      call.mode == FunctionCall::Mode::PassThrough) {
    // Begin failed (and said why) or an outer capture records the body.
    finishCall();
    return LINFUSE_OK;
  }
  int32_t status = inContext(fn, nullptr, [&](CUstream stream) -> int32_t {
    bool failed = failureCount() != call.failuresAtBegin;
    if (call.mode == FunctionCall::Mode::Replay) {
      if (failed || call.diverged)
        return LINFUSE_ERROR_BACKEND; // Already recorded.
      if (call.cursor != call.replay->allocations.size())
        return fail(LINFUSE_ERROR_BACKEND,
                    "%s: the replayed function made %zu of the %zu "
                    "allocations its capture made",
                    fn, call.cursor, call.replay->allocations.size());
      if (int32_t s = launchGraph(fn, stream, call.replay->graph))
        return s;
    } else {
      auto g = std::make_shared<FunctionGraph>();
      {
        std::lock_guard<std::mutex> lock(graphMutex);
        if (int32_t s = endCapture(fn, stream, g->graph))
          return s;
      }
      // Something in the body failed while it was recorded (a GEMM's
      // arguments, say): the graph lacks that work, so it is not kept.
      if (failed)
        return LINFUSE_ERROR_BACKEND;
      g->key = std::move(call.key);
      g->allocations = std::move(call.recorded);
      if (int32_t s = launchGraph(fn, stream, g->graph))
        return s;
      std::lock_guard<std::mutex> lock(graphMutex);
      std::deque<FunctionGraphPtr> &list = graphsOf(slot, call.generation);
      list.push_front(std::move(g));
      if (list.size() > kGraphsPerFunction)
        list.pop_back(); // Not in flight: every launch below is waited for.
    }
    // The compiled function returns to its caller with its work done, as
    // without a graph.
    return check(driver().cuStreamSynchronize(stream), fn,
                 "cuStreamSynchronize");
  });
  dropCapture(); // If a failure (no context) left it open.
  finishCall();
  return status;
}

void linfuse_cuda_function_abandon(void) {
  if (call.depth == 0)
    return;
  if (call.mode == FunctionCall::Mode::Capture) {
    inContext("linfuse_cuda_function_abandon", nullptr, [&](CUstream stream) {
      // Ends the capture; the partial recording is dropped uninstantiated.
      CUgraph partial = nullptr;
      if (driver().cuStreamEndCapture(stream, &partial) == CUDA_SUCCESS &&
          partial)
        driver().cuGraphDestroy(partial);
      return int32_t(LINFUSE_OK);
    });
    dropCapture();
  }
  finishCall();
}
