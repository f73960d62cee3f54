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
  /// `outputs` when it is non-null, else only freed.
  llvm::Error run(std::vector<HostArray> *outputs);

  /// True when the entry function got a packing function.
  bool hasPackFunction() const { return !packName.empty(); }

private:
  Executable() = default;
  struct Buffers;

  llvm::Error call(llvm::StringRef name, llvm::ArrayRef<const HostArray *> in,
                   llvm::ArrayRef<TensorSignature> outTypes,
                   std::vector<HostArray> *out);

  std::unique_ptr<ExecutionEngine> engine;
  std::string entryName, packName;
  llvm::SmallVector<TensorSignature> args, resultTypes;
  /// Types of the packing function's results (the entry's extra arguments).
  llvm::SmallVector<TensorSignature> packedTypes;
  std::vector<HostArray> inputs, packed;
};

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_EXECUTABLE_H
