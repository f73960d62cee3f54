//===- FoldConstantWeights.cpp - weight concat/transpose at compile time --===//
//
// After merging, constant weights reach the merged matmul through
// `tensor.concat` (and, for mixed layouts or torch-mlir imports,
// `linalg.transpose` and element-wise `extf`/`truncf` casts). Folding them here
// means the packed weight is built once by the compiler instead of on every
// call.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cstring>

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_FOLDCONSTANTWEIGHTSPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

namespace {
/// Replaces `op`'s result with a constant of `type` whose bytes `fill`
/// writes.
LogicalResult
replaceWithConstant(PatternRewriter &rewriter, Operation *op,
                    RankedTensorType type, int64_t threshold,
                    function_ref<LogicalResult(MutableArrayRef<char>)> fill) {
  ElementsAttr value = makeConstant(type, threshold, fill);
  if (!value)
    return rewriter.notifyMatchFailure(op, "unsupported constant data");
  rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, value);
  return success();
}

struct FoldConcatOfConstants : OpRewritePattern<tensor::ConcatOp> {
  FoldConcatOfConstants(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(tensor::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getResultType();
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic result shape");
    SmallVector<ElementsAttr> parts;
    for (Value input : op.getInputs()) {
      ElementsAttr attr;
      if (!matchPattern(input, m_Constant(&attr)))
        return rewriter.notifyMatchFailure(op, "non-constant input");
      parts.push_back(attr);
    }
    int64_t dim = op.getDim();
    return replaceWithConstant(
        rewriter, op, type, threshold, [&](MutableArrayRef<char> out) {
          return concatConstantBytes(parts, dim, type, out);
        });
  }

  int64_t threshold;
};

struct FoldTransposeOfConstant : OpRewritePattern<linalg::TransposeOp> {
  FoldTransposeOfConstant(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    ElementsAttr input;
    if (!matchPattern(op.getInput(), m_Constant(&input)))
      return rewriter.notifyMatchFailure(op, "non-constant input");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    ArrayRef<int64_t> perm = op.getPermutation();
    return replaceWithConstant(
        rewriter, op, type, threshold, [&](MutableArrayRef<char> out) {
          return transposeConstantBytes(input, perm, out);
        });
  }

  int64_t threshold;
};

/// A reshape of a constant (`tensor.collapse_shape` / `tensor.expand_shape`,
/// as importers emit around weights) keeps its row-major bytes.
template <typename ReshapeOp>
struct FoldReshapeOfConstant : OpRewritePattern<ReshapeOp> {
  FoldReshapeOfConstant(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern<ReshapeOp>(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    ElementsAttr input;
    if (!matchPattern(op.getSrc(), m_Constant(&input)))
      return rewriter.notifyMatchFailure(op, "non-constant input");
    RankedTensorType type = op.getResultType();
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    return replaceWithConstant(
        rewriter, op, type, threshold,
        [&](MutableArrayRef<char> out) -> LogicalResult {
          FailureOr<ConstantBytes> in = getConstantBytes(input);
          if (failed(in) || in->data.size() != out.size())
            return failure();
          std::memcpy(out.data(), in->data.data(), out.size());
          return success();
        });
  }

  int64_t threshold;
};

/// The float cast a `linalg.generic` applies to each element of its one
/// input, identity maps, nothing else (`arith.extf` / `arith.truncf`: how
/// importers turn bf16/f16 weights into f32 ones); null otherwise.
Operation *matchElementwiseFloatCast(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op->getNumResults() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return nullptr;
  Block &body = *op.getBlock();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return nullptr;
  Operation *castOp = &body.front();
  if (!isa<arith::ExtFOp, arith::TruncFOp>(castOp) ||
      castOp->getOperand(0) !=
          op.getMatchingBlockArgument(op.getDpsInputOperand(0)) ||
      body.getTerminator()->getOperands() != castOp->getResults())
    return nullptr;
  // A truncf with an explicit rounding mode is not the round-to-nearest-even
  // this fold computes.
  if (auto trunc = dyn_cast<arith::TruncFOp>(castOp);
      trunc && trunc.getRoundingmodeAttr())
    return nullptr;
  return castOp;
}

/// A weight stored in bf16/f16 and cast to f32 for the GEMM (torch-mlir
/// upcasts bf16 linears with a bias): the cast weight is a constant too.
struct FoldCastOfConstant : OpRewritePattern<linalg::GenericOp> {
  FoldCastOfConstant(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!matchElementwiseFloatCast(op))
      return rewriter.notifyMatchFailure(op, "not an element-wise float cast");
    ElementsAttr input;
    if (!matchPattern(op.getDpsInputOperand(0)->get(), m_Constant(&input)))
      return rewriter.notifyMatchFailure(op, "non-constant input");
    auto type = staticTensorType(op->getResult(0).getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    auto from = dyn_cast<FloatType>(input.getElementType());
    auto to = dyn_cast<FloatType>(type.getElementType());
    if (!from || !to || from.getWidth() % 8 || to.getWidth() % 8 ||
        from.getWidth() > 64 || to.getWidth() > 64)
      return rewriter.notifyMatchFailure(op, "unsupported element types");
    return replaceWithConstant(
        rewriter, op, type, threshold,
        [&](MutableArrayRef<char> out) -> LogicalResult {
          FailureOr<ConstantBytes> in = getConstantBytes(input);
          if (failed(in))
            return failure();
          size_t inBytes = from.getWidth() / 8, outBytes = to.getWidth() / 8;
          int64_t count = type.getNumElements();
          if (in->data.size() != count * inBytes ||
              out.size() != count * outBytes)
            return failure();
          // bf16 -> f32, the common case (a large weight), is exact: the
          // bf16 bits are the f32's upper half.
          if (from.isBF16() && to.isF32()) {
            for (int64_t i = 0; i < count; ++i) {
              uint16_t half;
              std::memcpy(&half, in->data.data() + i * 2, 2);
              uint32_t word = uint32_t(half) << 16;
              std::memcpy(out.data() + i * 4, &word, 4);
            }
            return success();
          }
          for (int64_t i = 0; i < count; ++i) {
            uint64_t bits = 0;
            std::memcpy(&bits, in->data.data() + i * inBytes, inBytes);
            APFloat value(from.getFloatSemantics(),
                          APInt(from.getWidth(), bits));
            bool losesInfo;
            value.convert(to.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                          &losesInfo);
            uint64_t result = value.bitcastToAPInt().getZExtValue();
            std::memcpy(out.data() + i * outBytes, &result, outBytes);
          }
          return success();
        });
  }

  static RankedTensorType staticTensorType(Type t) {
    auto type = dyn_cast<RankedTensorType>(t);
    return type && type.hasStaticShape() ? type : RankedTensorType();
  }

  int64_t threshold;
};

struct FoldConstantWeightsPass
    : public linfuse::impl::FoldConstantWeightsPassBase<
          FoldConstantWeightsPass> {
  using FoldConstantWeightsPassBase::FoldConstantWeightsPassBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFoldConstantWeightsPatterns(patterns, resourceThreshold);
    // Count what gets folded through the rewriter's notifications.
    struct Counter : public RewriterBase::Listener {
      void notifyOperationReplaced(Operation *op, ValueRange) override {
        if (!isa<tensor::ConcatOp, linalg::TransposeOp, linalg::GenericOp,
                 tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op))
          return;
        ++folded;
        bytes += getByteSize(cast<ShapedType>(op->getResult(0).getType()));
      }
      int64_t folded = 0, bytes = 0;
    } counter;
    GreedyRewriteConfig config;
    config.setListener(&counter);
    // Only the ops the patterns rewrite: a full canonicalization belongs to
    // the pipeline, not to this pass.
    config.setStrictness(GreedyRewriteStrictness::AnyOp);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    numFolded += counter.folded;
    numBytesFolded += counter.bytes;
  }

  PassStatistic numFolded{this, "constants-folded",
                          "Number of concat/transpose/cast ops folded into "
                          "constants"};
  PassStatistic numBytesFolded{this, "bytes-folded",
                               "Bytes of constant data produced by folding"};
};
} // namespace

void mlir::linfuse::populateFoldConstantWeightsPatterns(
    RewritePatternSet &patterns, int64_t resourceThreshold) {
  patterns
      .add<FoldConcatOfConstants, FoldTransposeOfConstant, FoldCastOfConstant,
           FoldReshapeOfConstant<tensor::CollapseShapeOp>,
           FoldReshapeOfConstant<tensor::ExpandShapeOp>>(patterns.getContext(),
                                                         resourceThreshold);
}
