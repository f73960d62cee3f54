//===- linfuse-opt.cpp - mlir-opt with linfuse --------------------------===//
//
// mlir-opt with every upstream dialect, extension and pass, plus the linfuse
// dialect, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "linfuse/InitAllLinfuse.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::linfuse::registerAllLinfusePasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::linfuse::registerLinfuseDialects(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "linfuse optimizer driver\n", registry));
}
