//===- RuntimeChecks.cpp - run-time checks that name the arguments --------===//
//
// Upstream's generate-runtime-verification, with messages a user can act
// on: each op implementing RuntimeVerifiableOpInterface emits its own checks
// (operand sizes against loop ranges, indices in bounds), and the message
// generator here adds which function argument an "operand #N" is, when it
// is one ("operand #1 (argument 1 of @main)"), instead of printing the op.
// The message keeps upstream's layout ("^ <reason>", "Location: loc(...)"),
// which the JIT's trap turns into one line.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/RuntimeVerifiableOpInterface.h"
#include "llvm/Support/Regex.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_RUNTIMECHECKSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

/// "operand #N" in `reason` followed by " (argument K of @f)" when operand
/// N of `op` is argument K of the function around it.
std::string nameArguments(Operation *op, StringRef reason) {
  auto fn = op->getParentOfType<func::FuncOp>();
  llvm::Regex operand("operand #([0-9]+)");
  SmallVector<StringRef, 2> groups;
  unsigned index = 0;
  if (!fn || !operand.match(reason, &groups) ||
      groups[1].getAsInteger(10, index) || index >= op->getNumOperands())
    return reason.str();
  auto arg = dyn_cast<BlockArgument>(op->getOperand(index));
  if (!arg || arg.getOwner() != &fn.getBody().front())
    return reason.str();
  size_t end = reason.find(groups[0]) + groups[0].size();
  return (reason.take_front(end) + " (argument " + Twine(arg.getArgNumber()) +
          " of @" + fn.getName() + ")" + reason.drop_front(end))
      .str();
}

std::string message(Operation *op, StringRef reason) {
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  return "ERROR: Runtime op verification failed\n^ " +
         nameArguments(op, reason) + "\nLocation: " + loc;
}

struct RuntimeChecksPass
    : public linfuse::impl::RuntimeChecksPassBase<RuntimeChecksPass> {
  void runOnOperation() override {
    // Collected first: the checks' own ops are not checked.
    SmallVector<RuntimeVerifiableOpInterface> ops;
    getOperation()->walk(
        [&](RuntimeVerifiableOpInterface op) { ops.push_back(op); });
    OpBuilder builder(&getContext());
    for (RuntimeVerifiableOpInterface op : ops) {
      builder.setInsertionPoint(op);
      op.generateRuntimeVerification(builder, op->getLoc(), message);
    }
  }
};

} // namespace
