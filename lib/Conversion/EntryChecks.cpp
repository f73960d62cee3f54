//===- EntryChecks.cpp - the input program's size relations at entry ------===//
//
// The lowering's run-time checks see the optimized program. Where the
// optimizer replaced ops that tied two sizes together by ones that do not
// (x1·W and x2·W with x1, x2 of different row counts become one GEMM over
// concat(x1, x2), which runs), a call the input program forbids would go
// through. Before optimizing, this pass writes each such relation as a
// cf.assert at function entry, in terms of the arguments' sizes, which no
// later rewrite touches.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "llvm/ADT/StringSet.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_ENTRYCHECKSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

/// A size as an affine function of the function arguments' sizes.
struct ArgumentSize {
  AffineMap map;
  ValueDimList operands;

  /// Identifies the size for de-duplication ("(d0) -> (d0) : 1.0").
  std::string key() const {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << map;
    for (auto [value, dim] : operands)
      os << " : " << cast<BlockArgument>(value).getArgNumber() << "."
         << dim.value_or(-1);
    return s;
  }
  bool isConstant() const { return map.isSingleConstant(); }

  /// " (dimension #d of argument a of @f)" when the size is exactly that.
  std::string describe(func::FuncOp fn) const {
    if (operands.size() != 1 || !operands[0].second ||
        !isa<AffineDimExpr, AffineSymbolExpr>(map.getResult(0)))
      return "";
    return " (dimension #" + std::to_string(*operands[0].second) +
           " of argument " +
           std::to_string(
               cast<BlockArgument>(operands[0].first).getArgNumber()) +
           " of @" + fn.getName().str() + ")";
  }

  Value materialize(OpBuilder &b, Location loc) const {
    SmallVector<Value> values;
    for (auto [value, dim] : operands)
      values.push_back(
          dim ? tensor::DimOp::create(b, loc, value, *dim).getResult() : value);
    return affine::expandAffineExpr(
        b, loc, map.getResult(0),
        ValueRange(values).take_front(map.getNumDims()),
        ValueRange(values).drop_front(map.getNumDims()));
  }
};

struct EntryChecksPass
    : public linfuse::impl::EntryChecksPassBase<EntryChecksPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    Block *entry = &fn.getBody().front();
    // Sizes are expressed in the arguments' sizes (and index arguments).
    auto atArgument = [&](Value v, std::optional<int64_t>,
                          ValueBoundsConstraintSet &) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == entry;
    };
    auto sizeOf = [&](Value v, int64_t dim) -> std::optional<ArgumentSize> {
      ArgumentSize size;
      if (failed(ValueBoundsConstraintSet::computeBound(
              size.map, size.operands, presburger::BoundType::EQ,
              ValueBoundsConstraintSet::Variable(v, dim), atArgument)))
        return std::nullopt;
      for (auto [value, d] : size.operands)
        if (!isa<BlockArgument>(value) ||
            (d && !isa<RankedTensorType>(value.getType())))
          return std::nullopt;
      return size;
    };

    OpBuilder b = OpBuilder::atBlockBegin(entry);
    llvm::StringSet<> stated;
    // Only ops that run on every call: one in a loop or a branch may
    // relate sizes that differ when it does not run.
    for (Operation &op : llvm::make_early_inc_range(*entry)) {
      auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
      if (!linalgOp || !linalgOp.hasPureTensorSemantics())
        continue;
      // Loop dimension -> the operand dimensions indexed by it alone.
      SmallVector<SmallVector<std::pair<OpOperand *, unsigned>>> byLoop(
          linalgOp.getNumLoops());
      for (OpOperand &operand : op.getOpOperands()) {
        if (!isa<RankedTensorType>(operand.get().getType()))
          continue;
        AffineMap map = linalgOp.getMatchingIndexingMap(&operand);
        for (auto [i, expr] : llvm::enumerate(map.getResults()))
          if (auto d = dyn_cast<AffineDimExpr>(expr))
            byLoop[d.getPosition()].push_back({&operand, unsigned(i)});
      }
      for (auto &uses : byLoop) {
        if (uses.size() < 2)
          continue;
        auto [first, firstDim] = uses.front();
        std::optional<ArgumentSize> reference;
        for (auto [operand, dim] : ArrayRef(uses).drop_front()) {
          ValueBoundsConstraintSet::Variable lhs(first->get(), firstDim),
              rhs(operand->get(), dim);
          FailureOr<bool> equal = ValueBoundsConstraintSet::areEqual(lhs, rhs);
          if (succeeded(equal) && *equal)
            continue;
          if (!reference)
            reference = sizeOf(first->get(), firstDim);
          std::optional<ArgumentSize> other = sizeOf(operand->get(), dim);
          if (!reference || !other)
            continue;
          std::string a = reference->key(), o = other->key();
          if (a == o || (reference->isConstant() && other->isConstant()) ||
              !stated.insert(a < o ? a + "|" + o : o + "|" + a).second)
            continue;
          Location loc = op.getLoc();
          Value expected = reference->materialize(b, loc);
          Value actual = other->materialize(b, loc);
          Value cond = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             expected, actual);
          cf::AssertOp::create(b, loc, cond,
                               message(fn, op, *operand, dim, *other, *first,
                                       firstDim, *reference));
        }
      }
    }
  }

  /// Upstream's layout ("^ <reason>", "Location: loc(...)"), which the
  /// JIT's trap turns into one line.
  static std::string message(func::FuncOp fn, Operation &op, OpOperand &operand,
                             unsigned dim, const ArgumentSize &size,
                             OpOperand &reference, unsigned referenceDim,
                             const ArgumentSize &referenceSize) {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    op.getLoc().print(os);
    return "ERROR: Runtime op verification failed\n^ dimension #" +
           std::to_string(dim) + " of operand #" +
           std::to_string(operand.getOperandNumber()) + size.describe(fn) +
           " differs from dimension #" + std::to_string(referenceDim) +
           " of operand #" + std::to_string(reference.getOperandNumber()) +
           referenceSize.describe(fn) + " of " +
           op.getName().getStringRef().str() +
           ", which iterate together\nLocation: " + loc;
  }
};

} // namespace
