//===- linfuse-run.cpp - JIT-execute a linalg-on-tensors function ---------===//
//
// iree-run-module for linfuse: optimizes (unless --no-optimize), lowers and
// JIT-compiles one function, calls it on the given inputs, and prints or
// saves its results. Every failure is one line on stderr and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/PassReport.h"
#include "linfuse/Runtime/Runtime.h"
#include "linfuse/Tools/HostArray.h"
#include "linfuse/Tools/ModuleLoading.h"
#include "linfuse/Tools/ToolContext.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

using namespace mlir;
using namespace mlir::linfuse;
namespace cl = llvm::cl;

static cl::OptionCategory category("linfuse-run options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<input .mlir file>"),
                                      cl::Required, cl::cat(category));
static cl::opt<std::string> entry("entry",
                                  cl::desc("Function to run (default: main)"),
                                  cl::init("main"), cl::cat(category));
static cl::opt<std::string>
    target("target", cl::desc("Where to run: cpu (CBLAS) or cuda"),
           cl::init("cpu"), cl::cat(category));
static cl::opt<bool>
    noOptimize("no-optimize",
               cl::desc("Skip --linfuse-optimize (the reference path)"),
               cl::cat(category));
static cl::list<std::string>
    inputs("input",
           cl::desc("One per argument, in order: @file.npy, or a splat such "
                    "as 2x3xf32=1.5 (bf16 .npy files hold uint16 bits)"),
           cl::cat(category));
static cl::list<std::string>
    outputs("output",
            cl::desc("One per result: @file.npy (without it, results are "
                     "printed)"),
            cl::cat(category));
static cl::opt<bool>
    runtimeStats("runtime-stats",
                 cl::desc("Print gemm_calls, kernel_launches, "
                          "fallback_gemm_calls, loop_calls and "
                          "threaded_loop_calls of one call"),
                 cl::cat(category));
static cl::opt<unsigned> benchmark(
    "benchmark",
    cl::desc("Time N calls after a warm-up call; print median and min "
             "(cuda: CUDA-event time on the runtime's stream, and host "
             "time)"),
    cl::init(0), cl::cat(category));
static cl::opt<bool> cudaGraph(
    "cuda-graph",
    cl::desc("cuda: capture the function's device work into a CUDA graph on "
             "the first call, replay it on the others"),
    cl::cat(category));
static cl::opt<bool> runtimeChecks(
    "runtime-checks",
    cl::desc("Check at run time that operand sizes agree and indices are in "
             "bounds; a failed check is an error naming the op's location "
             "(default on; =false saves their cost)"),
    cl::init(true), cl::cat(category));
static cl::opt<std::string> objectCache(
    "object-cache",
    cl::desc("cpu: keep the JIT's compiled object in this directory and link "
             "it instead of compiling when the same lowered module is run "
             "again on this host (the Python package's default: "
             "~/.cache/linfuse); default: compile every time"),
    cl::value_desc("dir"), cl::cat(category));
static cl::opt<bool> verbose("verbose",
                             cl::desc("Print the stages as they run"),
                             cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "linfuse-run: error: " << message << "\n";
  return 1;
}

static int fail(llvm::Error err) {
  std::string message = llvm::toString(std::move(err));
  return fail(message);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "linfuse-run: optimize, compile and run a linalg-on-tensors function\n\n"
      "  linfuse-run model.mlir --input=@x.npy --input=8x8xf32=1 "
      "--output=@y.npy\n\n"
      "Arguments marked `linfuse.weight` are packed once (merged and folded "
      "weights) before the calls; --runtime-stats and --benchmark count and "
      "time the calls only.\n");

  llvm::Expected<Target> targetKind = parseTarget(target);
  if (!targetKind)
    return fail(targetKind.takeError());

  DialectRegistry registry;
  registerToolDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  auto module = loadModule(inputFile, context);
  if (!module)
    return fail(module.takeError());

  // Inputs first: a missing file is reported before any compilation.
  std::vector<HostArray> arrays;
  for (const std::string &spec : inputs) {
    auto array = parseInputSpec(spec);
    if (!array)
      return fail(array.takeError());
    arrays.push_back(std::move(*array));
  }

  CompileOptions options;
  options.target = *targetKind;
  options.optimize = !noOptimize;
  options.lower.cudaGraph = cudaGraph;
  options.lower.runtimeChecks = runtimeChecks;
  options.objectCache = objectCache;
  // The cache keeps a compiled function whole only with the report its
  // passes made (a later compilation may ask for it); nothing prints it.
  PassReport report;
  if (!objectCache.empty())
    options.report = &report;
  if (verbose)
    options.progress = [](llvm::StringRef stage) {
      llvm::errs() << "linfuse-run: " << stage << "\n";
    };
  auto exe = Executable::compile(**module, entry, options);
  if (!exe)
    return fail(exe.takeError());
  Executable &executable = **exe;
  if (!outputs.empty() && outputs.size() != executable.results().size())
    return fail("@" + entry + " has " +
                llvm::Twine(executable.results().size()) + " results, got " +
                llvm::Twine(outputs.size()) + " --output flags");
  for (const std::string &out : outputs)
    if (!llvm::StringRef(out).starts_with("@"))
      return fail("--output must be @file.npy, not '" + out + "'");
  if (llvm::Error err = executable.bind(std::move(arrays)))
    return fail(std::move(err));

  linfuse_reset_stats();
  std::vector<HostArray> results;
  if (llvm::Error err = executable.run(&results))
    return fail(std::move(err));
  linfuse_runtime_stats stats;
  linfuse_get_stats(&stats);

  if (benchmark > 0) {
    // On the GPU each call is also timed with CUDA events recorded on the
    // runtime's stream around it: the device's view of the call.
    bool deviceTimes = *targetKind == Target::CUDA;
    std::vector<double> ms, deviceMs;
    for (unsigned i = 0; i < benchmark; ++i) {
      if (deviceTimes && linfuse_cuda_timer_start() != LINFUSE_OK)
        return fail(linfuse_last_error_message());
      auto start = std::chrono::steady_clock::now();
      if (llvm::Error err = executable.run(nullptr))
        return fail(std::move(err));
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
      float elapsed = 0;
      if (deviceTimes) {
        if (linfuse_cuda_timer_stop(&elapsed) != LINFUSE_OK)
          return fail(linfuse_last_error_message());
        deviceMs.push_back(elapsed);
      }
    }
    auto report = [](llvm::StringRef what, std::vector<double> &times) {
      std::sort(times.begin(), times.end());
      llvm::outs() << llvm::format(
          "benchmark: %u runs, %smedian %.4f ms, min %.4f ms\n",
          static_cast<unsigned>(times.size()), what.str().c_str(),
          times[times.size() / 2], times.front());
    };
    report("", ms);
    if (deviceTimes)
      report("CUDA events: ", deviceMs);
  }
  if (runtimeStats)
    llvm::outs() << "gemm_calls: " << stats.gemm_calls
                 << "\nkernel_launches: " << stats.kernel_launches
                 << "\nfallback_gemm_calls: " << stats.fallback_gemm_calls
                 << "\nloop_calls: " << stats.loop_calls
                 << "\nthreaded_loop_calls: " << stats.threaded_loop_calls
                 << "\nweight_reorders: " << stats.weight_reorders
                 << "\nmkl_gemm_calls: " << stats.mkl_gemm_calls
                 << "\nfew_row_gemm_calls: " << stats.few_row_gemm_calls
                 << "\n";

  for (auto [i, result] : llvm::enumerate(results)) {
    if (!outputs.empty()) {
      if (llvm::Error err =
              writeNpy(llvm::StringRef(outputs[i]).drop_front(), result))
        return fail(std::move(err));
      continue;
    }
    llvm::outs() << "result[" << i << "]: ";
    printArray(llvm::outs(), result);
    llvm::outs() << "\n";
  }
  return 0;
}
