//===- MatmulMatchers.h - recognize matmuls and what feeds them ---*- C++
//-*-===//
//
// Analysis shared by linfuse's graph rewrites: which linalg ops are plain
// matmuls, in which layout their weight is stored (looking through a
// torch-mlir style `linalg.transpose`), and whether a bias-add follows them.
// Nothing here changes IR.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULMATCHERS_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULMATCHERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Value.h"
#include <optional>

namespace mlir {
namespace linfuse {

/// Storage layout of a matmul's right-hand side ("weight"):
/// `KN` is the math layout (x[M,K] · W[K,N]); `NK` is nn.Linear's `[out, in]`.
enum class WeightLayout { KN, NK };

/// A bias vector added to every row of a matmul result.
struct BiasAdd {
  /// The op adding the bias: a `linalg.generic` or a `linalg.add`.
  Operation *op = nullptr;
  /// The 1-D bias of length N.
  Value bias;
  /// The op broadcasting `bias` to the result's shape for `op`, if any (a
  /// `linalg.broadcast`, or torch-mlir's broadcasting `linalg.generic`): dead
  /// once `op` is gone, unless something else reads it.
  Operation *broadcast = nullptr;
  Value result() const { return op->getResult(0); }
};

/// A `linalg.matmul` / `linalg.batch_matmul` on tensors in a form linfuse can
/// merge or fold.
struct MatmulInfo {
  linalg::LinalgOp op;
  /// The matmul's indexing maps (A, B, C).
  SmallVector<AffineMap, 3> maps;
  bool batched = false;
  /// Left operand as consumed by the matmul and its indexing map.
  Value lhs;
  AffineMap lhsMap;
  bool lhsTransposed = false;
  /// The weight at its source: `rhs`, or the input of a `linalg.transpose`
  /// producing `rhs`. `layout` is the layout of `weight`, not of `rhs`.
  Value rhs;
  Value weight;
  WeightLayout layout = WeightLayout::KN;
  /// `linalg.transpose` looked through, if any.
  Operation *weightTranspose = nullptr;
  Value init;
  /// Static sizes (batch is ShapedType::kDynamic when unknown).
  int64_t batch = 1;
  int64_t k = 0;
  int64_t n = 0;
  /// A trailing bias-add that is the matmul result's only user.
  std::optional<BiasAdd> biasAdd;

  Type lhsElementType() const;
  Type weightElementType() const;
  Type resultElementType() const;
  /// The value the rest of the program consumes: the bias-add result if
  /// there is one, else the matmul result.
  Value finalResult() const;
  /// Size in bytes of the weight (0 when its batch is dynamic: unknown
  /// until run time).
  int64_t weightBytes() const;
};

/// Recognizes `op` as a mergeable/foldable matmul: `linalg.matmul` or
/// `linalg.batch_matmul` on ranked tensors with float element types, A and B
/// of one type, plain or transposed A/B indexing maps, static K and N (a
/// batch matmul's weight may have a dynamic batch).
std::optional<MatmulInfo> matchMatmul(Operation *op);

/// Whether the element types of a linalg matmul are a GEMM linfuse runs:
/// float A and B of one type into a float C, or i8 A and B read as signed
/// (the default `cast_signed`; unsigned i8 has no library GEMM) into i32.
bool isGemmElementTypes(Operation *op, Type ab, Type b, Type c);

/// Recognizes `user` as adding a length-N vector to `matmulResult` along its
/// last dimension (broadcast over the others), with the result's type: a
/// `linalg.generic` reading the vector along the last dim or through a row
/// broadcast, whose body adds it (possibly multiplied by exactly 1, torch's
/// `alpha`), or a `linalg.add` of a row broadcast. Any other multiplier is
/// not a bias-add.
std::optional<BiasAdd> matchBiasAdd(Operation *user, Value matmulResult);

/// The scalar of a `linalg.fill` of a constant into a `tensor.empty`, if
/// `init` is one (the usual zero-initialized accumulator).
std::optional<Attribute> matchConstantFill(Value init);

/// The one op a `linalg.generic` producing `v` applies to every element of
/// its single input, if that is all it does: tensors, identity maps, all
/// loops parallel, its destination's value unused, a body of that op on
/// the input element and the yield of its result (an importer's `extf` /
/// `truncf` of a whole tensor). Null otherwise; `input` is then unset.
Operation *matchElementwiseUnary(Value v, Value &input);

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_MATMULMATCHERS_H
