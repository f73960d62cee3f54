//===- Executable.cpp - compile and call a function in-process ------------===//

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/Lowering.h"
#include "linfuse/Execution/ObjectCache.h"
#include "linfuse/Runtime/Runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"

#include <dlfcn.h>

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

/// The JIT resolves the compiled code's calls (linfuse_*_gemm_*, mgpu*)
/// among the process's global symbols. A tool links liblinfuse_runtime
/// globally; a Python extension module is loaded with RTLD_LOCAL, and so are
/// its dependencies: load the runtime again, globally, from where it is.
static void makeRuntimeVisibleToJit() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&linfuse_clear_error), &info) &&
      info.dli_fname)
    llvm::sys::DynamicLibrary::LoadLibraryPermanently(info.dli_fname);
}

/// Constants at least this large are bound as data instead of compiled in
/// (smaller ones: scalars, norm vectors, cost nothing to emit and let LLVM
/// see their values).
static constexpr size_t kMinExternalBytes = 64 * 1024;

/// Whether `module` holds a constant of `minBytes` or more (weights
/// embedded as `arith.constant`, dense or `dense_resource`). Such code binds
/// its constants by address and is never stored whole in the cache, and
/// printing it for a key would cost what its bytes do.
static bool holdsLargeConstants(ModuleOp module, size_t minBytes) {
  return module
      .walk([&](Operation *op) {
        for (NamedAttribute attr : op->getAttrs()) {
          auto elements = dyn_cast<ElementsAttr>(attr.getValue());
          if (!elements)
            continue;
          auto type = dyn_cast<ShapedType>(elements.getType());
          if (!type || !type.hasStaticShape() ||
              !type.getElementType().isIntOrFloat())
            continue;
          uint64_t elementBytes =
              std::max<uint64_t>(1, type.getElementTypeBitWidth() / 8);
          if (uint64_t(type.getNumElements()) * elementBytes >= minBytes)
            return WalkResult::interrupt();
        }
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The results of the packing function `pack` that are a row-wise (dim 0)
/// concatenation of its arguments, as lists of argument numbers (the
/// packing function takes the weights, in order).
static std::vector<std::vector<unsigned>> rowConcatenations(func::FuncOp pack) {
  std::vector<std::vector<unsigned>> groups;
  auto ret = dyn_cast<func::ReturnOp>(pack.getBody().front().getTerminator());
  if (!ret)
    return groups;
  for (Value v : ret.getOperands()) {
    auto concat = v.getDefiningOp<tensor::ConcatOp>();
    if (!concat || concat.getDim() != 0)
      continue;
    std::vector<unsigned> group;
    for (Value in : concat.getInputs()) {
      auto arg = dyn_cast<BlockArgument>(in);
      if (!arg || arg.getOwner() != &pack.getBody().front())
        break;
      group.push_back(arg.getArgNumber());
    }
    if (group.size() == concat.getInputs().size() && group.size() > 1)
      groups.push_back(std::move(group));
  }
  return groups;
}

/// LLVM's optimization level for the JIT (part of the object cache's key,
/// kObjectSalt).
static constexpr unsigned kOptLevel = 3;
static constexpr llvm::StringLiteral kObjectSalt = "object, LLVM O3";

/// Looks up the packed entry points (`_mlir_ciface_<name>`) of the entry
/// and the packing function in `exe`'s code: its engine, or the JIT that
/// linked its object from the cache (the engine's packed name, `_mlir_`
/// prefixed).
llvm::Error Executable::lookUpFunctions(Executable &exe) {
  for (const std::string &name : {exe.entryName, exe.packName}) {
    if (name.empty())
      continue;
    std::string ciface = "_mlir_ciface_" + name;
    llvm::Expected<void (*)(void **)> symbol = nullptr;
    if (exe.code->linked) {
      auto address = exe.code->linked->lookup("_mlir_" + ciface);
      if (address)
        symbol = address->toPtr<void (*)(void **)>();
      else
        symbol = address.takeError();
    } else {
      symbol = exe.code->engine->lookupPacked(ciface);
    }
    if (!symbol)
      return makeError("JIT compilation of @" + name +
                       " failed: " + llvm::toString(symbol.takeError()));
    exe.functions[name] = *symbol;
  }
  return llvm::Error::success();
}

/// Stores the object `engine` compiled (it keeps a copy: enableObjectDump)
/// under `key`; best effort, as every cache write.
static bool storeObject(const ObjectCache &cache, llvm::StringRef key,
                        ExecutionEngine &engine) {
  std::string file = cache.temporaryFile();
  if (file.empty())
    return false;
  engine.dumpToObjectFile(file);
  bool stored = false;
  if (auto object =
          llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
      object && (*object)->getBufferSize() > 0)
    stored = cache.store(key, (*object)->getBuffer());
  llvm::sys::fs::remove(file);
  return stored;
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

  static std::once_flag nativeTarget;
  std::call_once(nativeTarget, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    makeRuntimeVisibleToJit();
  });
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  // The optimizer needs the host's target machine: without it LLVM's cost
  // model knows no vector registers and the element-wise loops (norms,
  // activations, casts) stay scalar. The engine runs the transformer when
  // code is first looked up, after create() returns, so the lambda owns it.
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder)
    return makeError("no JIT target for this host: " +
                     llvm::toString(machineBuilder.takeError()));
  machineBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto machine = machineBuilder->createTargetMachine();
  if (!machine)
    return makeError("no JIT target machine for this host: " +
                     llvm::toString(machine.takeError()));
  std::shared_ptr<llvm::TargetMachine> host = std::move(*machine);
  // A function compiled before from the same module, entry and options for
  // this host: its object linked, what the passes found restored.
  ObjectCache cache(options.target == Target::CPU ? options.objectCache : "");
  size_t remarksBefore = options.report ? options.report->remarks.size() : 0;
  size_t statisticsBefore =
      options.report ? options.report->statistics.size() : 0;
  std::string functionKey;
  if (cache.enabled() && !holdsLargeConstants(module, kMinExternalBytes)) {
    functionKey = cacheKey(module, entry, options, *host);
    if (exe->restore(cache, functionKey, *host, options))
      return exe;
  }

  // Only the entry is compiled: the other public functions become private,
  // so the optimizer inlines what the entry calls and drops the rest (and
  // reports only what happened to the entry).
  for (auto other : module.getOps<func::FuncOp>())
    if (other != fn && other.isPublic() && !other.isExternal())
      other.setPrivate();

  if (options.optimize) {
    if (options.progress)
      options.progress("optimize");
    if (llvm::Error err = optimizeModule(
            module, anyWeight, options.lower.runtimeChecks, options.report))
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
      exe->weightGroups = rowConcatenations(packFn);
    }
  }

  if (options.progress)
    options.progress("lower");
  // The executable drops the runtime's copies of the packed weights it gets
  // and frees itself (pack(), releasePacked()), so that packing one
  // function keeps the others' reordered weights.
  LowerOptions lower = options.lower;
  lower.releaseOnPack = false;
  if (llvm::Error err =
          lowerModule(module, options.target, options.report, lower))
    return std::move(err);

  // Which weights the entry takes (packed ones, or the weights themselves
  // without a packing function) it reads only as GEMM B operands (the CPU
  // lowering's analysis, an attribute of the entry whatever it became).
  exe->gemmOnlyWeights.assign(exe->packName.empty()
                                  ? exe->args.size() - exe->numActivations()
                                  : exe->packedTypes.size(),
                              false);
  if (Operation *lowered = module.lookupSymbol(entry))
    if (auto numbers = lowered->getAttrOfType<DenseI64ArrayAttr>(
            "linfuse.gemm_only_weights"))
      for (int64_t n : numbers.asArrayRef())
        if (n >= 0 && size_t(n) < exe->gemmOnlyWeights.size())
          exe->gemmOnlyWeights[n] = true;

  ExecutionEngineOptions engineOptions;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  exe->code = std::make_shared<Code>();
  Code &code = *exe->code;
  code.optimizer = [host, optimize = makeOptimizingTransformer(kOptLevel,
                                                               /*sizeLevel=*/0,
                                                               host.get())](
                       llvm::Module *m) { return optimize(m); };
  engineOptions.transformer = code.optimizer;
  internalizeImplementation(module);
  routeAssertionsToRuntime(module);
  // Large constants (embedded weights) stay data: bound by address below,
  // never emitted by LLVM.
  code.constants = externalizeLargeConstants(module, kMinExternalBytes);
  // (Tensors; an assertion's message is a string.)
  code.embedsConstants =
      llvm::any_of(module.getOps<LLVM::GlobalOp>(), [](LLVM::GlobalOp g) {
        return g.getConstant() &&
               isa_and_nonnull<ElementsAttr>(g.getValueOrNull());
      });
  if (options.report && !code.constants.empty()) {
    uint64_t bytes = 0;
    for (const ExternalConstant &c : code.constants)
      bytes += c.bytes;
    options.report->statistics.push_back(
        {"linfuse-jit", "constants-bound-as-data", code.constants.size()});
    options.report->statistics.push_back(
        {"linfuse-jit", "bytes-bound-as-data", bytes});
  }
  makeNamesDeterministic(module);
  // An object compiled before for this module and host: linked, not
  // compiled again (a damaged or unlinkable one is compiled over).
  std::string key;
  if (cache.enabled()) {
    key = ObjectCache::key(module, *host, kObjectSalt);
    if (exe->linkStoredObject(cache, key, *host)) {
      exe->remember(cache, functionKey, key, options.report, remarksBefore,
                    statisticsBefore);
      if (options.progress)
        options.progress("load");
      if (options.report)
        options.report->statistics.push_back(
            {"linfuse-jit", "objects-from-cache", 1});
      return exe;
    }
  }
  if (options.progress)
    options.progress("jit");
  engineOptions.enableObjectDump = cache.enabled();
  // The engine's code generator gets a target machine like the
  // optimizer's (without one it makes its own at the default level,
  // whatever jitCodeGenOptLevel says): what the object cache's key records.
  auto codegenMachine = machineBuilder->createTargetMachine();
  if (!codegenMachine)
    return makeError("no JIT target machine for this host: " +
                     llvm::toString(codegenMachine.takeError()));
  auto engine = ExecutionEngine::create(module, engineOptions,
                                        std::move(*codegenMachine));
  if (!engine) {
    std::string msg = llvm::toString(engine.takeError());
    return makeError("JIT compilation failed: " + msg);
  }
  code.engine = std::move(*engine);
  if (!code.constants.empty())
    code.engine->registerSymbols(
        [&constants = code.constants](llvm::orc::MangleAndInterner interner) {
          llvm::orc::SymbolMap symbols;
          for (const ExternalConstant &c : constants)
            symbols[interner(c.symbol)] = {
                llvm::orc::ExecutorAddr::fromPtr(c.data.get()),
                llvm::JITSymbolFlags::Exported};
          return symbols;
        });
  // The JIT generates machine code on the first lookup: do it here, so that
  // compile() includes code generation (for weights embedded as constants,
  // most of the time) and the first call is as fast as the next ones.
  if (llvm::Error err = lookUpFunctions(*exe))
    return std::move(err);
  if (cache.enabled() && storeObject(cache, key, *code.engine))
    exe->remember(cache, functionKey, key, options.report, remarksBefore,
                  statisticsBefore);
  return exe;
}

Executable::Code::~Code() {
  // The runtime's reordered copies of the constant weights (see
  // LINFUSE_GEMM_CONSTANT_B): the next code's may reuse the addresses.
  // (Harmless on CUDA builds' CPU-less code: no copies start there.)
  for (const ExternalConstant &c : constants)
    linfuse_cpu_release_packed_weights_in(c.data.get(), int64_t(c.bytes));
  if (embedsConstants)
    linfuse_cpu_release_packed_weights();
}

llvm::Expected<std::unique_ptr<Executable>> Executable::instantiate() const {
  if (targetKind != Target::CPU)
    return makeError("only code compiled for the CPU can be instantiated "
                     "again; compile the function once per set of weights");
  std::unique_ptr<Executable> copy(new Executable());
  copy->code = code;
  copy->functions = functions;
  copy->targetKind = targetKind;
  copy->entryName = entryName;
  copy->packName = packName;
  copy->args = args;
  copy->resultTypes = resultTypes;
  copy->packedTypes = packedTypes;
  copy->weightGroups = weightGroups;
  copy->gemmOnlyWeights = gemmOnlyWeights;
  return copy;
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

/// Device memory holding a copy of `bytes` bytes at `data` (CUDA), or that
/// memory itself (CPU, or device memory on CUDA).
static llvm::Expected<Executable::Buffer>
upload(Target target, const void *data, bool onDevice, size_t bytes,
       llvm::ArrayRef<int64_t> shape) {
  Executable::Buffer b;
  b.shape.assign(shape.begin(), shape.end());
  b.spanBytes = bytes;
  if (target == Target::CPU || onDevice) {
    b.data = const_cast<void *>(data);
    return b;
  }
#ifdef LINFUSE_ENABLE_CUDA
  b.allocation = b.data = mgpuMemAlloc(std::max<size_t>(bytes, 1), nullptr,
                                       /*isHostShared=*/false);
  if (!b.data) {
    if (llvm::Error err = runtimeError("copying an input to the device"))
      return std::move(err);
    return makeError("copying an input to the device failed");
  }
  if (bytes)
    mgpuMemcpy(b.data, const_cast<void *>(data), bytes, nullptr);
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

static SmallVector<const Executable::Buffer *>
pointers(llvm::ArrayRef<Executable::Buffer> buffers) {
  return llvm::map_to_vector(buffers,
                             [](const Executable::Buffer &b) { return &b; });
}

void Executable::release(std::vector<Buffer> &buffers) {
  for (Buffer &b : buffers)
    freeAllocation(targetKind, b.allocation);
  buffers.clear();
}

void Executable::forgetCopies(llvm::ArrayRef<const Buffer *> buffers) const {
  if (targetKind != Target::CPU)
    return;
  for (const Buffer *b : buffers)
    linfuse_cpu_release_packed_weights_in(b->data, int64_t(b->spanBytes));
}

void Executable::releasePacked(std::vector<Buffer> &buffers) {
  forgetCopies(pointers(buffers));
  release(buffers);
}

std::vector<std::pair<const void *, size_t>> Executable::handOverWeights(
    llvm::ArrayRef<std::pair<const void *, size_t>> within) {
  if (targetKind != Target::CPU || !weightsPacked)
    return handedOver;
  auto overlaps = [](const Buffer &x, const Buffer &y) {
    auto *a = static_cast<const char *>(x.data);
    auto *b = static_cast<const char *>(y.data);
    return a < b + y.spanBytes && b < a + x.spanBytes;
  };
  auto inside = [&](const Buffer &p) {
    auto *d = static_cast<const char *>(p.data);
    return llvm::any_of(within, [&](const auto &r) {
      auto *begin = static_cast<const char *>(r.first);
      return begin <= d && d + p.spanBytes <= begin + r.second;
    });
  };
  // The weights the entry takes: packed, or the weights as given.
  const std::vector<Buffer> &taken = packName.empty() ? weightBuffers : packed;
  for (size_t i = 0; i < taken.size() && i < gemmOnlyWeights.size(); ++i) {
    const Buffer &p = taken[i];
    if (!gemmOnlyWeights[i] || p.allocation || p.spanBytes == 0 || !inside(p) ||
        llvm::any_of(handedOver,
                     [&](const auto &h) { return h.first == p.data; }))
      continue;
    // Another packed weight over the same bytes is read some other way, or
    // in another part or orientation whose copy would be made from values
    // already dropped.
    bool shared = false;
    for (size_t j = 0; j < taken.size() && !shared; ++j)
      shared = j != i && overlaps(p, taken[j]);
    if (shared || linfuse_cpu_hand_over_weights(p.data, int64_t(p.spanBytes)) !=
                      LINFUSE_OK)
      continue;
    handedOver.push_back({p.data, p.spanBytes});
  }
  return handedOver;
}

Executable::~Executable() {
  for (auto [data, bytes] : handedOver)
    linfuse_cpu_forget_weights(data, int64_t(bytes));
  releasePacked(packed);
  release(weightBuffers);
  release(inputBuffers);
}

size_t Executable::numActivations() const {
  return llvm::count_if(args,
                        [](const TensorSignature &t) { return !t.isWeight; });
}

/// Which arguments a call passes.
enum class Arguments { All, Weights, Activations };

/// The signatures and argument numbers of the arguments `which` selects.
static void selectArguments(llvm::ArrayRef<TensorSignature> args,
                            Arguments which,
                            SmallVectorImpl<const TensorSignature *> &types,
                            SmallVectorImpl<size_t> &indices) {
  for (auto [i, type] : llvm::enumerate(args))
    if (which == Arguments::All ||
        type.isWeight == (which == Arguments::Weights)) {
      types.push_back(&type);
      indices.push_back(i);
    }
}

/// Checks `inputs` against the arguments `which` selects and uploads them
/// (see upload()).
static llvm::Error uploadAll(Target target,
                             llvm::ArrayRef<TensorSignature> args,
                             Arguments which, llvm::ArrayRef<ArrayView> inputs,
                             std::vector<Executable::Buffer> &out) {
  SmallVector<const TensorSignature *> types;
  SmallVector<size_t> indices;
  selectArguments(args, which, types, indices);
  for (auto [i, input] : llvm::enumerate(inputs)) {
    const TensorSignature &type = *types[i];
    bool ok =
        input.type == type.type && input.shape.size() == type.shape.size();
    for (size_t d = 0; ok && d < type.shape.size(); ++d)
      ok = ShapedType::isDynamic(type.shape[d]) ||
           type.shape[d] == input.shape[d];
    if (!ok)
      return makeError("input " + llvm::Twine(indices[i]) + ": expected " +
                       type.str() + ", got " +
                       describeType(HostArray{input.type, input.shape, {}}));
    std::optional<int64_t> bytes = arrayByteSize(input.type, input.shape);
    if (!bytes)
      return makeError("input " + llvm::Twine(indices[i]) +
                       ": shape too large");
    if (input.device && target != Target::CUDA)
      return makeError("input " + llvm::Twine(indices[i]) +
                       ": device memory, but the function was compiled for "
                       "the CPU");
    auto b = upload(target, input.data, input.device, *bytes, input.shape);
    if (!b)
      return b.takeError();
    out.push_back(std::move(*b));
  }
  return llvm::Error::success();
}

llvm::Error Executable::bind(std::vector<HostArray> newInputs) {
  if (newInputs.size() != args.size())
    return makeError("@" + entryName + " takes " + llvm::Twine(args.size()) +
                     " inputs, got " + llvm::Twine(newInputs.size()));
  releasePacked(packed);
  release(weightBuffers);
  release(inputBuffers);
  weightsPacked = false;
  inputs = std::move(newInputs);
  SmallVector<ArrayView> views =
      llvm::map_to_vector(inputs, [](const HostArray &a) {
        return ArrayView{a.type, a.shape, a.data.data()};
      });
  if (llvm::Error err =
          uploadAll(targetKind, args, Arguments::All, views, inputBuffers))
    return err;
  if (packName.empty())
    return llvm::Error::success();
  SmallVector<const Buffer *> weights;
  for (auto [i, type] : llvm::enumerate(args))
    if (type.isWeight)
      weights.push_back(&inputBuffers[i]);
  return pack(weights, packed);
}

llvm::Error Executable::pack(llvm::ArrayRef<const Buffer *> weights,
                             std::vector<Buffer> &out) {
  // GEMMs read constant weights only from packed results (and the code's
  // constants): copies made from whatever was at their addresses before
  // (memory freed since may be reused, a weight passed through may have
  // changed in place) are stale. Dropped, and only those: the packing
  // function does not drop every copy in the process, as a library's does
  // (see LowerOptions).
  llvm::scope_exit forgetPacked([&] { forgetCopies(pointers(out)); });
  return call(
      packName, weights, packedTypes, [&](MutableArrayRef<RawResult> results) {
        for (RawResult &r : results) {
          size_t rank = r.type->shape.size();
          Buffer b;
          b.data = reinterpret_cast<char *>(r.words[1]) +
                   r.words[2] * byteSize(r.type->type);
          b.allocation =
              r.ours ? reinterpret_cast<void *>(r.words[0]) : nullptr;
          r.taken = r.ours;
          b.shape.assign(r.words + 3, r.words + 3 + rank);
          int64_t last = 0;
          bool empty = false;
          for (size_t d = 0; d < rank; ++d) {
            empty |= r.words[3 + d] <= 0;
            last += (r.words[3 + d] - 1) * r.words[3 + rank + d];
          }
          b.spanBytes = empty ? 0 : size_t(last + 1) * byteSize(r.type->type);
          out.push_back(std::move(b));
        }
      });
}

llvm::Error Executable::callEntry(llvm::ArrayRef<const Buffer *> activations,
                                  llvm::ArrayRef<const Buffer *> weights,
                                  ResultConsumer consume) {
  // With a packing function the entry takes the activations, then the
  // packed weights; without one, every argument in its place.
  SmallVector<const Buffer *> in;
  if (!packName.empty()) {
    llvm::append_range(in, activations);
    llvm::append_range(in, weights);
  } else {
    size_t a = 0, w = 0;
    for (const TensorSignature &type : args)
      in.push_back(type.isWeight ? weights[w++] : activations[a++]);
  }
  return call(entryName, in, resultTypes, consume);
}

/// Splits `buffers` (one per argument) into activations and weights.
static void splitArguments(llvm::ArrayRef<TensorSignature> args,
                           llvm::ArrayRef<Executable::Buffer> buffers,
                           SmallVectorImpl<const Executable::Buffer *> &acts,
                           SmallVectorImpl<const Executable::Buffer *> &ws) {
  for (auto [type, buffer] : llvm::zip_equal(args, buffers))
    (type.isWeight ? ws : acts).push_back(&buffer);
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

/// The [first, last] element addresses `a` touches.
static std::pair<const char *, const char *> byteSpan(const ResultArray &a,
                                                      int64_t elementSize) {
  const char *first = static_cast<const char *>(a.data), *last = first;
  for (auto [size, stride] : llvm::zip_equal(a.shape, a.strides)) {
    if (size == 0)
      return {first, first - 1}; // Empty: touches nothing.
    (stride < 0 ? first : last) += (size - 1) * stride * elementSize;
  }
  return {first, last + elementSize - 1};
}

/// Whether two results share no element: their spans are apart, or they
/// are column blocks of the same rows (slices of one merged GEMM result:
/// equal row strides, unit column stride, disjoint column ranges).
static bool disjoint(const ResultArray &a, const ResultArray &b,
                     int64_t elementSize) {
  auto [aFirst, aLast] = byteSpan(a, elementSize);
  auto [bFirst, bLast] = byteSpan(b, elementSize);
  if (aLast < aFirst || bLast < bFirst || aLast < bFirst || bLast < aFirst)
    return true;
  size_t rank = a.shape.size();
  if (rank < 2 || b.shape.size() != rank || a.strides != b.strides ||
      a.strides[rank - 1] != 1)
    return false;
  // Every outer stride a whole number of rows: then an element's column
  // within a row is fixed by its column index alone.
  for (size_t d = 0; d + 1 < rank; ++d)
    if (a.strides[d] <= 0 || a.strides[d] % a.strides[rank - 2] != 0)
      return false;
  int64_t row = a.strides[rank - 2] * elementSize;
  int64_t aWidth = a.shape[rank - 1] * elementSize,
          bWidth = b.shape[rank - 1] * elementSize;
  // Column offsets of the two within a row; the blocks must not wrap.
  int64_t distance =
      static_cast<const char *>(b.data) - static_cast<const char *>(a.data);
  int64_t bColumn = ((distance % row) + row) % row;
  return aWidth <= bColumn && bColumn + bWidth <= row;
}

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
                             ResultConsumer consume) {
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

  void (*function)(void **) = functions.lookup(name);
  if (!function)
    return makeError("@" + name + " was not compiled");
  // linfuse_call clears this thread's error first. A failed run-time check
  // ends the call with an error instead of the process: its results were
  // never written.
  if (linfuse_call(function, packedArgs.data()) == LINFUSE_ERROR_CHECK_FAILED) {
    std::string message = linfuse_last_error_message();
    linfuse_clear_error();
    return makeError("@" + name + ": " + message);
  }

  // A result that is (a view of) an input is not ours to free, and results
  // may share a buffer (a value returned twice, slices of one merged GEMM):
  // the first of them owns it, and the consumer sees them all before any is
  // freed.
  llvm::SmallPtrSet<void *, 8> claimed;
  for (const Buffer *a : in)
    claimed.insert(a->data);
  SmallVector<RawResult> raw;
  const int64_t *words = results.data();
  for (const TensorSignature &t : outTypes) {
    void *allocated = reinterpret_cast<void *>(words[0]);
    raw.push_back({words, &t, allocated && claimed.insert(allocated).second});
    words += 3 + 2 * t.shape.size();
  }
  // A failed call's results are not read. On the host they are still
  // buffers the call allocated; on the GPU they may not be (a CUDA graph
  // that failed to capture never allocated them), so they are left alone.
  int32_t status = linfuse_last_error();
  if (status == LINFUSE_OK)
    consume(raw);
  if (status == LINFUSE_OK || targetKind == Target::CPU)
    for (const RawResult &r : raw)
      if (r.ours && !r.taken)
        freeAllocation(targetKind, reinterpret_cast<void *>(r.words[0]));
  if (llvm::Error err = runtimeError("@" + name))
    return err;
  return llvm::Error::success();
}

llvm::Error Executable::run(std::vector<HostArray> *outputs) {
  if (inputBuffers.size() != args.size())
    return makeError("no inputs bound");
  SmallVector<const Buffer *> activations, weights;
  splitArguments(args, inputBuffers, activations, weights);
  if (!packName.empty())
    weights = pointers(packed);
  return callEntry(
      activations, weights, [&](MutableArrayRef<RawResult> results) {
        if (outputs)
          for (const RawResult &r : results)
            outputs->push_back(readResult(r.words, *r.type, targetKind));
      });
}

llvm::Error Executable::packWeights(llvm::ArrayRef<ArrayView> weights) {
  size_t numWeights = args.size() - numActivations();
  if (weights.size() != numWeights)
    return makeError("@" + entryName + " takes " + llvm::Twine(numWeights) +
                     " weights, got " + llvm::Twine(weights.size()));
  // Into locals first: a failure leaves the previous packing in place.
  std::vector<Buffer> newWeights, newPacked;
  llvm::Error err =
      uploadAll(targetKind, args, Arguments::Weights, weights, newWeights);
  if (!err && !packName.empty())
    err = pack(pointers(newWeights), newPacked);
  if (err) {
    releasePacked(newPacked);
    release(newWeights);
    return err;
  }
  // The values handed over before are the caller's to replace now.
  for (auto [data, bytes] : handedOver)
    linfuse_cpu_forget_weights(data, int64_t(bytes));
  handedOver.clear();
  releasePacked(packed);
  release(weightBuffers);
  packed = std::move(newPacked);
  weightBuffers = std::move(newWeights);
  weightsPacked = true;
  return llvm::Error::success();
}

#ifdef LINFUSE_ENABLE_CUDA
/// A device copy of the (possibly strided) device memref at `words`, with
/// the same strides; freed after the work on `stream` (see
/// linfuse_cuda_free_after). Enqueued on the runtime's stream: synchronize
/// before handing it out.
static llvm::Expected<ResultArray>
copyOnDevice(const int64_t *words, const TensorSignature &type, void *stream) {
  size_t rank = type.shape.size();
  int64_t elt = byteSize(type.type);
  ResultArray a;
  a.type = type.type;
  a.device = true;
  a.shape.assign(words + 3, words + 3 + rank);
  a.strides.assign(words + 3 + rank, words + 3 + 2 * rank);
  a.data = reinterpret_cast<char *>(words[1]) + words[2] * elt;
  auto [first, last] = byteSpan(a, elt);
  int64_t bytes = last >= first ? last - first + 1 : 0;
  char *copy = static_cast<char *>(mgpuMemAlloc(
      std::max<int64_t>(bytes, 1), nullptr, /*isHostShared=*/false));
  if (!copy) {
    if (llvm::Error err = runtimeError("copying a result on the device"))
      return std::move(err);
    return makeError("copying a result on the device failed");
  }
  if (bytes)
    mgpuMemcpy(copy, const_cast<char *>(first), bytes, nullptr);
  a.data = copy + (static_cast<const char *>(a.data) - first);
  a.owner = std::shared_ptr<void>(
      copy, [stream](void *p) { linfuse_cuda_free_after(p, stream); });
  if (llvm::Error err = runtimeError("copying a result on the device"))
    return std::move(err);
  return a;
}
#endif

llvm::Expected<std::vector<ResultArray>>
Executable::invoke(llvm::ArrayRef<ArrayView> in, const InvokeOptions &options) {
  // Device results in place (CUDA), like the CPU's host results.
  bool inPlace = targetKind == Target::CPU ||
                 (options.deviceResults && targetKind == Target::CUDA);
#ifdef LINFUSE_ENABLE_CUDA
  if (targetKind == Target::CUDA && options.stream) {
    linfuse_cuda_wait_for_stream(options.stream);
    if (llvm::Error err = runtimeError("waiting for the caller's stream"))
      return std::move(err);
  }
#endif
  size_t numActs = numActivations();
  bool allArguments = in.size() == args.size();
  if (!allArguments && !(weightsPacked && in.size() == numActs)) {
    if (weightsPacked)
      return makeError("@" + entryName + " takes " + llvm::Twine(numActs) +
                       " inputs besides its packed weights, got " +
                       llvm::Twine(in.size()));
    return makeError("@" + entryName + " takes " + llvm::Twine(args.size()) +
                     " inputs, got " + llvm::Twine(in.size()));
  }
  // Buffers made for this call only (device copies; a one-off packing).
  std::vector<Buffer> uploaded, oneOffPacked;
  llvm::scope_exit cleanup([&] {
    releasePacked(oneOffPacked);
    release(uploaded);
  });
  if (llvm::Error err = uploadAll(
          targetKind, args,
          allArguments ? Arguments::All : Arguments::Activations, in, uploaded))
    return std::move(err);
  SmallVector<const Buffer *> activations, weights;
  if (allArguments) {
    splitArguments(args, uploaded, activations, weights);
    if (!packName.empty()) {
      if (llvm::Error err = pack(weights, oneOffPacked))
        return std::move(err);
      weights = pointers(oneOffPacked);
    }
  } else {
    activations = pointers(uploaded);
    weights = pointers(packName.empty() ? weightBuffers : packed);
  }

  std::vector<ResultArray> out;
  // The results handed out in place so far, by allocation.
  llvm::DenseMap<void *, SmallVector<size_t, 4>> handedOut;
  llvm::Error copyErr = llvm::Error::success();
#ifdef LINFUSE_ENABLE_CUDA
  bool copiedOnDevice = false;
#endif
  llvm::Error err =
      callEntry(activations, weights, [&](MutableArrayRef<RawResult> results) {
        for (RawResult &r : results) {
          ResultArray a;
          a.type = r.type->type;
          size_t rank = r.type->shape.size();
          a.shape.assign(r.words + 3, r.words + 3 + rank);
          a.strides.assign(r.words + 3 + rank, r.words + 3 + 2 * rank);
          a.data = reinterpret_cast<char *>(r.words[1]) +
                   r.words[2] * byteSize(a.type);
          // Each buffer the code allocated is handed out in place: results
          // in one buffer (the q, k and v views of a merged GEMM) share its
          // owner. A result that overlaps another one (a value returned
          // twice) gets a copy, so that writing into one result never
          // changes another.
          void *allocation = reinterpret_cast<void *>(r.words[0]);
          auto earlier = handedOut.find(allocation);
          bool sharesOwner = inPlace && !r.ours && earlier != handedOut.end() &&
                             llvm::all_of(earlier->second, [&](size_t j) {
                               return disjoint(a, out[j], byteSize(a.type));
                             });
          a.device = targetKind == Target::CUDA && inPlace;
          if (inPlace && (r.ours || sharesOwner)) {
            if (!r.ours) {
              a.owner = out[earlier->second.front()].owner;
            } else if (targetKind == Target::CPU) {
              a.owner = std::shared_ptr<void>(allocation, std::free);
              r.taken = true;
            } else {
#ifdef LINFUSE_ENABLE_CUDA
              void *stream = options.stream;
              a.owner = std::shared_ptr<void>(allocation, [stream](void *p) {
                linfuse_cuda_free_after(p, stream);
              });
              r.taken = true;
#endif
            }
            handedOut[allocation].push_back(out.size());
          } else if (a.device) {
#ifdef LINFUSE_ENABLE_CUDA
            // Memory the caller owns (an input returned) or a buffer another
            // result has: a device copy.
            auto copy = copyOnDevice(r.words, *r.type, options.stream);
            if (!copy) {
              if (!copyErr)
                copyErr = copy.takeError();
              else
                llvm::consumeError(copy.takeError());
              continue;
            }
            a = std::move(*copy);
            copiedOnDevice = true;
#endif
          } else {
            // Device memory, memory the caller owns, or a buffer another
            // result has: a copy.
            auto copy = std::make_shared<HostArray>(
                readResult(r.words, *r.type, targetKind));
            a.shape = copy->shape;
            a.strides.assign(rank, 1);
            for (size_t d = rank; d-- > 1;)
              a.strides[d - 1] = a.strides[d] * a.shape[d];
            a.data = copy->data.data();
            a.owner = std::move(copy);
          }
          out.push_back(std::move(a));
        }
      });
  if (err) {
    llvm::consumeError(std::move(copyErr));
    return std::move(err);
  }
  if (copyErr)
    return std::move(copyErr);
#ifdef LINFUSE_ENABLE_CUDA
  // Device copies were enqueued after the call's own synchronization.
  if (copiedOnDevice && linfuse_cuda_synchronize() != LINFUSE_OK)
    if (llvm::Error e = runtimeError("@" + entryName))
      return std::move(e);
#endif
  return out;
}
