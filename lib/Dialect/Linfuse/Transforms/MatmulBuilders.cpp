//===- MatmulBuilders.cpp - IR building blocks of linfuse's rewrites ------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::linfuse;

SmallVector<Value>
mlir::linfuse::dynamicSizesFromLhs(OpBuilder &b, Location loc, Value lhs,
                                   AffineMap lhsMap,
                                   RankedTensorType resultType) {
  SmallVector<Value> sizes;
  for (int64_t i = 0, e = resultType.getRank() - 1; i < e; ++i) {
    if (!resultType.isDynamicDim(i))
      continue;
    // Result dim i is loop dim i; find it among the LHS map results.
    std::optional<unsigned> pos =
        lhsMap.getResultPosition(getAffineDimExpr(i, b.getContext()));
    sizes.push_back(tensor::DimOp::create(b, loc, lhs, *pos));
  }
  return sizes;
}

Value mlir::linfuse::buildFilledTensor(OpBuilder &b, Location loc,
                                       RankedTensorType type,
                                       ValueRange dynamicSizes, Value scalar) {
  Value empty = tensor::EmptyOp::create(b, loc, type, dynamicSizes);
  return linalg::FillOp::create(b, loc, scalar, empty)->getResult(0);
}

Value mlir::linfuse::buildBiasAdd(OpBuilder &b, Location loc, Value result,
                                  Value bias, ValueRange dynamicSizes) {
  auto type = cast<RankedTensorType>(result.getType());
  int64_t rank = type.getRank();
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap last = AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx));
  Value empty = tensor::EmptyOp::create(b, loc, type, dynamicSizes);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{result, bias}, ValueRange{empty},
      ArrayRef<AffineMap>{id, last, id}, iterators,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value sum = arith::AddFOp::create(nb, nloc, args[0], args[1]);
        linalg::YieldOp::create(nb, nloc, sum);
      });
  return generic->getResult(0);
}

Value mlir::linfuse::buildMatmul(OpBuilder &b, Location loc, Value lhs,
                                 Value weight, Type resultElementType) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto weightType = cast<RankedTensorType>(weight.getType());
  auto type = RankedTensorType::get(
      {lhsType.getDimSize(0), weightType.getDimSize(1)}, resultElementType);
  SmallVector<Value> dyn;
  if (type.isDynamicDim(0))
    dyn.push_back(tensor::DimOp::create(b, loc, lhs, 0));
  Value zero =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(resultElementType, 0.0));
  Value init = buildFilledTensor(b, loc, type, dyn, zero);
  return linalg::MatmulOp::create(b, loc, TypeRange{type},
                                  ValueRange{lhs, weight}, ValueRange{init})
      ->getResult(0);
}
