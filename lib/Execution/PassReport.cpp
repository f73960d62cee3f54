//===- PassReport.cpp - what the linfuse passes did, as data --------------===//

#include "linfuse/Execution/PassReport.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Threading.h"

#include <mutex>

using namespace mlir;
using namespace mlir::linfuse;

std::string SourceLocation::str() const {
  std::string where;
  if (!file.empty())
    where = file + ":" + std::to_string(line) + ":" + std::to_string(column);
  if (name.empty())
    return where.empty() ? "unknown" : where;
  return where.empty() ? name : where + " (" + name + ")";
}

SourceLocation mlir::linfuse::describeLocation(Location loc) {
  SourceLocation out;
  // Walk inwards: names wrap file locations; call sites and fused locations
  // are described by their first file location.
  SmallVector<Location> work{loc};
  while (!work.empty()) {
    Location l = work.pop_back_val();
    if (auto name = dyn_cast<NameLoc>(l)) {
      if (out.name.empty())
        out.name = name.getName().str();
      work.push_back(name.getChildLoc());
    } else if (auto file = dyn_cast<FileLineColLoc>(l)) {
      out.file = file.getFilename().str();
      out.line = file.getLine();
      out.column = file.getColumn();
      break;
    } else if (auto call = dyn_cast<CallSiteLoc>(l)) {
      work.push_back(call.getCallee());
    } else if (auto fused = dyn_cast<FusedLoc>(l)) {
      for (Location child : llvm::reverse(fused.getLocations()))
        work.push_back(child);
    }
  }
  return out;
}

namespace {
/// Knows which pass each thread is running, and has each thread count the
/// pipeline's statistics into `scope` while it runs one of its passes.
class CurrentPass : public PassInstrumentation {
public:
  explicit CurrentPass(const void *scope) : scope(scope) {}

  void runBeforePass(Pass *pass, Operation *) override {
    const void *previous = swapPassStatisticScope(scope);
    std::lock_guard<std::mutex> lock(mutex);
    current[llvm::get_threadid()].push_back({pass->getArgument(), previous});
  }
  void runAfterPass(Pass *, Operation *) override { pop(); }
  void runAfterPassFailed(Pass *, Operation *) override { pop(); }

  std::string currentArgument() {
    std::lock_guard<std::mutex> lock(mutex);
    auto &stack = current[llvm::get_threadid()];
    return stack.empty() ? std::string() : stack.back().first.str();
  }

private:
  void pop() {
    std::lock_guard<std::mutex> lock(mutex);
    auto &stack = current[llvm::get_threadid()];
    if (stack.empty())
      return;
    swapPassStatisticScope(stack.back().second);
    stack.pop_back();
  }

  const void *scope;
  std::mutex mutex;
  /// Per thread: the passes it runs (nested ones last), each with the
  /// statistic scope the thread had before.
  llvm::DenseMap<uint64_t, SmallVector<std::pair<StringRef, const void *>, 2>>
      current;
};
} // namespace

struct PassReportCollector::Impl {
  Impl(PassManager &pm, PassReport &report)
      : report(report), handler(pm.getContext(), [this](Diagnostic &diag) {
          if (diag.getSeverity() != DiagnosticSeverity::Remark)
            return failure();
          Remark remark{passes->currentArgument(),
                        describeLocation(diag.getLocation()), diag.str()};
          std::lock_guard<std::mutex> lock(mutex);
          this->report.remarks.push_back(std::move(remark));
          return success();
        }) {
    auto instrumentation = std::make_unique<CurrentPass>(this);
    passes = instrumentation.get();
    pm.addInstrumentation(std::move(instrumentation));
    addRemarkCollector();
  }

  PassReport &report;
  /// Owned by the pass manager.
  CurrentPass *passes = nullptr;
  std::mutex mutex;
  ScopedDiagnosticHandler handler;
};

PassReportCollector::PassReportCollector(PassManager &pm, PassReport &report)
    : impl(std::make_unique<Impl>(pm, report)) {}

PassReportCollector::~PassReportCollector() {
  removeRemarkCollector();
  (void)takePassStatistics(impl.get()); // finish() not called: forget them
}

void PassReportCollector::finish() {
  for (PassStatisticValue &value : takePassStatistics(impl.get()))
    if (value.value)
      impl->report.statistics.push_back(std::move(value));
}
