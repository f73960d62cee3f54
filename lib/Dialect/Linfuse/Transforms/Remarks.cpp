//===- Remarks.cpp - linfuse optimization remarks -------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>

using namespace mlir;

static bool remarksFlag = false;
// A tool-wide flag (not a pass option) so one switch covers every linfuse
// pass in a pipeline.
static llvm::cl::opt<bool, /*ExternalStorage=*/true> clRemarks(
    "linfuse-remarks",
    llvm::cl::desc("Emit an optimization remark at each op a linfuse pass "
                   "merges or folds"),
    llvm::cl::location(remarksFlag));

/// Drivers that collect remarks (PassReportCollector), counted so that
/// pipelines running at the same time do not switch them off for each other.
static std::atomic<int> remarkCollectors{0};

bool mlir::linfuse::remarksEnabled() {
  return remarksFlag || remarkCollectors.load(std::memory_order_relaxed) > 0;
}
void mlir::linfuse::setRemarksEnabled(bool enabled) { remarksFlag = enabled; }
void mlir::linfuse::addRemarkCollector() { ++remarkCollectors; }
void mlir::linfuse::removeRemarkCollector() { --remarkCollectors; }

void mlir::linfuse::emitOptimizationRemark(Operation *op,
                                           const llvm::Twine &message) {
  if (remarksEnabled())
    mlir::emitRemark(op->getLoc(), message);
}

std::string mlir::linfuse::describeValue(Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Local scope, no verification: printing must not walk (or verify) the
  // whole module, which other threads may be rewriting.
  value.printAsOperand(os, OpPrintingFlags().useLocalScope().assumeVerified());
  return text;
}

std::string mlir::linfuse::describeShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      "x");
  return text;
}
