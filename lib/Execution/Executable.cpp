//===- Executable.cpp - compile and call a function in-process ------------===//

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/Lowering.h"
#include "linfuse/Runtime/Runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace mlir;
using namespace mlir::linfuse;

static constexpr llvm::StringLiteral kPackFunctionAttr =
    "linfuse.pack_function";

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string TensorSignature::str() const {
  std::string s;
  for (int64_t d : shape)
    s +=
        (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d)) + "x";
  return s + toString(type).str();
}

static std::optional<ElementType> toElementType(Type t) {
  if (t.isF32())
    return ElementType::F32;
  if (t.isF64())
    return ElementType::F64;
  if (t.isF16())
    return ElementType::F16;
  if (t.isBF16())
    return ElementType::BF16;
  if (t.isInteger(32))
    return ElementType::I32;
  if (t.isInteger(64))
    return ElementType::I64;
  if (t.isInteger(8))
    return ElementType::I8;
  if (t.isInteger(1))
    return ElementType::I1;
  return std::nullopt;
}

static llvm::Expected<TensorSignature> toTensorType(Type t,
                                                    const llvm::Twine &what) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  std::optional<ElementType> elt;
  if (ranked)
    elt = toElementType(ranked.getElementType());
  if (!elt) {
    std::string typeStr;
    llvm::raw_string_ostream os(typeStr);
    os << t;
    return makeError(what + " has type " + typeStr +
                     "; only ranked tensors of f32, f64, f16, bf16, i64, "
                     "i32, i8 or i1 are supported");
  }
  return TensorSignature{*elt, llvm::to_vector(ranked.getShape()), false};
}

llvm::Expected<std::unique_ptr<Executable>>
Executable::compile(ModuleOp module, llvm::StringRef entry,
                    const CompileOptions &options) {
  MLIRContext *ctx = module.getContext();
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn || fn.isExternal())
    return makeError("no function @" + entry + " with a body in the module");
  if (!fn.isPublic())
    return makeError("@" + entry +
                     " is private: only public functions can be called");

  std::unique_ptr<Executable> exe(new Executable());
  exe->entryName = entry.str();
  exe->targetKind = options.target;
  bool anyWeight = false;
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
    auto type = toTensorType(t, "argument " + llvm::Twine(i) + " of @" + entry);
    if (!type)
      return type.takeError();
    type->isWeight = static_cast<bool>(fn.getArgAttr(i, "linfuse.weight"));
    anyWeight |= type->isWeight;
    exe->args.push_back(*type);
  }
  for (auto [i, t] : llvm::enumerate(fn.getResultTypes())) {
    auto type = toTensorType(t, "result " + llvm::Twine(i) + " of @" + entry);
    if (!type)
      return type.takeError();
    exe->resultTypes.push_back(*type);
  }

  if (options.optimize) {
    if (options.progress)
      options.progress("optimize");
    if (llvm::Error err = optimizeModule(module, anyWeight))
      return std::move(err);
    fn = module.lookupSymbol<func::FuncOp>(entry);
    if (auto pack = fn->getAttrOfType<FlatSymbolRefAttr>(kPackFunctionAttr)) {
      exe->packName = pack.getValue().str();
      auto packFn = module.lookupSymbol<func::FuncOp>(pack.getValue());
      for (auto [i, t] : llvm::enumerate(packFn.getResultTypes())) {
        auto type = toTensorType(t, "packed weight " + llvm::Twine(i));
        if (!type)
          return type.takeError();
        exe->packedTypes.push_back(*type);
      }
    }
  }

  if (options.progress)
    options.progress("lower");
  if (llvm::Error err = lowerModule(module, options.target))
    return std::move(err);

  if (options.progress)
    options.progress("jit");
  static std::once_flag nativeTarget;
  std::call_once(nativeTarget, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = makeOptimizingTransformer(
      /*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine) {
    std::string msg = llvm::toString(engine.takeError());
    return makeError("JIT compilation failed: " + msg);
  }
  exe->engine = std::move(*engine);
  return exe;
}

/// Checks `array` against `type` (static sizes must agree).
static llvm::Error checkInput(const HostArray &array,
                              const TensorSignature &type, size_t index) {
  bool ok = array.type == type.type && array.shape.size() == type.shape.size();
  for (size_t d = 0; ok && d < type.shape.size(); ++d)
    ok =
        ShapedType::isDynamic(type.shape[d]) || type.shape[d] == array.shape[d];
  if (ok)
    return llvm::Error::success();
  return makeError("input " + llvm::Twine(index) + ": expected " + type.str() +
                   ", got " + describeType(array));
}

//===----------------------------------------------------------------------===//
// Memory: host, or device through the runtime's mgpu* functions
//===----------------------------------------------------------------------===//

#ifdef LINFUSE_ENABLE_CUDA
// liblinfuse_runtime's CUDA backend (the functions upstream's --gpu-to-llvm
// calls); a null stream is the runtime's stream.
extern "C" {
void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
}
#endif

static llvm::Error runtimeError(const llvm::Twine &what) {
  int32_t status = linfuse_last_error();
  if (status == LINFUSE_OK)
    return llvm::Error::success();
  std::string message = linfuse_last_error_message();
  linfuse_clear_error();
  return makeError(what + ": runtime error " + llvm::Twine(status) + ": " +
                   message);
}

/// Device memory holding a copy of `a` (CUDA), or `a`'s own memory (CPU).
static llvm::Expected<Executable::Buffer> upload(Target target,
                                                 const HostArray &a) {
  Executable::Buffer b;
  b.shape.assign(a.shape.begin(), a.shape.end());
  if (target == Target::CPU) {
    b.data = const_cast<char *>(a.data.data());
    return b;
  }
#ifdef LINFUSE_ENABLE_CUDA
  size_t bytes = std::max<size_t>(a.data.size(), 1);
  b.allocation = b.data = mgpuMemAlloc(bytes, nullptr, false);
  if (!b.data) {
    if (llvm::Error err = runtimeError("copying an input to the device"))
      return std::move(err);
    return makeError("copying an input to the device failed");
  }
  if (!a.data.empty())
    mgpuMemcpy(b.data, const_cast<char *>(a.data.data()), a.data.size(),
               nullptr);
  if (llvm::Error err = runtimeError("copying an input to the device"))
    return std::move(err);
#endif
  return b;
}

/// Frees memory the compiled code allocated (malloc on the CPU).
static void freeAllocation(Target target, void *allocation) {
  if (!allocation)
    return;
#ifdef LINFUSE_ENABLE_CUDA
  if (target == Target::CUDA) {
    mgpuMemFree(allocation, nullptr);
    return;
  }
#endif
  std::free(allocation);
}

void Executable::release(std::vector<Buffer> &buffers) {
  for (Buffer &b : buffers)
    freeAllocation(targetKind, b.allocation);
  buffers.clear();
}

Executable::~Executable() {
  release(packed);
  release(inputBuffers);
}

llvm::Error Executable::bind(std::vector<HostArray> newInputs) {
  if (newInputs.size() != args.size())
    return makeError("@" + entryName + " takes " + llvm::Twine(args.size()) +
                     " inputs, got " + llvm::Twine(newInputs.size()));
  for (auto [i, input] : llvm::enumerate(newInputs))
    if (llvm::Error err = checkInput(input, args[i], i))
      return err;
  release(packed);
  release(inputBuffers);
  inputs = std::move(newInputs);
  for (const HostArray &a : inputs) {
    auto b = upload(targetKind, a);
    if (!b)
      return b.takeError();
    inputBuffers.push_back(std::move(*b));
  }
  if (packName.empty())
    return llvm::Error::success();
  SmallVector<const Buffer *> weights;
  for (auto [i, type] : llvm::enumerate(args))
    if (type.isWeight)
      weights.push_back(&inputBuffers[i]);
  return call(packName, weights, packedTypes, nullptr, &packed);
}

llvm::Error Executable::run(std::vector<HostArray> *outputs) {
  if (inputBuffers.size() != args.size())
    return makeError("no inputs bound");
  SmallVector<const Buffer *> in;
  for (auto [i, type] : llvm::enumerate(args))
    if (packName.empty() || !type.isWeight)
      in.push_back(&inputBuffers[i]);
  for (const Buffer &p : packed)
    in.push_back(&p);
  return call(entryName, in, resultTypes, outputs, nullptr);
}

namespace {
/// MLIR ranked memref descriptors, as words: allocated, aligned, offset,
/// sizes[rank], strides[rank].
struct Descriptor {
  SmallVector<int64_t, 8> words;

  static Descriptor forBuffer(const Executable::Buffer &a) {
    Descriptor d;
    // A zero-sized array may have no storage; the code never reads it.
    static char empty[64];
    void *ptr = a.data ? a.data : static_cast<void *>(empty);
    d.words.push_back(reinterpret_cast<int64_t>(ptr));
    d.words.push_back(reinterpret_cast<int64_t>(ptr));
    d.words.push_back(0);
    llvm::append_range(d.words, a.shape);
    SmallVector<int64_t> strides(a.shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(a.shape.size()) - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * a.shape[i + 1];
    llvm::append_range(d.words, strides);
    return d;
  }
};
} // namespace

/// Copies the (possibly strided) memref described at `words` into a packed
/// row-major array.
static HostArray readResult(const int64_t *words, const TensorSignature &type,
                            Target target) {
  size_t rank = type.shape.size();
  HostArray out;
  out.type = type.type;
  out.shape.assign(words + 3, words + 3 + rank);
  const int64_t *strides = words + 3 + rank;
  int64_t elt = byteSize(type.type);
  out.data.resize(out.numElements() * elt);
  if (out.data.empty())
    return out;
  const char *base = reinterpret_cast<const char *>(words[1]) + words[2] * elt;
  std::vector<char> staging;
#ifdef LINFUSE_ENABLE_CUDA
  if (target == Target::CUDA) {
    // Bring the elements' span to the host, then read it as below.
    int64_t span = 1;
    for (size_t d = 0; d < rank; ++d)
      span += (out.shape[d] - 1) * strides[d];
    staging.resize(span * elt);
    mgpuMemcpy(staging.data(), const_cast<char *>(base), staging.size(),
               nullptr);
    base = staging.data();
  }
#endif
  SmallVector<int64_t> index(rank, 0);
  for (int64_t flat = 0, n = out.numElements(); flat < n; ++flat) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d)
      offset += index[d] * strides[d];
    std::memcpy(out.data.data() + flat * elt, base + offset * elt, elt);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out.shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

llvm::Error Executable::call(llvm::StringRef name,
                             llvm::ArrayRef<const Buffer *> in,
                             llvm::ArrayRef<TensorSignature> outTypes,
                             std::vector<HostArray> *out,
                             std::vector<Buffer> *keep) {
  // _mlir_ciface_<name>(results*, descriptor*...): results come back as a
  // struct of descriptors (one descriptor when there is one result).
  size_t resultWords = 0;
  for (const TensorSignature &t : outTypes)
    resultWords += 3 + 2 * t.shape.size();
  SmallVector<int64_t> results(resultWords, 0);
  SmallVector<Descriptor> descriptors;
  for (const Buffer *a : in)
    descriptors.push_back(Descriptor::forBuffer(*a));
  SmallVector<void *> pointers;
  if (!outTypes.empty())
    pointers.push_back(results.data());
  for (Descriptor &d : descriptors)
    pointers.push_back(d.words.data());
  SmallVector<void *> packedArgs;
  for (void *&p : pointers)
    packedArgs.push_back(&p);

  linfuse_clear_error();
  if (llvm::Error err =
          engine->invokePacked(("_mlir_ciface_" + name).str(), packedArgs))
    return err;

  // Keep the results where they are (`keep`), or copy them out and free
  // their buffers once each; a result that is (a view of) an input is not
  // ours to free.
  // Results may share a buffer (a value returned twice): read them all
  // before freeing any.
  llvm::SmallPtrSet<void *, 8> freed;
  for (const Buffer *a : in)
    freed.insert(a->data);
  SmallVector<void *> toFree;
  const int64_t *words = results.data();
  for (const TensorSignature &t : outTypes) {
    size_t rank = t.shape.size();
    void *allocated = reinterpret_cast<void *>(words[0]);
    bool ours = allocated && freed.insert(allocated).second;
    if (keep) {
      Buffer b;
      b.data = reinterpret_cast<char *>(words[1]) + words[2] * byteSize(t.type);
      b.allocation = ours ? allocated : nullptr;
      b.shape.assign(words + 3, words + 3 + rank);
      keep->push_back(std::move(b));
    } else {
      if (out)
        out->push_back(readResult(words, t, targetKind));
      if (ours)
        toFree.push_back(allocated);
    }
    words += 3 + 2 * rank;
  }
  for (void *allocation : toFree)
    freeAllocation(targetKind, allocation);
  if (llvm::Error err = runtimeError("@" + name))
    return err;
  return llvm::Error::success();
}
