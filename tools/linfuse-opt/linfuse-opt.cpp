//===- linfuse-opt.cpp - mlir-opt with linfuse --------------------------===//
//
// mlir-opt with every upstream dialect, extension and pass, plus the linfuse
// dialect, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Tools/CudaToolkit.h"
#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/ParseUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

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

/// Checks every chunk of `input` (split as MlirOptMain will) for what an
/// upstream verifier crashes on (rejectVerifierCrashes), printing the error
/// as MLIR does. Chunks that do not parse are left to MlirOptMain's
/// diagnostics. Only inputs whose text may hold such an op are parsed
/// twice (mayCrashUpstreamVerifiers).
static mlir::LogicalResult
precheckInput(const llvm::MemoryBuffer &input, mlir::DialectRegistry &registry,
              const mlir::MlirOptMainConfig &config) {
  if (!mlir::linfuse::mayCrashUpstreamVerifiers(input.getBuffer()))
    return mlir::success();
  auto check = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                   llvm::raw_ostream &) -> mlir::LogicalResult {
    mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
    ctx.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
    auto sourceMgr = std::make_shared<llvm::SourceMgr>();
    sourceMgr->AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
    mlir::OwningOpRef<mlir::Operation *> root;
    {
      // Parse errors are MlirOptMain's to report, once.
      mlir::ScopedDiagnosticHandler quiet(
          &ctx, [](mlir::Diagnostic &) { return mlir::success(); });
      mlir::ParserConfig parserConfig(&ctx, /*verifyAfterParse=*/false);
      root = mlir::parseSourceFileForTool(sourceMgr, parserConfig,
                                          /*insertImplicitModule=*/true);
    }
    if (!root)
      return mlir::success();
    mlir::SourceMgrDiagnosticHandler report(*sourceMgr, &ctx);
    return mlir::linfuse::rejectVerifierCrashes(*root);
  };
  return mlir::splitAndProcessBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(input.getBuffer(),
                                           input.getBufferIdentifier()),
      check, llvm::nulls(), config.inputSplitMarker(),
      config.outputSplitMarker());
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
  // MlirOptMain reads the input itself; it gets the buffer this tool read
  // and checked instead (errors opening it, --show-dialects and
  // --list-passes stay MlirOptMain's).
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file;
  if (!config.shouldShowDialects() && !config.shouldListPasses())
    file = mlir::openInputFile(input, &error);
  mlir::LogicalResult result = mlir::failure();
  if (!file) {
    result = mlir::MlirOptMain(argc, argv, input, output, registry);
  } else if (mlir::succeeded(precheckInput(*file, registry, config))) {
    auto outputFile = mlir::openOutputFile(output, &error);
    if (!outputFile) {
      llvm::errs() << error << "\n";
      return 1;
    }
    result =
        mlir::MlirOptMain(outputFile->os(), std::move(file), registry, config);
    if (mlir::succeeded(result))
      outputFile->keep();
  }

  // Debian's libMLIR counts no mlir::Pass::Statistic (release build without
  // LLVM_ENABLE_STATS); linfuse's passes keep their own counters.
  if (flagGiven(argc, argv, "mlir-pass-statistics"))
    mlir::linfuse::printPassStatistics(llvm::errs());
  return mlir::asMainReturnCode(result);
}
