//===- LinfusePlugin.cpp - linfuse as an upstream mlir-opt plugin ---------===//
//
//   mlir-opt --load-dialect-plugin=libLinfusePlugin.so \
//            --load-pass-plugin=libLinfusePlugin.so \
//            --pass-pipeline="builtin.module(linfuse-optimize)" in.mlir
//
// Pass plugins are registered after mlir-opt parsed its command line, so the
// passes are reachable through --pass-pipeline, not as bare --flags.
//
// Statistics: linfuse's passes count with their own counters (Debian's
// release libMLIR compiles llvm::Statistic out), which mlir-opt's
// -mlir-pass-statistics report does not know: with that flag given, the
// plugin prints linfuse's report (to stderr) when the process exits.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/InitAllLinfuse.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <fstream>
#include <string>

/// Whether -mlir-pass-statistics is on mlir-opt's command line. Read from
/// /proc/self/cmdline: the plugin is loaded while the command line is being
/// parsed (that option may come later), and by exit llvm_shutdown has
/// removed the parsed options.
static bool statisticsAsked() {
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(cmdline, arg, '\0')) {
    llvm::StringRef a(arg);
    a.consume_front("-");
    a.consume_front("-");
    if (a == "mlir-pass-statistics" || a.starts_with("mlir-pass-statistics="))
      return !a.ends_with("=false") && !a.ends_with("=0");
  }
  return false;
}

static void printStatistics() {
  mlir::linfuse::printPassStatistics(llvm::errs());
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Linfuse", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::linfuse::registerLinfuseDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Linfuse", LLVM_VERSION_STRING, []() {
            mlir::linfuse::registerAllLinfusePasses();
            if (statisticsAsked())
              std::atexit(printStatistics);
          }};
}
