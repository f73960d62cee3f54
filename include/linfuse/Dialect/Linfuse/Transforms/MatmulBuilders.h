//===- MatmulBuilders.h - IR building blocks of linfuse's rewrites -*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULBUILDERS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULBUILDERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace linfuse {

/// Values for the dynamic leading dims (batch, M) of a matmul result of
/// `resultType`, read with tensor.dim from `lhs` through its indexing map.
SmallVector<Value> dynamicSizesFromLhs(OpBuilder &b, Location loc, Value lhs,
                                       AffineMap lhsMap,
                                       RankedTensorType resultType);

/// `linalg.fill(scalar)` of a `tensor.empty` of `type`.
Value buildFilledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                        ValueRange dynamicSizes, Value scalar);

/// `result + broadcast(bias)` along the last dim, as a `linalg.generic` (the
/// form linfuse's matchers and the raise-to-gemm lowering recognize).
Value buildBiasAdd(OpBuilder &b, Location loc, Value result, Value bias,
                   ValueRange dynamicSizes);

/// A plain (default-maps) rank-2 `linalg.matmul` of `lhs` [M, K] and a
/// [K, N] `weight` into a zero-filled accumulator of `resultElementType`.
Value buildMatmul(OpBuilder &b, Location loc, Value lhs, Value weight,
                  Type resultElementType);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULBUILDERS_H
