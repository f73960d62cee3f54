//===- Lowering.cpp - optimize and lower a module for a target ------------===//

#include "linfuse/Execution/Lowering.h"
#include "linfuse/Pipelines/Pipelines.h"
#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/Pass/PassManager.h"

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
  FirstErrorCollector errors(module.getContext());
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (target == Target::CUDA) {
#ifndef LINFUSE_ENABLE_CUDA
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--target=cuda: linfuse was built without the CUDA toolkit "
        "(LINFUSE_ENABLE_CUDA=OFF)");
#endif
    buildLowerToCUDAPipeline(pm, LowerToCUDAPipelineOptions());
    if (failed(pm.run(module)))
      return errors.take("--linfuse-lower-to-cuda failed");
    return llvm::Error::success();
  }
  buildLowerToCPUPipeline(pm, LowerToCPUPipelineOptions());
  if (failed(pm.run(module)))
    return errors.take("--linfuse-lower-to-cpu failed");
  return llvm::Error::success();
}
