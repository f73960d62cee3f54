//===- CudaToolkit.cpp - where ptxas and libdevice are --------------------===//

#include "linfuse/Tools/CudaToolkit.h"

#include <cstdlib>
#include <initializer_list>

void mlir::linfuse::setDefaultCudaToolkitPath() {
#ifdef LINFUSE_CUDA_TOOLKIT_ROOT
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(var); value && *value)
      return;
  setenv("CUDA_ROOT", LINFUSE_CUDA_TOOLKIT_ROOT, /*overwrite=*/0);
#endif
}
