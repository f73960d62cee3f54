//===- WeightValues.cpp - what a value is computed from -------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/WeightValues.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::linfuse;

bool mlir::linfuse::isWeightArgument(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto fn = dyn_cast_or_null<func::FuncOp>(arg.getOwner()->getParentOp());
  return fn && arg.getOwner()->isEntryBlock() &&
         fn.getArgAttr(arg.getArgNumber(), kWeightArgAttr);
}

namespace {
/// Depth-first over producers, giving up after `budget` ops.
struct OriginSearch {
  llvm::DenseMap<Value, ValueOrigin> seen;
  int budget = 64;

  ValueOrigin visit(Value v) {
    auto it = seen.find(v);
    if (it != seen.end())
      return it->second;
    ValueOrigin origin = compute(v);
    seen[v] = origin;
    return origin;
  }

  ValueOrigin compute(Value v) {
    if (isWeightArgument(v))
      return ValueOrigin::Weights;
    Operation *def = v.getDefiningOp();
    if (!def || --budget < 0)
      return ValueOrigin::Runtime;
    if (def->hasTrait<OpTrait::ConstantLike>())
      return ValueOrigin::Constant;
    if (!isMemoryEffectFree(def))
      return ValueOrigin::Runtime;
    // Operands, and values a region captures from above (a scalar constant
    // in a linalg.generic body).
    SetVector<Value> reads(def->operand_begin(), def->operand_end());
    for (Region &region : def->getRegions())
      getUsedValuesDefinedAbove(region, reads);
    ValueOrigin origin = ValueOrigin::Constant;
    for (Value operand : reads) {
      ValueOrigin o = visit(operand);
      if (o == ValueOrigin::Runtime)
        return o;
      if (o == ValueOrigin::Weights)
        origin = o;
    }
    return origin;
  }
};
} // namespace

ValueOrigin mlir::linfuse::getValueOrigin(Value value) {
  return OriginSearch().visit(value);
}
