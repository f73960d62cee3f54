//===- ModuleLoading.cpp - read IR and report errors in one line ----------===//

#include "linfuse/Tools/ModuleLoading.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
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

LogicalResult mlir::linfuse::rejectVerifierCrashes(Operation *root) {
  WalkResult result = root->walk([](tensor::ConcatOp concat) {
    // ConcatOp::verify checks dim < rank, not dim >= 0, then indexes the
    // input shapes with it.
    auto dim = concat->getAttrOfType<IntegerAttr>("dim");
    if (dim && dim.getValue().isNegative()) {
      concat.emitOpError("concatenation dim must be non-negative, got ")
          << dim.getValue().getSExtValue();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

bool mlir::linfuse::mayCrashUpstreamVerifiers(llvm::StringRef text) {
  // `dim(-1)` (tensor.concat's syntax) or `dim = -1 : i64` (generic form).
  for (size_t at = text.find("dim"); at != llvm::StringRef::npos;
       at = text.find("dim", at + 3)) {
    llvm::StringRef rest = text.drop_front(at + 3).ltrim();
    if (rest.consume_front("(") || rest.consume_front("="))
      if (rest.ltrim().starts_with("-"))
        return true;
  }
  return false;
}

/// Parses `sourceMgr`'s buffer, then verifies it (after the checks that
/// stand in for crashing verifiers).
static OwningOpRef<ModuleOp> parseAndVerify(llvm::SourceMgr &sourceMgr,
                                            MLIRContext &ctx) {
  ParserConfig config(&ctx, /*verifyAfterParse=*/false);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!module || failed(rejectVerifierCrashes(*module)) ||
      failed(verify(*module)))
    return nullptr;
  return module;
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
  OwningOpRef<ModuleOp> module = parseAndVerify(sourceMgr, ctx);
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
  OwningOpRef<ModuleOp> module = parseAndVerify(sourceMgr, ctx);
  if (!module)
    return errors.take(bufferName + ": cannot parse");
  return module;
}
