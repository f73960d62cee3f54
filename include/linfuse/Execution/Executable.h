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
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>

namespace llvm {
class Module;
class TargetMachine;
namespace orc {
class LLJIT;
} // namespace orc
} // namespace llvm

namespace mlir {
class ExecutionEngine;
namespace linfuse {
class ObjectCache;

struct CompileOptions {
  Target target = Target::CPU;
  /// Run --linfuse-optimize (with weight lifting) first; false is the
  /// reference path (`linfuse-run --no-optimize`).
  bool optimize = true;
  /// How to lower (CUDA graphs).
  LowerOptions lower;
  /// When set, what the passes did (optimize and lower) is added to it.
  PassReport *report = nullptr;
  /// Called with each stage's name as it starts: "optimize", "lower", then
  /// "jit", or "load" for an object from `objectCache` (only "load" when
  /// the whole function came from it).
  std::function<void(llvm::StringRef)> progress;
  /// CPU: a directory of compiled code (ObjectCache.h). The JIT's object
  /// is stored under a key of the lowered module, and what the passes found
  /// (the report, the packing function) under a key of the module as given:
  /// compiling the same function again for this host links the object
  /// without running the passes or LLVM. Empty: everything runs every time.
  /// defaultObjectCacheDirectory() is what linfuse's Python package passes.
  std::string objectCache;
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

/// An array the caller owns and keeps alive across the call: packed
/// row-major host memory (the Python bindings' numpy arrays and DLPack
/// tensors, without copies on the CPU), or, for the CUDA target, device
/// memory of the runtime's device (read in place, no copies).
struct ArrayView {
  ElementType type = ElementType::F32;
  llvm::SmallVector<int64_t> shape;
  const void *data = nullptr;
  /// `data` is device memory (CUDA target only).
  bool device = false;
};

/// How invoke() exchanges memory with the caller on the CUDA target.
struct InvokeOptions {
  /// Results stay on the device, handed out in place like the CPU's
  /// (ResultArray::device), instead of host copies.
  bool deviceResults = false;
  /// The caller's stream (a CUstream of the runtime's device, e.g.
  /// PyTorch's current stream), or null: the call first waits for the work
  /// enqueued on it (which produced the inputs), and device results are
  /// freed only after the work enqueued on it by the time they are
  /// released.
  void *stream = nullptr;
};

/// A result handed to the caller without a copy where possible: on the CPU,
/// the buffer the compiled code allocated for it, or a strided view of it
/// (slices of a merged GEMM's result are returned as views: q, k and v then
/// share one owner, but no element); a result that would overlap another
/// one (a value returned twice) is copied. On CUDA, a host copy.
struct ResultArray {
  ElementType type = ElementType::F32;
  llvm::SmallVector<int64_t> shape;
  /// In elements (views of a merged result are not row-major).
  llvm::SmallVector<int64_t> strides;
  void *data = nullptr;
  /// `data` is device memory (InvokeOptions::deviceResults).
  bool device = false;
  /// Frees the memory `data` points into when the last result sharing it is
  /// gone.
  std::shared_ptr<void> owner;
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

  /// A new executable running the same compiled code (no optimizing, no
  /// code generation again) with a state of its own: its own bound inputs
  /// and packed weights. For functions that differ only in their weights
  /// (the identical layers of a model). CPU target only: on CUDA the code
  /// keeps per-function state (its CUDA graph slot).
  llvm::Expected<std::unique_ptr<Executable>> instantiate() const;

  llvm::ArrayRef<TensorSignature> arguments() const { return args; }
  llvm::ArrayRef<TensorSignature> results() const { return resultTypes; }

  /// Checks `inputs` (one per argument, in order) against the signature and
  /// takes them; runs the packing function on the weights if there is one.
  llvm::Error bind(std::vector<HostArray> inputs);

  /// Calls the entry function on the bound inputs. Results are copied into
  /// `outputs` (from the device on CUDA) when it is non-null, else only
  /// freed. On CUDA the call returns when the device is done.
  llvm::Error run(std::vector<HostArray> *outputs);

  /// Runs the packing function on `weights` (the `linfuse.weight` arguments,
  /// in order) and keeps its results for invoke(); on failure the previous
  /// packing stays. On the CPU the views are read in place and used again by
  /// invoke() (without a packing function, or where packed results alias
  /// them): keep them alive and unchanged until the next successful
  /// packWeights() or the Executable's end. Not to be called while invoke()
  /// runs on another thread.
  llvm::Error packWeights(llvm::ArrayRef<ArrayView> weights);

  /// Calls the entry function on `inputs`: every argument, or, after
  /// packWeights(), only the arguments that are not weights. Weights passed
  /// here are packed for this call only. Results are returned without a copy
  /// on the CPU, and on CUDA with `options.deviceResults` (see ResultArray).
  /// On CUDA the call returns when the device is done.
  llvm::Expected<std::vector<ResultArray>>
  invoke(llvm::ArrayRef<ArrayView> inputs, const InvokeOptions &options = {});

  /// The number of arguments that are not `linfuse.weight`.
  size_t numActivations() const;
  /// True once packWeights() succeeded.
  bool hasPackedWeights() const { return weightsPacked; }

  /// True when the entry function got a packing function.
  bool hasPackFunction() const { return !packName.empty(); }

  /// Groups of weights (indices among the `linfuse.weight` arguments, in
  /// order) that the packing function concatenates row by row into one
  /// packed weight. On the CPU, a caller that places a group's weights one
  /// after the other in memory gets a view of them as the packed weight,
  /// not a copy (--linfuse-view-adjacent-weights).
  llvm::ArrayRef<std::vector<unsigned>> concatenatedWeights() const {
    return weightGroups;
  }

  /// Hands the plain values of packed weights (or, without a packing
  /// function, of the weights as given) over to the host runtime
  /// (linfuse_cpu_hand_over_weights): oneDNN's reordered copy of each is
  /// written over its bytes where its layout takes exactly those and the
  /// memory is private and writable, else made elsewhere and the plain
  /// values' pages dropped; either way the copies become the only ones, and
  /// the caller neither reads nor writes those bytes again. Only where that
  /// is safe: the entry reads the packed weight only
  /// as GEMM B operands (`linfuse.gemm_only_weights`), it lies in the
  /// caller's weights (a view, not a buffer packing made) and within one of
  /// `within` (memory whose addresses the caller keeps reserved while this
  /// executable lives: its end forgets the copies), and no other packed
  /// weight overlaps it. Call it after packWeights() and
  /// before the first call, with the runtime in LINFUSE_REORDER_ALWAYS
  /// (else one-row products need the plain values, and fail). Returns every
  /// range handed over so far; CPU only (nothing elsewhere).
  std::vector<std::pair<const void *, size_t>>
  handOverWeights(llvm::ArrayRef<std::pair<const void *, size_t>> within);

  /// Where the compiled code's buffers live.
  Target target() const { return targetKind; }

  /// A buffer the compiled code reads: host memory on the CPU target,
  /// device memory on the CUDA target.
  struct Buffer {
    void *data = nullptr;       // What the descriptor points to.
    void *allocation = nullptr; // What to free (nullptr: not ours).
    llvm::SmallVector<int64_t> shape;
    /// Bytes from the first element to one past the last (a packed result
    /// may be strided; an input is contiguous).
    size_t spanBytes = 0;
  };

private:
  /// Fills `functions` from the code (compile()).
  static llvm::Error lookUpFunctions(Executable &exe);

  // A compiled function in the object cache (ExecutableCache.cpp): its
  // object under the lowered module's key, and under a key of the module
  // as given (cacheKey) what the passes found: the packing function, the
  // packed weights' types and groups, the GEMM-only weights, the report.
  static std::string cacheKey(ModuleOp module, llvm::StringRef entry,
                              const CompileOptions &options,
                              const llvm::TargetMachine &host);
  /// Links the object stored under `key` as this executable's code (whose
  /// constants it binds) and looks its functions up; false, and no code
  /// linked, when there is none or it does not link.
  bool linkStoredObject(const ObjectCache &cache, llvm::StringRef key,
                        const llvm::TargetMachine &host);
  /// Makes this executable the function stored under `key` (its object
  /// linked, the report's remarks and counters added to options.report);
  /// false, and this executable as it was, when there is none or it fails.
  bool restore(const ObjectCache &cache, llvm::StringRef key,
               const llvm::TargetMachine &host, const CompileOptions &options);
  /// Stores what restore() needs under `key`, its object being stored under
  /// `objectKey`: not for code that binds constants by address (their bytes
  /// come from the passes), nor without a report (the passes collected
  /// none). `report`'s entries from the given indices on are
  /// this compilation's.
  void remember(const ObjectCache &cache, llvm::StringRef key,
                llvm::StringRef objectKey, const PassReport *report,
                size_t firstRemark, size_t firstStatistic) const;
  Executable() = default;

  /// One result as the compiled code returned it: a memref descriptor
  /// (allocated, aligned, offset, sizes, strides).
  struct RawResult {
    const int64_t *words;
    const TensorSignature *type;
    /// The allocation is the code's (not an input or a packed buffer) and
    /// not already claimed by an earlier result sharing it.
    bool ours;
    /// Set by the consumer that takes over freeing the allocation.
    bool taken = false;
  };
  using ResultConsumer =
      llvm::function_ref<void(llvm::MutableArrayRef<RawResult>)>;

  /// Calls `_mlir_ciface_<name>`, hands the results to `consume`, then frees
  /// the allocations it did not take.
  llvm::Error call(llvm::StringRef name, llvm::ArrayRef<const Buffer *> in,
                   llvm::ArrayRef<TensorSignature> outTypes,
                   ResultConsumer consume);
  /// Packs `weights` into `out` (results kept where they are).
  llvm::Error pack(llvm::ArrayRef<const Buffer *> weights,
                   std::vector<Buffer> &out);
  /// Calls the entry function on `activations` and `weights`: the packed
  /// weights with a packing function, else the weight arguments as given.
  llvm::Error callEntry(llvm::ArrayRef<const Buffer *> activations,
                        llvm::ArrayRef<const Buffer *> weights,
                        ResultConsumer consume);
  void release(std::vector<Buffer> &buffers);
  /// release() for packed weights, the only buffers GEMMs read as constant
  /// weights: on the CPU the host runtime's reordered copies of them go
  /// first (linfuse_cpu_release_packed_weights_in).
  void releasePacked(std::vector<Buffer> &buffers);
  /// Drops the host runtime's copies of weights in `buffers` (CPU only).
  void forgetCopies(llvm::ArrayRef<const Buffer *> buffers) const;

  /// The compiled code, shared by instantiate()'s copies.
  struct Code {
    /// The LLVM optimizer the engine runs on the module. The engine holds
    /// it as a function_ref, so it lives here, as long as the engine (a
    /// temporary lambda left the engine a dangling reference: ASan's
    /// stack-use-after-scope).
    std::function<llvm::Error(llvm::Module *)> optimizer;
    /// Constants of 64 KiB and more, taken out of the module before code
    /// generation (externalizeLargeConstants) and bound to their symbols;
    /// declared before the engine, which reads them, so they outlive it.
    std::vector<ExternalConstant> constants;
    /// Whether constants stayed in the code (below the size taken out):
    /// GEMMs may have read them as constant weights, at addresses the next
    /// code's may reuse, so every reordered copy goes with this code.
    bool embedsConstants = false;
    /// The code: compiled by the engine, or an object from the cache
    /// linked by a JIT of its own.
    std::unique_ptr<ExecutionEngine> engine;
    std::unique_ptr<llvm::orc::LLJIT> linked;
    ~Code();
  };
  std::shared_ptr<Code> code;
  /// The packed entry points (`_mlir_ciface_<name>`), looked up at compile.
  llvm::StringMap<void (*)(void **)> functions;
  Target targetKind = Target::CPU;
  std::string entryName, packName;
  llvm::SmallVector<TensorSignature> args, resultTypes;
  /// Types of the packing function's results (the entry's extra arguments).
  llvm::SmallVector<TensorSignature> packedTypes;
  /// See concatenatedWeights().
  std::vector<std::vector<unsigned>> weightGroups;
  /// Weights the entry takes (packed ones, or the weights themselves without
  /// a packing function) that it reads only as GEMM B operands, by number.
  std::vector<bool> gemmOnlyWeights;
  /// What handOverWeights() handed over.
  std::vector<std::pair<const void *, size_t>> handedOver;
  /// The bound inputs (host copies) and what the code reads: the same
  /// memory on the CPU, device copies uploaded once at bind on CUDA.
  std::vector<HostArray> inputs;
  std::vector<Buffer> inputBuffers;
  /// The packing function's results, left where it produced them.
  std::vector<Buffer> packed;
  /// The weights given to packWeights() (device copies on CUDA): packed
  /// results may be views of them.
  std::vector<Buffer> weightBuffers;
  /// `packed` came from packWeights() (not bind()).
  bool weightsPacked = false;
};

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_EXECUTABLE_H
