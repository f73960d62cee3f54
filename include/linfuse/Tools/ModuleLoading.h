//===- ModuleLoading.h - read IR and report errors in one line ----*- C++
//-*-===//
//
// linfuse's tools report every failure as one line ("file:line:col: msg"),
// not MLIR's default multi-line diagnostic with a source excerpt.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_TOOLS_MODULELOADING_H
#define LINFUSE_TOOLS_MODULELOADING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace mlir {
namespace linfuse {

/// While alive, keeps the first error diagnostic of `ctx` as one line and
/// swallows the rest (warnings and remarks included).
class FirstErrorCollector {
public:
  explicit FirstErrorCollector(MLIRContext *ctx);
  /// The first error, or `fallback` when none was reported.
  llvm::Error take(const llvm::Twine &fallback);

private:
  std::string message;
  ScopedDiagnosticHandler handler;
};

/// Parses `path` ("-" is stdin) into a module of `ctx`; a missing file or a
/// parse error is a one-line error.
llvm::Expected<OwningOpRef<ModuleOp>> loadModule(llvm::StringRef path,
                                                 MLIRContext &ctx);

/// Parses `text` (locations in messages name `bufferName`); errors as for
/// loadModule.
llvm::Expected<OwningOpRef<ModuleOp>>
parseModule(llvm::StringRef text, llvm::StringRef bufferName, MLIRContext &ctx);

/// Fails, with an error at the op, on what an upstream verifier crashes on
/// instead of failing (MLIR 22: tensor.concat with a negative dim). Run on
/// a parsed but not yet verified `root`; loadModule and parseModule do.
LogicalResult rejectVerifierCrashes(Operation *root);

/// False when IR text `text` cannot hold what rejectVerifierCrashes looks
/// for (no negative `dim` in either syntax): a scan of the text, so that a
/// driver which parses with MLIR's own verification (linfuse-opt) parses a
/// second time only for inputs that may need the check.
bool mayCrashUpstreamVerifiers(llvm::StringRef text);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_TOOLS_MODULELOADING_H
