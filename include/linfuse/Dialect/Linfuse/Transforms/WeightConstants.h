//===- WeightConstants.h - compile-time weight data movement ------*- C++ -*-===//
//
// Concatenation and transposition of constant tensors through their raw
// buffers: one memcpy per contiguous run, never an attribute iteration per
// element, so folding multi-megabyte weights stays fast.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

#include <vector>

namespace mlir {
namespace linfuse {

/// The row-major bytes of a constant tensor, splats expanded. Fails for
/// element types that are not byte-sized (i1, i4) and for resources whose
/// blob is missing.
FailureOr<std::vector<char>> getConstantBytes(ElementsAttr attr);

/// Concatenates `parts` along `dim` into `resultType`.
FailureOr<std::vector<char>> concatConstantBytes(ArrayRef<ElementsAttr> parts,
                                                 int64_t dim,
                                                 RankedTensorType resultType);

/// `result[i_perm[0], ...] = input[i_0, ...]` as linalg.transpose defines
/// it: result dim j is input dim `permutation[j]`.
FailureOr<std::vector<char>> transposeConstantBytes(
    ElementsAttr input, ArrayRef<int64_t> permutation);

/// An attribute holding `bytes` of `type`: `dense<...>` below
/// `resourceThreshold` bytes, a `dense_resource` blob at or above it.
ElementsAttr makeConstant(RankedTensorType type, ArrayRef<char> bytes,
                          int64_t resourceThreshold,
                          StringRef resourceName = "linfuse_weight");

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H
