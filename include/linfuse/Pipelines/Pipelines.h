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

/// Options of `--linfuse-lower-to-cpu`.
struct LowerToCPUPipelineOptions
    : public PassPipelineOptions<LowerToCPUPipelineOptions> {
  PassOptions::Option<bool> epilogues{
      *this, "epilogues",
      llvm::cl::desc("Absorb bias-adds and activations into GEMM epilogues"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> cInterface{
      *this, "c-interface",
      llvm::cl::desc("Emit `_mlir_ciface_<name>` for public functions"),
      llvm::cl::init(true)};
};

/// Optimized linalg-on-tensors -> LLVM dialect for the host: raise matmuls
/// to `linfuse.gemm`, one-shot bufferize (function boundaries, identity
/// layouts at the boundary; slices inside stay strided views), deallocate,
/// turn GEMMs into `liblinfuse_runtime` calls (CBLAS), the remaining linalg
/// into loops, and everything into the LLVM dialect. Anchored on
/// builtin.module.
void buildLowerToCPUPipeline(OpPassManager &pm,
                             const LowerToCPUPipelineOptions &options);

/// Registers `--linfuse-optimize` and `--linfuse-lower-to-cpu`.
void registerLinfusePipelines();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_PIPELINES_PIPELINES_H
