//===- Lowering.cpp - optimize and lower a module for a target ------------===//

#include "linfuse/Execution/Lowering.h"
#include "linfuse/Pipelines/Pipelines.h"
#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::linfuse;

llvm::Error mlir::linfuse::optimizeModule(ModuleOp module, bool liftWeights) {
  FirstErrorCollector errors(module.getContext());
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  OptimizePipelineOptions options;
  options.liftWeights = liftWeights;
  buildOptimizePipeline(pm, options);
  if (failed(pm.run(module)))
    return errors.take("--linfuse-optimize failed");
  return llvm::Error::success();
}

llvm::Error mlir::linfuse::lowerModule(ModuleOp module, Target target) {
  if (target == Target::CUDA)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--target=cuda: the CUDA target is not available in this build yet");
  FirstErrorCollector errors(module.getContext());
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  buildLowerToCPUPipeline(pm, LowerToCPUPipelineOptions());
  if (failed(pm.run(module)))
    return errors.take("--linfuse-lower-to-cpu failed");
  return llvm::Error::success();
}
