//===- ModuleLoading.cpp - read IR and report errors in one line ----------===//

#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace mlir::linfuse;

FirstErrorCollector::FirstErrorCollector(MLIRContext *ctx)
    : handler(ctx, [this](Diagnostic &diag) {
        if (diag.getSeverity() == DiagnosticSeverity::Error &&
            message.empty()) {
          llvm::raw_string_ostream os(message);
          if (auto loc = dyn_cast<FileLineColLoc>(diag.getLocation()))
            os << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
               << loc.getColumn() << ": ";
          os << diag.str();
        }
        return success();
      }) {}

llvm::Error FirstErrorCollector::take(const llvm::Twine &fallback) {
  std::string text = message.empty() ? fallback.str() : message;
  message.clear();
  // One line: a multi-line message keeps its first line.
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 llvm::StringRef(text).split('\n').first);
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::linfuse::loadModule(llvm::StringRef path, MLIRContext &ctx) {
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   path + ": " + buffer.getError().message());
  FirstErrorCollector errors(&ctx);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return errors.take(path + ": cannot parse");
  return module;
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::linfuse::parseModule(llvm::StringRef text, llvm::StringRef bufferName,
                           MLIRContext &ctx) {
  FirstErrorCollector errors(&ctx);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, bufferName), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return errors.take(bufferName + ": cannot parse");
  return module;
}
