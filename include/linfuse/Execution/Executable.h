//===- Executable.h - compile and call a function in-process ------*- C++
//-*-===//
//
// What linfuse-run (and the Python bindings) do with a linalg-on-tensors
// function: optimize it (weights marked `linfuse.weight` are lifted into a
// packing function, run once per set of inputs), lower it for the host,
// JIT-compile it with MLIR's ExecutionEngine, and call it on host arrays.
//
// Calling convention of the compiled code (the same as linfuse-compile's):
// every tensor argument and result is a memref descriptor; inputs are never
// written (`--linfuse-read-only-arguments`); results are fresh row-major
// buffers owned by the caller.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_EXECUTION_EXECUTABLE_H
#define LINFUSE_EXECUTION_EXECUTABLE_H

#include "linfuse/Execution/Lowering.h"
#include "linfuse/Tools/HostArray.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace mlir {
class ExecutionEngine;
namespace linfuse {

struct CompileOptions {
  Target target = Target::CPU;
  /// Run --linfuse-optimize (with weight lifting) first; false is the
  /// reference path (`linfuse-run --no-optimize`).
  bool optimize = true;
  /// Called with each stage's name ("optimize", "lower", "jit") as it starts.
  std::function<void(llvm::StringRef)> progress;
};

/// An argument or result of the entry function as written (before lifting).
struct TensorSignature {
  ElementType type;
  /// ShapedType::kDynamic for dynamic sizes.
  llvm::SmallVector<int64_t> shape;
  /// A `linfuse.weight` argument.
  bool isWeight = false;

  /// "?x8xf32".
  std::string str() const;
};

class Executable {
public:
  /// Compiles function `entry` of `module` (consumed: it is optimized and
  /// lowered in place). Errors (no such function, unsupported signature,
  /// pass failures) carry a one-line message.
  static llvm::Expected<std::unique_ptr<Executable>>
  compile(ModuleOp module, llvm::StringRef entry,
          const CompileOptions &options);
  ~Executable();

  llvm::ArrayRef<TensorSignature> arguments() const { return args; }
  llvm::ArrayRef<TensorSignature> results() const { return resultTypes; }

  /// Checks `inputs` (one per argument, in order) against the signature and
  /// takes them; runs the packing function on the weights if there is one.
  llvm::Error bind(std::vector<HostArray> inputs);

  /// Calls the entry function on the bound inputs. Results are copied into
  /// `outputs` (from the device on CUDA) when it is non-null, else only
  /// freed. On CUDA the call returns when the device is done.
  llvm::Error run(std::vector<HostArray> *outputs);

  /// True when the entry function got a packing function.
  bool hasPackFunction() const { return !packName.empty(); }

  /// Where the compiled code's buffers live.
  Target target() const { return targetKind; }

  /// A buffer the compiled code reads: host memory on the CPU target,
  /// device memory on the CUDA target.
  struct Buffer {
    void *data = nullptr;       // What the descriptor points to.
    void *allocation = nullptr; // What to free (nullptr: not ours).
    llvm::SmallVector<int64_t> shape;
  };

private:
  Executable() = default;

  llvm::Error call(llvm::StringRef name, llvm::ArrayRef<const Buffer *> in,
                   llvm::ArrayRef<TensorSignature> outTypes,
                   std::vector<HostArray> *out, std::vector<Buffer> *keep);
  void release(std::vector<Buffer> &buffers);

  std::unique_ptr<ExecutionEngine> engine;
  Target targetKind = Target::CPU;
  std::string entryName, packName;
  llvm::SmallVector<TensorSignature> args, resultTypes;
  /// Types of the packing function's results (the entry's extra arguments).
  llvm::SmallVector<TensorSignature> packedTypes;
  /// The bound inputs (host copies) and what the code reads: the same
  /// memory on the CPU, device copies uploaded once at bind on CUDA.
  std::vector<HostArray> inputs;
  std::vector<Buffer> inputBuffers;
  /// The packing function's results, left where it produced them.
  std::vector<Buffer> packed;
};

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_EXECUTABLE_H
