//===- RejectUndefinedOps.cpp - verifying but undefined ops are errors ----===//
//
// `tensor.dim %t, %c5` on a rank-2 tensor verifies (the index is an
// operand), folds to nothing, and lowers to a read of a descriptor word
// that does not exist: the compiled function crashed. Constant indices are
// known now, so such ops are rejected here, at their location; the
// run-time checks cover the indices known only later.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_REJECTUNDEFINEDOPSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

std::optional<int64_t> constantIndex(Value v) {
  APInt value;
  if (!matchPattern(v, m_ConstantInt(&value)))
    return std::nullopt;
  return value.getSExtValue();
}

/// A dimension index outside [0, rank).
LogicalResult checkDim(Operation *op, Value source, Value index) {
  std::optional<int64_t> i = constantIndex(index);
  auto type = dyn_cast<ShapedType>(source.getType());
  if (!i || !type || !type.hasRank() || (*i >= 0 && *i < type.getRank()))
    return success();
  return op->emitError() << "dimension index " << *i
                         << " is out of range for rank " << type.getRank()
                         << " (the result would be undefined)";
}

/// Element indices outside a static dimension.
LogicalResult checkIndices(Operation *op, Value source, ValueRange indices) {
  auto type = dyn_cast<ShapedType>(source.getType());
  if (!type || !type.hasRank())
    return success();
  for (auto [d, index] : llvm::enumerate(indices)) {
    std::optional<int64_t> i = constantIndex(index);
    if (!i || type.isDynamicDim(d))
      continue;
    if (*i < 0 || *i >= type.getDimSize(d))
      return op->emitError()
             << "index " << *i << " is out of bounds for dimension " << d
             << " of size " << type.getDimSize(d)
             << " (the access would be undefined)";
  }
  return success();
}

struct RejectUndefinedOpsPass
    : public linfuse::impl::RejectUndefinedOpsPassBase<RejectUndefinedOpsPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation()->walk([&](Operation *op) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([](tensor::DimOp dim) {
                return checkDim(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](memref::DimOp dim) {
                return checkDim(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](tensor::ExtractOp e) {
                return checkIndices(e, e.getTensor(), e.getIndices());
              })
              .Case([](tensor::InsertOp i) {
                return checkIndices(i, i.getDest(), i.getIndices());
              })
              .Case([](memref::LoadOp l) {
                return checkIndices(l, l.getMemref(), l.getIndices());
              })
              .Case([](memref::StoreOp s) {
                return checkIndices(s, s.getMemref(), s.getIndices());
              })
              .Default([](Operation *) { return success(); });
      failed |= mlir::failed(result);
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
