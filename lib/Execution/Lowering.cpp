//===- Lowering.cpp - optimize and lower a module for a target ------------===//

#include "linfuse/Execution/Lowering.h"
#include "linfuse/Pipelines/Pipelines.h"
#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdlib>
#include <cstring>
#include <optional>

using namespace mlir;
using namespace mlir::linfuse;

llvm::Expected<Target> mlir::linfuse::parseTarget(llvm::StringRef name) {
  if (name == "cpu")
    return Target::CPU;
  if (name == "cuda")
    return Target::CUDA;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--target must be cpu or cuda, not '" + name +
                                     "'");
}

/// Runs what `build` adds to a pass manager on `module`; the first error
/// (or `what` + " failed") as a one-line error.
static llvm::Error
runPasses(ModuleOp module, const llvm::Twine &what, PassReport *report,
          llvm::function_ref<llvm::Error(OpPassManager &)> build) {
  FirstErrorCollector errors(module.getContext());
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (llvm::Error err = build(pm))
    return err;
  // After `errors`: remarks reach the report first.
  std::optional<PassReportCollector> collector;
  if (report)
    collector.emplace(pm, *report);
  LogicalResult result = pm.run(module);
  if (collector)
    collector->finish();
  if (failed(result))
    return errors.take(what + " failed");
  return llvm::Error::success();
}

llvm::Error mlir::linfuse::optimizeModule(ModuleOp module, bool liftWeights,
                                          bool entryChecks,
                                          PassReport *report) {
  OptimizePipelineOptions options;
  options.liftWeights = liftWeights;
  options.entryChecks = entryChecks;
  return optimizeModule(module, options, report);
}

llvm::Error
mlir::linfuse::optimizeModule(ModuleOp module,
                              const OptimizePipelineOptions &options,
                              PassReport *report) {
  return runPasses(module, "--linfuse-optimize", report,
                   [&](OpPassManager &pm) {
                     buildOptimizePipeline(pm, options);
                     return llvm::Error::success();
                   });
}

llvm::Error mlir::linfuse::lowerModule(ModuleOp module, Target target,
                                       PassReport *report,
                                       const LowerOptions &options) {
  if (target == Target::CUDA) {
#ifndef LINFUSE_ENABLE_CUDA
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--target=cuda: linfuse was built without the CUDA toolkit "
        "(LINFUSE_ENABLE_CUDA=OFF)");
#endif
    return runPasses(module, "--linfuse-lower-to-cuda", report,
                     [&](OpPassManager &pm) {
                       LowerToCUDAPipelineOptions cuda;
                       cuda.cudaGraph = options.cudaGraph;
                       cuda.runtimeChecks = options.runtimeChecks;
                       buildLowerToCUDAPipeline(pm, cuda);
                       return llvm::Error::success();
                     });
  }
  if (options.cudaGraph)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "CUDA graphs (--cuda-graph) need --target=cuda");
  return runPasses(module, "--linfuse-lower-to-cpu", report,
                   [&](OpPassManager &pm) {
                     LowerToCPUPipelineOptions cpu;
                     cpu.runtimeChecks = options.runtimeChecks;
                     cpu.releaseOnPack = options.releaseOnPack;
                     buildLowerToCPUPipeline(pm, cpu);
                     return llvm::Error::success();
                   });
}

llvm::Error mlir::linfuse::runPipeline(ModuleOp module,
                                       llvm::StringRef pipeline,
                                       PassReport *report) {
  return runPasses(
      module, "pipeline '" + pipeline + "'", report,
      [&](OpPassManager &pm) -> llvm::Error {
        std::string message;
        llvm::raw_string_ostream os(message);
        // parsePassPipeline(text, pm) reads the passes to add *within* pm's
        // anchor: take "builtin.module(...)" apart (mlir-opt's
        // --pass-pipeline form); "inline, func.func(cse)" goes in as is.
        llvm::StringRef inner = pipeline.trim();
        if (inner.consume_front("builtin.module(") && inner.consume_back(")"))
          inner = inner.trim();
        else
          inner = pipeline.trim();
        if (failed(parsePassPipeline(inner, pm, os)))
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              "bad pass pipeline '" + pipeline +
                  "': " + llvm::StringRef(message).trim().split('\n').first);
        return llvm::Error::success();
      });
}

void mlir::linfuse::internalizeImplementation(ModuleOp module) {
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && !fn.getName().starts_with("_mlir_ciface_"))
      fn.setLinkage(LLVM::Linkage::Internal);
}

void mlir::linfuse::routeAssertionsToRuntime(ModuleOp module) {
  // cf.assert's LLVM lowering declares these two and calls puts(message),
  // then abort(). Only the module's own symbols: a gpu.module's are the
  // device's.
  SymbolTable symbols(module);
  for (auto [libc, runtime] :
       {std::pair<StringRef, StringRef>{"puts", "linfuse_assert_message"},
        {"abort", "linfuse_assert_abort"}}) {
    auto fn = symbols.lookup<LLVM::LLVMFuncOp>(libc);
    if (!fn || !fn.isExternal())
      continue;
    if (symbols.lookup(runtime)) {
      if (succeeded(SymbolTable::replaceAllSymbolUses(
              fn, StringAttr::get(module.getContext(), runtime), module)))
        fn.erase();
      continue;
    }
    (void)symbols.rename(fn, runtime);
  }
}

/// The initializer's bytes as the target lays them out (little-endian,
/// row-major, element size = the type's), or nullopt where the attribute's
/// storage differs from that (i1 is bit-packed, a splat stores one element).
static std::optional<ArrayRef<char>> rawBytes(Attribute value) {
  auto elements = dyn_cast_or_null<ElementsAttr>(value);
  if (!elements)
    return std::nullopt;
  Type element = elements.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.isSplat())
      return std::nullopt;
    return dense.getRawData();
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  return std::nullopt;
}

std::vector<ExternalConstant>
mlir::linfuse::externalizeLargeConstants(ModuleOp module, size_t minBytes) {
  std::vector<ExternalConstant> out;
  // Only the module's own globals: a gpu.module's live on the device.
  for (auto global : module.getOps<LLVM::GlobalOp>()) {
    if (!global.getConstant() || global.getInitializerBlock())
      continue;
    std::optional<ArrayRef<char>> bytes = rawBytes(global.getValueOrNull());
    if (!bytes || bytes->size() < minBytes)
      continue;
    ExternalConstant c;
    c.symbol = global.getSymName().str();
    c.bytes = bytes->size();
    size_t rounded = (c.bytes + 63) / 64 * 64;
    c.data = std::shared_ptr<void>(std::aligned_alloc(64, rounded), std::free);
    if (!c.data)
      continue; // Out of memory: leave it compiled in.
    std::memcpy(c.data.get(), bytes->data(), c.bytes);
    global.removeValueAttr();
    global.setLinkage(LLVM::Linkage::External);
    out.push_back(std::move(c));
  }
  return out;
}
