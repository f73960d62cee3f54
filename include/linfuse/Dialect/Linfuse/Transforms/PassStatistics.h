//===- PassStatistics.h - statistics that count in release builds -*- C++
//-*-===//
//
// mlir::Pass::Statistic derives from llvm::Statistic, which is a no-op when
// LLVM is built with NDEBUG and without LLVM_FORCE_ENABLE_STATS -- as
// Debian's libMLIR is. linfuse's passes count with this class instead; the
// linfuse tools print the totals for `-mlir-pass-statistics`.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSSTATISTICS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSSTATISTICS_H

#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
namespace linfuse {

/// One named counter of a pass. Clones of a pass (one per thread) add into
/// the same process-wide total, keyed by pass argument and name.
class PassStatistic {
public:
  PassStatistic(Pass *owner, const char *name, const char *description)
      : owner(owner), name(name), description(description) {}

  PassStatistic &operator+=(uint64_t delta);
  PassStatistic &operator++() { return *this += 1; }

private:
  Pass *owner;
  const char *name;
  const char *description;
};

/// Total of one statistic so far (0 when never counted).
uint64_t getPassStatistic(llvm::StringRef passArgument, llvm::StringRef name);

/// One counter's value.
struct PassStatisticValue {
  std::string pass, name;
  uint64_t value = 0;
};

/// Makes `scope` (null: none) the calling thread's statistic scope and
/// returns the previous one: while it is set, what the thread counts also
/// adds to `scope`'s own totals. A pipeline's report sets it around every
/// pass it runs, on whichever thread runs it, so that its totals stay exact
/// while other pipelines count at the same time (linfuse.torch compiles
/// partitions on several threads).
const void *swapPassStatisticScope(const void *scope);

/// `scope`'s totals, in first-counted order; forgets them.
std::vector<PassStatisticValue> takePassStatistics(const void *scope);

/// Prints every counted statistic, grouped by pass, in the layout of MLIR's
/// pass statistics report. Prints nothing when nothing was counted.
void printPassStatistics(llvm::raw_ostream &os);

/// Forgets every total (for embedders running several pipelines).
void resetPassStatistics();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSSTATISTICS_H
