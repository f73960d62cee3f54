//===- ToolContext.cpp - the MLIR context linfuse's tools use -------------===//

#include "linfuse/Tools/ToolContext.h"
#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Tools/CudaToolkit.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void mlir::linfuse::registerToolDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registerLinfuseDialects(registry);
  setDefaultCudaToolkitPath();
}
