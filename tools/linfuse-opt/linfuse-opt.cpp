//===- linfuse-opt.cpp - mlir-opt with linfuse --------------------------===//
//
// mlir-opt with every upstream dialect, extension and pass, plus the linfuse
// dialect, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Tools/CudaToolkit.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"

/// True when boolean flag `--name` (or `-name`, `--name=true`) is in argv.
/// MLIR keeps its pass-manager options private to libMLIR, so the tool looks
/// at its arguments directly.
static bool flagGiven(int argc, char **argv, llvm::StringRef name) {
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    arg = arg.ltrim('-');
    if (arg == name || arg == (name + "=true").str() ||
        arg == (name + "=1").str())
      return true;
  }
  return false;
}

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::linfuse::registerAllLinfusePasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::linfuse::setDefaultCudaToolkitPath();
  mlir::linfuse::registerLinfuseDialects(registry);

  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "linfuse optimizer driver\n", registry);
  mlir::LogicalResult result =
      mlir::MlirOptMain(argc, argv, input, output, registry);

  // Debian's libMLIR counts no mlir::Pass::Statistic (release build without
  // LLVM_ENABLE_STATS); linfuse's passes keep their own counters.
  if (flagGiven(argc, argv, "mlir-pass-statistics"))
    mlir::linfuse::printPassStatistics(llvm::errs());
  return mlir::asMainReturnCode(result);
}
