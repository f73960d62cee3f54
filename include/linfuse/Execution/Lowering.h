//===- Lowering.h - optimize and lower a module for a target ------*- C++
//-*-===//
//
// The two steps every driver (linfuse-run, linfuse-compile, the Python
// bindings) runs on linalg-on-tensors input, with errors as one line.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_EXECUTION_LOWERING_H
#define LINFUSE_EXECUTION_LOWERING_H

#include "linfuse/Execution/PassReport.h"
#include "linfuse/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir {
namespace linfuse {

enum class Target { CPU, CUDA };

/// "cpu" or "cuda" (a `--target=` value); anything else is a one-line
/// error.
llvm::Expected<Target> parseTarget(llvm::StringRef name);

/// --linfuse-optimize, lifting weight packing when `liftWeights` (functions
/// with `linfuse.weight` arguments get `@f__pack`) and asserting the input
/// program's size relations at function entry when `entryChecks` (what the
/// drivers do while run-time checks are on). With `report`, what the passes
/// did is added to it.
llvm::Error optimizeModule(ModuleOp module, bool liftWeights, bool entryChecks,
                           PassReport *report = nullptr);
llvm::Error optimizeModule(ModuleOp module,
                           const OptimizePipelineOptions &options,
                           PassReport *report = nullptr);

/// What the drivers let users choose about the lowering.
struct LowerOptions {
  /// CUDA only: each public function captures its device work into a CUDA
  /// graph on its first call with given arguments and replays it on later
  /// ones (--linfuse-lower-to-cuda=cuda-graph=true).
  bool cudaGraph = false;
  /// Run-time checks that operand sizes agree and indices are in bounds
  /// (runtime-checks=true of the lowering pipelines). A failed check ends
  /// the call with an error naming the op's location; off saves their cost
  /// (docs/Benchmarks.md) for callers that guarantee the shapes.
  bool runtimeChecks = true;
  /// CPU: weight-packing functions start by dropping every reordered weight
  /// copy of the host runtime (release-on-pack=true of the pipeline), as a
  /// library's caller may pack anywhere; the JIT's Executable turns it off
  /// and drops only the copies of the packed weights it gets and frees.
  bool releaseOnPack = true;
};

/// --linfuse-lower-to-cpu or --linfuse-lower-to-cuda (an error in builds
/// without the CUDA toolkit, and for `cudaGraph` on the CPU).
llvm::Error lowerModule(ModuleOp module, Target target,
                        PassReport *report = nullptr,
                        const LowerOptions &options = {});

/// The bytes of a constant global taken out of a module by
/// externalizeLargeConstants, as the compiled code reads them.
struct ExternalConstant {
  std::string symbol;
  std::shared_ptr<void> data; // 64-byte aligned
  size_t bytes = 0;
};

/// Turns every constant `llvm.mlir.global` of the LLVM-dialect `module`
/// (outside gpu.module) whose dense initializer holds at least `minBytes`
/// into an external declaration, and returns the initializers' bytes, to
/// be bound to those symbols at load time (the JIT's symbol map). LLVM
/// then never sees the weights: emitting them element by element is what
/// made compile time grow with a model's bytes.
std::vector<ExternalConstant> externalizeLargeConstants(ModuleOp module,
                                                        size_t minBytes);

/// Makes the LLVM-dialect `module`'s failed cf.asserts call
/// liblinfuse_runtime (linfuse_assert_message / linfuse_assert_abort)
/// instead of libc's puts and abort, so that inside linfuse_call a failed
/// run-time check is an error of the call, not the end of the process. The
/// drivers call it just before code generation (JIT and linfuse-compile).
void routeAssertionsToRuntime(ModuleOp module);

/// Gives every function defined in the LLVM-dialect `module` internal
/// linkage but the C interfaces (`_mlir_ciface_*`), the only symbols the
/// drivers look up. LLVM can then inline a function into its one caller
/// and drop it, and the JIT (whose ExecutionEngine wraps every function
/// of external linkage in a packed-argument `_mlir_<name>` that inlines
/// it) generates each loop body once instead of twice. The drivers call it
/// after lowering (JIT and linfuse-compile).
void internalizeImplementation(ModuleOp module);

/// Any textual pass pipeline on the module, as mlir-opt's --pass-pipeline
/// takes it ("builtin.module(inline, func.func(cse))") or as the passes
/// alone ("inline, func.func(cse)"); the passes must be registered.
llvm::Error runPipeline(ModuleOp module, llvm::StringRef pipeline,
                        PassReport *report = nullptr);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_LOWERING_H
