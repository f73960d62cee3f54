//===- LinfusePlugin.cpp - linfuse as an upstream mlir-opt plugin ---------===//
//
//   mlir-opt --load-dialect-plugin=libLinfusePlugin.so \
//            --load-pass-plugin=libLinfusePlugin.so \
//            --pass-pipeline="builtin.module(linfuse-optimize)" in.mlir
//
// Pass plugins are registered after mlir-opt parsed its command line, so the
// passes are reachable through --pass-pipeline, not as bare --flags.
//
//===----------------------------------------------------------------------===//

#include "linfuse/InitAllLinfuse.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Linfuse", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::linfuse::registerLinfuseDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Linfuse", LLVM_VERSION_STRING,
          []() { mlir::linfuse::registerAllLinfusePasses(); }};
}
