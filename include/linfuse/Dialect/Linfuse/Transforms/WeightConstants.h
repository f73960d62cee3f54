//===- WeightConstants.h - compile-time weight data movement ------*- C++
//-*-===//
//
// Concatenation and transposition of constant tensors through their raw
// buffers: one memcpy per contiguous run, never an attribute iteration per
// element, written straight into the result's storage, so folding
// multi-megabyte weights costs about one pass over the bytes.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

#include <vector>

namespace mlir {
namespace linfuse {

/// Bytes of a static-shaped tensor of `type` (elements rounded up to bytes).
int64_t getByteSize(ShapedType type);

/// The row-major bytes of a constant tensor: a view of the attribute's own
/// storage, or (for splats) an expanded copy held in `storage`.
struct ConstantBytes {
  ArrayRef<char> data;
  std::vector<char> storage;
};

/// Fails for element types that are not byte-sized (i1, i4), dynamic shapes,
/// and resources whose blob is missing.
FailureOr<ConstantBytes> getConstantBytes(ElementsAttr attr);

/// Writes `parts` concatenated along `dim` (giving `resultType`) into `out`,
/// which must hold exactly the result's bytes.
LogicalResult concatConstantBytes(ArrayRef<ElementsAttr> parts, int64_t dim,
                                  RankedTensorType resultType,
                                  MutableArrayRef<char> out);

/// Writes `input` transposed as linalg.transpose defines it (result dim j is
/// input dim `permutation[j]`) into `out`.
LogicalResult transposeConstantBytes(ElementsAttr input,
                                     ArrayRef<int64_t> permutation,
                                     MutableArrayRef<char> out);

/// Allocates the storage of a constant of `type`, lets `fill` write its
/// bytes, and returns it as `dense<...>` below `resourceThreshold` bytes or a
/// `dense_resource` blob at or above it. Null when `fill` fails.
ElementsAttr
makeConstant(RankedTensorType type, int64_t resourceThreshold,
             function_ref<LogicalResult(MutableArrayRef<char>)> fill,
             StringRef resourceName = "linfuse_weight");

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_WEIGHTCONSTANTS_H
