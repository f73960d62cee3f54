//===- Pipelines.cpp - linfuse pass pipelines -----------------------------===//

#include "linfuse/Pipelines/Pipelines.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::linfuse;

void mlir::linfuse::buildOptimizePipeline(
    OpPassManager &pm, const OptimizePipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
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

void mlir::linfuse::registerLinfusePipelines() {
  PassPipelineRegistration<OptimizePipelineOptions>(
      "linfuse-optimize",
      "Target-independent linfuse pipeline: canonicalize, cse, fold matmul "
      "chains, merge parallel matmuls, fold constant weights, canonicalize, "
      "cse (with lift-weights=true: then lift weight packing). Emits upstream "
      "linalg/tensor/arith/func ops only.",
      buildOptimizePipeline);
}
