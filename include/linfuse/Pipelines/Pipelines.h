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
  PassOptions::Option<bool> entryChecks{
      *this, "entry-checks",
      llvm::cl::desc(
          "Start with --linfuse-entry-checks: the size relations of the "
          "input program's ops become cf.asserts at function entry, so a "
          "call the input program forbids fails even where the optimized "
          "program would run it (the drivers turn this on with their "
          "run-time checks)"),
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
  PassOptions::Option<bool> runtimeChecks{
      *this, "runtime-checks",
      llvm::cl::desc("Check at run time that operand sizes agree and "
                     "indices are in bounds (cf.assert before each op)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> threads{
      *this, "threads",
      llvm::cl::desc("Run element-wise loops on the runtime's thread pool "
                     "(--linfuse-thread-parallel-loops); off: one thread"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> releaseOnPack{
      *this, "release-on-pack",
      llvm::cl::desc("Weight-packing functions start by dropping every "
                     "reordered weight copy of the host runtime (off: the "
                     "driver drops those of the ranges it packs)"),
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

/// Options of `--linfuse-lower-to-cuda`.
struct LowerToCUDAPipelineOptions
    : public PassPipelineOptions<LowerToCUDAPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture (ptxas -arch)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (sm_90a needs PTX 8.0)"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary format: fatbin, bin (cubin), isa (PTX)"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block of element-wise kernels"),
      llvm::cl::init(128)};
  PassOptions::Option<bool> cInterface{
      *this, "c-interface",
      llvm::cl::desc("Emit `_mlir_ciface_<name>` for public functions"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> cudaGraph{
      *this, "cuda-graph",
      llvm::cl::desc("Capture each public function's device work into a "
                     "CUDA graph on its first call with given arguments and "
                     "replay it on later ones (--linfuse-cuda-graph)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> runtimeChecks{
      *this, "runtime-checks",
      llvm::cl::desc("Check at run time that operand sizes agree and "
                     "indices are in bounds (cf.assert before each op)"),
      llvm::cl::init(true)};
};

/// Optimized linalg-on-tensors -> LLVM dialect + `gpu.binary` for NVIDIA
/// GPUs: GEMMs (with the epilogues cuBLASLt has) become
/// `linfuse_cuda_gemm_*` calls into liblinfuse_runtime (cuBLASLt), buffers
/// are device allocations, every other linalg op becomes a tiled GPU
/// kernel (NVVM, serialized with ptxas from the CUDA toolkit on PATH).
/// Function arguments and results are device buffers.
void buildLowerToCUDAPipeline(OpPassManager &pm,
                              const LowerToCUDAPipelineOptions &options);

/// Registers `--linfuse-optimize`, `--linfuse-lower-to-cpu` and
/// `--linfuse-lower-to-cuda`.
void registerLinfusePipelines();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_PIPELINES_PIPELINES_H
