//===- Pipelines.h - linfuse pass pipelines -----------------------*- C++
//-*-===//
//
// Each pipeline is a C++ function that fills an OpPassManager, so the whole
// flow reads in one place and other stacks can nest it in their own.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_PIPELINES_PIPELINES_H
#define LINFUSE_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace linfuse {

/// Options of `--linfuse-optimize`.
struct OptimizePipelineOptions
    : public PassPipelineOptions<OptimizePipelineOptions> {
  PassOptions::Option<bool> liftWeights{
      *this, "lift-weights",
      llvm::cl::desc(
          "Finish with --linfuse-lift-weight-packing: weight-only work "
          "(concats, folded products of `linfuse.weight` arguments) moves "
          "into a one-time `@<fn>__pack` function, and `@<fn>` takes the "
          "packed weights instead (changes its signature; needs the "
          "pipeline anchored on builtin.module)"),
      llvm::cl::init(false)};
};

/// Everything target-independent: canonicalize, cse and linfuse's graph
/// rewrites. The output contains upstream ops only.
void buildOptimizePipeline(OpPassManager &pm,
                           const OptimizePipelineOptions &options);

/// Registers `--linfuse-optimize` (and later the lowering pipelines).
void registerLinfusePipelines();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_PIPELINES_PIPELINES_H
