//===- WeightProducts.cpp - weight algebra emitted as IR ------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/WeightProducts.h"
#include "linfuse/Dialect/Linfuse/Transforms/MatmulBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::linfuse;

WeightProductBuilder::WeightProductBuilder(OpBuilder &b, Location loc,
                                           Type weightType)
    : b(b), loc(loc), acc(accumulationType(weightType)) {}

Type WeightProductBuilder::accumulationType(Type weightType) {
  // As the compile-time fold: f64 for f32 (and f64) weights. f16/bf16 have
  // 11 and 8 significant bits, so f32 sums round them correctly in all but
  // pathological cancellations, at half the cost of f64 (which GPUs run
  // slowly).
  if (weightType.getIntOrFloatBitWidth() >= 32)
    return Float64Type::get(weightType.getContext());
  return Float32Type::get(weightType.getContext());
}

/// An element-wise linalg.generic over `type` reading `inputs` through
/// `maps` (the output map is the identity).
static Value
buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                 ValueRange inputs, ArrayRef<AffineMap> maps,
                 function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  Value empty = tensor::EmptyOp::create(b, loc, type, ValueRange{});
  SmallVector<AffineMap> allMaps(maps);
  allMaps.push_back(
      AffineMap::getMultiDimIdentityMap(type.getRank(), b.getContext()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, inputs, ValueRange{empty}, allMaps,
             iterators,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       body(nb, nloc, args.drop_back()));
             })
      ->getResult(0);
}

Value WeightProductBuilder::convert(Value v, Type elementType) {
  auto type = cast<RankedTensorType>(v.getType());
  Type from = type.getElementType();
  if (from == elementType)
    return v;
  AffineMap id =
      AffineMap::getMultiDimIdentityMap(type.getRank(), b.getContext());
  bool widen =
      from.getIntOrFloatBitWidth() < elementType.getIntOrFloatBitWidth();
  return buildElementwise(
      b, loc, type.clone(elementType), v, {id},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
        if (widen)
          return arith::ExtFOp::create(nb, nloc, elementType, args[0]);
        return arith::TruncFOp::create(nb, nloc, elementType, args[0]);
      });
}

Value WeightProductBuilder::transpose(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  auto transposed = RankedTensorType::get(
      {type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
  Value empty = tensor::EmptyOp::create(b, loc, transposed, ValueRange{});
  return linalg::TransposeOp::create(b, loc, v, empty, ArrayRef<int64_t>{1, 0})
      ->getResult(0);
}

Value WeightProductBuilder::load(Value v, bool transposed) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 1) {
    auto row =
        RankedTensorType::get({1, type.getDimSize(0)}, type.getElementType());
    v = tensor::ExpandShapeOp::create(b, loc, row, v,
                                      ArrayRef<ReassociationIndices>{{0, 1}});
  }
  v = convert(v, acc);
  return transposed ? transpose(v) : v;
}

Value WeightProductBuilder::multiply(Value a, Value bm) {
  return buildMatmul(b, loc, a, bm, acc);
}

Value WeightProductBuilder::elementwise(
    Value a, Value other, AffineMap otherMap,
    function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  auto type = cast<RankedTensorType>(a.getType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  return buildElementwise(b, loc, type, {a, other}, {id, otherMap},
                          [&](OpBuilder &nb, Location nloc, ValueRange args) {
                            return combine(nb, nloc, args[0], args[1]);
                          });
}

Value WeightProductBuilder::addScaled(Value a, Value other, double s) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  return elementwise(
      a, other, id, [&](OpBuilder &nb, Location nloc, Value x, Value y) {
        if (s != 1.0) {
          Value sv =
              arith::ConstantOp::create(nb, nloc, nb.getFloatAttr(acc, s));
          y = arith::MulFOp::create(nb, nloc, y, sv);
        }
        return arith::AddFOp::create(nb, nloc, x, y);
      });
}

Value WeightProductBuilder::scale(Value a, double s) {
  if (s == 1.0)
    return a;
  auto type = cast<RankedTensorType>(a.getType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  Value sv = arith::ConstantOp::create(b, loc, b.getFloatAttr(acc, s));
  return buildElementwise(
      b, loc, type, a, {id},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        return arith::MulFOp::create(nb, nloc, args[0], sv).getResult();
      });
}

Value WeightProductBuilder::scaleRows(Value m, Value g) {
  // g is [1, K]; element (k, n) of m reads g[0, k].
  MLIRContext *ctx = b.getContext();
  AffineMap gMap = AffineMap::get(
      2, 0, {getAffineConstantExpr(0, ctx), getAffineDimExpr(0, ctx)}, ctx);
  return elementwise(m, g, gMap,
                     [](OpBuilder &nb, Location nloc, Value x, Value y) {
                       return arith::MulFOp::create(nb, nloc, x, y);
                     });
}

Value WeightProductBuilder::store(Value m, RankedTensorType type,
                                  bool transposed) {
  if (transposed)
    m = transpose(m);
  m = convert(m, type.getElementType());
  if (type.getRank() == 1)
    m = tensor::CollapseShapeOp::create(b, loc, type, m,
                                        ArrayRef<ReassociationIndices>{{0, 1}});
  return m;
}
