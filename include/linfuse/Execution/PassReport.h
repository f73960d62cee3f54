//===- PassReport.h - what the linfuse passes did, as data --------*- C++
//-*-===//
//
// The report a driver hands its users after a pipeline ran: every
// optimization remark (what merged, what folded, what was left alone and
// why) attributed to the pass that emitted it, and the passes' statistics.
// linfuse-opt prints the same with --linfuse-remarks and
// -mlir-pass-statistics; the Python bindings return it as objects.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_EXECUTION_PASSREPORT_H
#define LINFUSE_EXECUTION_PASSREPORT_H

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class PassManager;
namespace linfuse {

/// Where a remark points, taken apart: `loc("q_proj"("model.py":12:8))`
/// gives name "q_proj", file "model.py", line 12, column 8.
struct SourceLocation {
  std::string name;
  std::string file;
  unsigned line = 0, column = 0;

  /// "model.py:12:8 (q_proj)", "model.py:12:8", "q_proj" or "unknown".
  std::string str() const;
};

/// Takes a location apart (through NameLoc, CallSiteLoc and FusedLoc).
SourceLocation describeLocation(Location loc);

struct Remark {
  /// The emitting pass's argument ("linfuse-merge-parallel-matmuls").
  std::string pass;
  SourceLocation location;
  std::string message;
};

struct PassReport {
  std::vector<Remark> remarks;
  /// What linfuse's passes counted during the run (see PassStatistics.h),
  /// in first-counted order; counters that stayed at zero are left out.
  std::vector<PassStatisticValue> statistics;
};

/// Fills `report` while `pm` runs: attach before pm.run(), call finish()
/// after it (statistics are read then, as the difference from when the
/// collector was made: pipelines running at the same time in one process mix
/// their counts). Keeps linfuse's remarks on for its lifetime. Remarks are
/// consumed; every other diagnostic goes on to the handlers registered before
/// this collector.
class PassReportCollector {
public:
  PassReportCollector(PassManager &pm, PassReport &report);
  ~PassReportCollector();
  void finish();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_EXECUTION_PASSREPORT_H
