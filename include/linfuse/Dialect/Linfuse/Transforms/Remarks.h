//===- Remarks.h - linfuse optimization remarks -------------------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_REMARKS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_REMARKS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/Twine.h"

namespace mlir {
namespace linfuse {

/// True when `--linfuse-remarks` was given (or `setRemarksEnabled(true)`),
/// or while a remark collector is registered.
bool remarksEnabled();
void setRemarksEnabled(bool enabled);

/// A driver that collects remarks (PassReportCollector) registers for the
/// duration of its pipeline; thread-safe, and counted, so that pipelines
/// running at the same time keep remarks on for each other.
void addRemarkCollector();
void removeRemarkCollector();

/// Emits `message` as a remark at `op` when remarks are enabled.
void emitOptimizationRemark(Operation *op, const llvm::Twine &message);

/// "%x" / "%arg0": how a value is spelled in the printed IR, for remarks.
std::string describeValue(Value value);

/// "?x2304": a shape in MLIR's notation.
std::string describeShape(ArrayRef<int64_t> shape);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_REMARKS_H
