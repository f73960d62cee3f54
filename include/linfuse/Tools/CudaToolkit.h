//===- CudaToolkit.h - where ptxas and libdevice are --------------*- C++
//-*-===//
//
// MLIR's NVVM serialization finds ptxas and libdevice through the CUDA_ROOT,
// CUDA_HOME or CUDA_PATH environment variables (then PATH for ptxas alone,
// without libdevice: kernels calling __nv_expf would fail to link). linfuse's
// tools point CUDA_ROOT at the toolkit found when linfuse was configured,
// unless the user set one of them.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_TOOLS_CUDATOOLKIT_H
#define LINFUSE_TOOLS_CUDATOOLKIT_H

namespace mlir {
namespace linfuse {

/// Sets CUDA_ROOT to the configured toolkit when none of CUDA_ROOT,
/// CUDA_HOME, CUDA_PATH is set. A no-op in builds without CUDA.
void setDefaultCudaToolkitPath();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_TOOLS_CUDATOOLKIT_H
