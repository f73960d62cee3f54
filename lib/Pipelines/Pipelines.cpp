//===- Pipelines.cpp - linfuse pass pipelines -----------------------------===//

#include "linfuse/Pipelines/Pipelines.h"
#include "linfuse/Conversion/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::linfuse;

namespace {
/// Stands in for a pipeline nested where it cannot run: one error at the op
/// it was scheduled on, and failure. (Adding a pass restricted to
/// builtin.module to a func.func pass manager aborts the process instead.)
struct MisplacedPipelinePass
    : public PassWrapper<MisplacedPipelinePass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MisplacedPipelinePass)

  explicit MisplacedPipelinePass(std::string message)
      : message(std::move(message)) {}
  StringRef getArgument() const override {
    return "linfuse-misplaced-pipeline";
  }
  void runOnOperation() override {
    getOperation()->emitError(message);
    signalPassFailure();
  }

  std::string message;
};
} // namespace

/// True when `pm` runs on builtin.module; otherwise adds a pass that fails
/// with an error saying how to run `pipeline` (`why`: what needs the
/// module).
static bool requireModule(OpPassManager &pm, StringRef pipeline,
                          StringRef why) {
  StringRef anchor = pm.getOpAnchorName();
  if (anchor == ModuleOp::getOperationName())
    return true;
  pm.addPass(std::make_unique<MisplacedPipelinePass>(
      ("--" + pipeline + " needs builtin.module (" + why +
       "), but was nested under '" + anchor +
       "'; run it as --pass-pipeline='builtin.module(" + pipeline + ")'")
          .str()));
  return false;
}

void mlir::linfuse::buildOptimizePipeline(
    OpPassManager &pm, const OptimizePipelineOptions &options) {
  // Nested under a function (func.func(linfuse-optimize)) everything runs
  // but inlining, which needs the module's symbol table; lifting the
  // weight packing adds functions to the module, so it refuses there.
  bool onModule = pm.getOpAnchorName() == ModuleOp::getOperationName();
  if (options.liftWeights &&
      !requireModule(pm, "linfuse-optimize{lift-weights=true}",
                     "lifting adds packing functions to it"))
    return;
  // First: folders and canonicalization patterns upstream may crash on
  // verifying but undefined ops (a memref.dim with a negative index did).
  pm.addPass(createRejectUndefinedOpsPass());
  // Inline next: matmuls behind calls (a `@linear` helper called for Q, K
  // and V) only share an input once they sit in one function. The inliner
  // canonicalizes as it goes and drops private functions left unused.
  if (onModule)
    pm.addPass(createInlinerPass());
  // After inlining, so that the checks name the public function's
  // arguments; before any rewrite that drops a relation.
  if (options.entryChecks) {
    if (onModule)
      pm.addNestedPass<func::FuncOp>(createEntryChecksPass());
    else
      pm.addPass(createEntryChecksPass());
  }
  // Contractions in any spelling (IREE's f16 generics, linalg.contract,
  // matvec) become linalg.matmul, which everything after handles; CSE then
  // unifies the one-row views of a vector that several matvecs read.
  pm.addPass(createSpecializeContractionsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createFoldMatmulChainsPass());
  pm.addPass(createMergeParallelMatmulsPass());
  pm.addPass(createFoldConstantWeightsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.liftWeights) {
    pm.addPass(createLiftWeightPackingPass());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

static void addBufferization(OpPassManager &pm) {
  pm.addPass(createDynamicExpandShapePass());
  pm.addPass(createReadOnlyArgumentsPass());
  // A concat's operands are computed into their slices of its result (the
  // merged weights a packing function builds are written once).
  pm.addPass(createConcatInPlacePass());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // A loop-carried tensor the body recomputes (h = h·W in an scf.for) is a
  // new buffer each iteration; the deallocation pipeline frees the old one.
  bufferize.allowReturnAllocsFromLoops = true;
  // Arguments are contiguous (callers pass packed arrays); views of merged
  // results inside a function stay views, and --linfuse-return-views below
  // keeps the returned ones views too.
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  // Results that are slices of one buffer (a merged GEMM's q, k, v) are
  // returned as views of it, not copied (the calling convention allows
  // strided and shared results).
  pm.addPass(createReturnViewsPass());
}

/// Raise GEMMs (with the target's epilogues), bufferize, and turn the GEMMs
/// into runtime calls for `target`.
static void addGemmsAndBuffers(OpPassManager &pm, StringRef target,
                               bool epilogues, bool runtimeChecks,
                               bool releaseOnPack = true) {
  pm.addPass(createRejectUndefinedOpsPass());
  // Unoptimized input (--no-optimize) may still spell its GEMMs as generics
  // or matvecs: they go to the library too, not to loops.
  pm.addPass(createSpecializeContractionsPass());
  RaiseToGemmPassOptions raise;
  raise.epilogues = epilogues;
  raise.target = target.str();
  pm.addPass(createRaiseToGemmPass(raise));
  pm.addPass(createCanonicalizerPass());
  if (target == "cpu") {
    // One loop nest per chain of element-wise ops; reductions marked so
    // their loops vectorize. (Not yet on CUDA: untested on a GPU.)
    pm.addPass(createFuseElementwisePass());
    pm.addPass(createReassociateReductionsPass());
  }
  // Run-time checks on tensors: one per op and call, not per element.
  // GEMMs have been raised by then (the runtime checks their shapes
  // itself), so the checks' extra `tensor.dim` uses cannot keep a bias-add
  // or activation out of a GEMM's epilogue.
  if (runtimeChecks)
    pm.addPass(createRuntimeChecksPass());
  addBufferization(pm);
  ConvertGemmToRuntimePassOptions runtime;
  runtime.target = target.str();
  runtime.releaseOnPack = releaseOnPack;
  pm.addPass(createConvertGemmToRuntimePass(runtime));
}

/// f16/bf16 element-wise code: math in f32 (libm and libdevice have no f16
/// erf), bf16 arithmetic in f32, and bf16 conversions as integer ops (no
/// __truncsfbf2 libcall, which neither the JIT nor every libgcc has).
static void addLowPrecisionLegalization(OpPassManager &pm) {
  pm.addPass(math::createMathExtendToSupportedTypes());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
}

void mlir::linfuse::buildLowerToCPUPipeline(
    OpPassManager &pm, const LowerToCPUPipelineOptions &options) {
  if (!requireModule(pm, "linfuse-lower-to-cpu",
                     "it lowers function signatures and module globals"))
    return;
  addGemmsAndBuffers(pm, "cpu", options.epilogues, options.runtimeChecks,
                     options.releaseOnPack);
  // A merged weight is a view of its weights where the caller placed them
  // one after the other (no second copy of them).
  pm.addPass(createViewAdjacentWeightsPass());
  if (options.threads) {
    pm.addPass(createConvertLinalgToParallelLoopsPass());
    pm.addPass(createThreadParallelLoopsPass());
  } else {
    pm.addPass(createConvertLinalgToLoopsPass());
  }
  addLowPrecisionLegalization(pm);
  // What LLVM's loop vectorizer needs to vectorize the element-wise loops:
  // no libm calls in them, and sums it may reassociate.
  pm.addPass(createApproximateMathPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  if (options.cInterface)
    pm.addPass(createAttachCInterfacePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::linfuse::buildLowerToCUDAPipeline(
    OpPassManager &pm, const LowerToCUDAPipelineOptions &options) {
  if (!requireModule(pm, "linfuse-lower-to-cuda",
                     "it outlines kernels into gpu.module"))
    return;
  addGemmsAndBuffers(pm, "cuda", /*epilogues=*/true, options.runtimeChecks);
  pm.addPass(createDeviceMemoryPass());
  // Element-wise work: parallel loops, tiled into blocks of threads,
  // mapped to the grid, outlined into kernels.
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  TileParallelLoopsPassOptions tile;
  tile.blockSize = options.blockSize;
  // No canonicalization here: it would fold a one-tile outer loop into the
  // thread loop, and the threads would become blocks of one thread.
  pm.addPass(createTileParallelLoopsPass(tile));
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addPass(createGpuKernelOutliningPass());
  // gpu-to-llvm lowers allocations, copies and launches in their async
  // form: thread a stream through each function (synchronized before the
  // runtime's GEMM calls and the return).
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  // The runtime's GEMMs are ordered on the same stream: no host waits.
  pm.addPass(createStreamOrderedGemmsPass());
  if (options.cudaGraph)
    pm.addPass(createCudaGraphPass());
  addLowPrecisionLegalization(pm);
  if (options.cInterface)
    pm.addPass(createAttachCInterfacePass());
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip;
  nvvm.cubinFeatures = options.features;
  nvvm.cubinFormat = options.format;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void mlir::linfuse::registerLinfusePipelines() {
  PassPipelineRegistration<OptimizePipelineOptions>(
      "linfuse-optimize",
      "Target-independent linfuse pipeline: inline, specialize "
      "contractions to matmuls, cse, fold matmul chains, merge parallel "
      "matmuls, fold constant weights, canonicalize, "
      "cse (with lift-weights=true: then lift weight packing). Emits upstream "
      "linalg/tensor/arith/func ops only.",
      buildOptimizePipeline);
  PassPipelineRegistration<LowerToCPUPipelineOptions>(
      "linfuse-lower-to-cpu",
      "Host lowering: raise matmuls to linfuse.gemm (with bias/activation "
      "epilogues), fuse element-wise chains, bufferize, call "
      "liblinfuse_runtime (oneDNN) for GEMMs, loops for the rest (f32 math "
      "as polynomials, reassociable sums: LLVM vectorizes them), LLVM "
      "dialect out. Input: optimized linalg-on-tensors.",
      buildLowerToCPUPipeline);
  PassPipelineRegistration<LowerToCUDAPipelineOptions>(
      "linfuse-lower-to-cuda",
      "NVIDIA GPU lowering: GEMMs to cuBLASLt calls in liblinfuse_runtime "
      "(bias/relu/gelu_tanh epilogues), device buffers, tiled GPU kernels "
      "for the rest (NVVM, ptxas from the CUDA toolkit on PATH), LLVM "
      "dialect + gpu.binary out. Input: optimized linalg-on-tensors.",
      buildLowerToCUDAPipeline);
}
