// Parses a module holding linfuse.gemm and runs linfuse's pipeline on it,
// using only what find_package(linfuse) provides.
#include "linfuse/InitAllLinfuse.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::linfuse::registerAllLinfusePasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect>();
  mlir::linfuse::registerLinfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &ctx);
  if (!module)
    return 1;
  mlir::PassManager pm(&ctx, mlir::ModuleOp::getOperationName());
  if (mlir::failed(mlir::parsePassPipeline("linfuse-optimize", pm)) ||
      mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  return 0;
}
