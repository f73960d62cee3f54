//===- InitAllLinfuse.cpp - register linfuse with a tool ------------------===//

#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Conversion/Passes.h"
#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.h"
#include "linfuse/Dialect/Linfuse/Transforms/BufferizableOpInterfaceImpl.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"

void mlir::linfuse::registerLinfuseDialects(DialectRegistry &registry) {
  registry.insert<LinfuseDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}

void mlir::linfuse::registerAllLinfusePasses() {
  registerLinfusePasses();
  registerLinfuseConversionPasses();
  registerLinfusePipelines();
}
