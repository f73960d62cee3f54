//===- SpecializeContractions.cpp - contractions as named matmuls ---------===//
//
// Importers spell a matmul many ways: `linalg.generic` with a multiply-add
// body (IREE's f16 contractions extend their inputs to f32 in the body),
// `linalg.contract`, `linalg.matvec` / `linalg.vecmat` (decode, M = 1) and
// their batch forms. The rest of linfuse (chain folding, merging, raising to
// a library GEMM) works on `linalg.matmul` / `linalg.batch_matmul`. This
// pass rewrites every contraction that computes a (batch) matmul into that
// form: it recognizes what the op computes (its body and indexing maps),
// not its name.
//
// Upstream's `linalg::specializeGenericOp` is not used: in MLIR 22 it
// drops transposed operand maps (a silently wrong matmul when M is
// dynamic), accepts any pure unary op around the operands (`exp(a) * b`
// becomes a matmul) and an f16 accumulator truncated every step, and
// leaves `linalg.contract`, matvec and vecmat alone. See
// docs/MergeParallelMatmuls.md, "Contractions in any spelling".
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "linfuse-specialize-contractions"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_SPECIALIZECONTRACTIONSPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

namespace {

/// How a contraction is computed by `linalg.matmul` / `linalg.batch_matmul`
/// (loops (b,) m, n, k): which operand is the left one, which operands are
/// transposed, and whether the left operand is a vector that becomes one
/// row (matvec, vecmat: M = 1).
struct MatmulPlan {
  Value lhs, rhs;
  bool batched = false;
  bool lhsTransposed = false;
  bool rhsTransposed = false;
  bool rowVector = false;
  /// When several batch or M loops become one (a linear layer on
  /// [batch, seq, hidden] activations): how the left operand, the right
  /// operand and the result collapse. Empty when nothing collapses.
  SmallVector<ReassociationIndices> lhsGroups, rhsGroups, outGroups;
};

/// Why `body` is not `yield(acc + cvt(a) * cvt(b))`, where `cvt` is
/// nothing or an `arith.extf` to the accumulator's type (the implicit cast
/// of `linalg.matmul`), or the integer form with `arith.addi`, `arith.muli`
/// and `arith.extsi` (linalg.matmul's default `cast_signed`); empty when it
/// is exactly that.
std::string whyNotMultiplyAdd(Block &body) {
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!yield || yield.getNumOperands() != 1 || body.getNumArguments() != 3)
    return "the body does not yield one value";
  BlockArgument a = body.getArgument(0), b = body.getArgument(1),
                acc = body.getArgument(2);
  Operation *reduction = yield.getOperand(0).getDefiningOp();
  if (isa_and_nonnull<arith::TruncFOp>(reduction))
    return "the sum is truncated (arith.truncf) every step: it accumulates "
           "in the narrow type, a GEMM in f32";
  bool integer = isa_and_nonnull<arith::AddIOp>(reduction);
  if (!integer && !isa_and_nonnull<arith::AddFOp>(reduction))
    return reduction ? "the reduction is " +
                           reduction->getName().getStringRef().str() +
                           ", not arith.addf or arith.addi"
                     : "the body yields a block argument";
  Value lhs = reduction->getOperand(0), rhs = reduction->getOperand(1);
  Value product = lhs == acc ? rhs : rhs == acc ? lhs : Value();
  if (!product)
    return "the sum does not add into the accumulator";
  Operation *mul = product.getDefiningOp();
  if (!mul || !(integer ? isa<arith::MulIOp>(mul) : isa<arith::MulFOp>(mul)))
    return "the accumulator is added to something other than a product";
  // An input as the product reads it: directly, or through arith.extf
  // (arith.extsi for integers).
  unsigned extensions = 0;
  bool unsignedExtension = false;
  auto source = [&](Value v) -> Value {
    Operation *def = v.getDefiningOp();
    if (isa_and_nonnull<arith::ExtUIOp>(def))
      unsignedExtension = true;
    if (integer ? isa_and_nonnull<arith::ExtSIOp>(def)
                : isa_and_nonnull<arith::ExtFOp>(def)) {
      ++extensions;
      return def->getOperand(0);
    }
    return v;
  };
  Value p = source(mul->getOperand(0)), q = source(mul->getOperand(1));
  if (unsignedExtension)
    return "a factor is extended unsigned (arith.extui): no library GEMM "
           "reads unsigned i8";
  if (!((p == a && q == b) || (p == b && q == a))) {
    Operation *other =
        p.getDefiningOp() ? p.getDefiningOp() : q.getDefiningOp();
    return other ? "a factor of the product is computed by " +
                       other->getName().getStringRef().str() +
                       " (only an input or its arith.extf keeps it a matmul)"
                 : "the product is not of the two inputs";
  }
  // Nothing else in the body: the multiply-add, the extensions, the yield.
  if (body.getOperations().size() != 3 + extensions)
    return "the body computes more than a multiply-add";
  return "";
}

/// Loop dims read by `map` after its first `skip` results (all results are
/// dims: the maps are projected permutations).
SmallVector<unsigned> dimsAfter(AffineMap map, unsigned skip) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults().drop_front(skip))
    dims.push_back(cast<AffineDimExpr>(e).getPosition());
  return dims;
}

/// Whether `dims` is {first, second} (false) or {second, first} (true).
std::optional<bool> orderOf(ArrayRef<unsigned> dims, unsigned first,
                            unsigned second) {
  if (dims == ArrayRef<unsigned>{first, second})
    return false;
  if (dims == ArrayRef<unsigned>{second, first})
    return true;
  return std::nullopt;
}

/// Why `op` is not a (batch) matmul in another spelling, or its plan.
FailureOr<MatmulPlan> planMatmul(linalg::LinalgOp op, std::string &why) {
  auto fail = [&](const Twine &reason) {
    why = reason.str();
    return failure();
  };
  Type accType = getElementTypeOrSelf(op.getDpsInitOperand(0)->get());
  Type aType = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
  Type bType = getElementTypeOrSelf(op.getDpsInputOperand(1)->get());
  bool floats =
      isa<FloatType>(accType) && isa<FloatType>(aType) && isa<FloatType>(bType);
  bool int8 = aType.isInteger(8) && bType.isInteger(8) && accType.isInteger(32);
  if (!floats && !int8)
    return fail("not a floating-point or i8 x i8 -> i32 contraction");
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType()); !t || t.getEncoding())
      return fail("an operand is not a plain ranked tensor");
  std::string body = whyNotMultiplyAdd(*op.getBlock());
  if (!body.empty())
    return fail(body);

  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps,
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return fail("an indexing map is not a projected permutation (a "
                "convolution or a strided access)");
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(maps);
  if (failed(dims))
    return fail("no batch/M/N/K classification of the loops");
  if (dims->k.size() != 1)
    return fail(Twine(dims->k.size()) +
                " reduction dimensions read by both inputs (a matmul has one)");
  if (dims->m.empty() && dims->n.empty())
    return fail("a dot product (no M or N dimension)");
  unsigned numBatch = dims->batch.size();
  unsigned numLoops = op.getNumLoops();
  if (numLoops != numBatch + dims->m.size() + dims->n.size() + 1)
    return fail("a loop is neither batch, M, N nor K (read by one input "
                "only, or broadcast)");
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < numLoops; ++d)
    if ((iterators[d] == utils::IteratorType::reduction) != (d == dims->k[0]))
      return fail("the iterator types do not match the K dimension");
  // Batch dims lead every operand, in one order.
  ArrayRef<AffineExpr> batchExprs = maps[2].getResults().take_front(numBatch);
  if (!llvm::all_of(dims->batch,
                    [&](unsigned d) {
                      return llvm::is_contained(
                          batchExprs, getAffineDimExpr(d, op.getContext()));
                    }) ||
      !llvm::all_of(maps, [&](AffineMap m) {
        return m.getResults().take_front(numBatch) == batchExprs;
      }))
    return fail("the batch dimensions do not lead every operand in one "
                "order");

  unsigned k = dims->k[0];
  // The result's dims after the batch: the row dims (one, or several that
  // collapse into one) and the column dim last.
  SmallVector<unsigned> out = dimsAfter(maps[2], numBatch);
  unsigned n = out.back();
  SmallVector<unsigned> rows(out.begin(), out.end() - 1);
  MatmulPlan plan;
  plan.batched = numBatch > 0;
  // The left operand holds the result's rows; a matvec's vector (which has
  // no row) becomes a one-row left operand, so that matvecs reading the
  // same vector share their left operand.
  unsigned lhsIndex;
  if (rows.empty()) {
    plan.rowVector = true;
    lhsIndex = llvm::is_contained(dims->m, n) ? 1 : 0;
  } else {
    lhsIndex = llvm::is_contained(dims->n, n) ? 0 : 1;
    const SmallVector<unsigned, 2> &rowDims = lhsIndex ? dims->n : dims->m;
    const SmallVector<unsigned, 2> &colDims = lhsIndex ? dims->m : dims->n;
    if (colDims.size() != 1 || rowDims.size() != rows.size())
      return fail(Twine(dims->m.size()) + " M and " + Twine(dims->n.size()) +
                  " N dimensions, the result's last not the only one of its "
                  "kind");
  }
  if (plan.rowVector && numBatch > 1)
    return fail("a matrix-vector product with several batch dimensions");
  plan.lhs = op.getDpsInputOperand(lhsIndex)->get();
  plan.rhs = op.getDpsInputOperand(1 - lhsIndex)->get();
  SmallVector<unsigned> lhsDims = dimsAfter(maps[lhsIndex], numBatch);
  SmallVector<unsigned> rhsDims = dimsAfter(maps[1 - lhsIndex], numBatch);

  // The left operand: rows then K, or K then rows (each contiguous).
  std::optional<bool> lhsTransposed;
  SmallVector<unsigned> rowsThenK(rows), kThenRows{k};
  rowsThenK.push_back(k);
  kThenRows.append(rows);
  if (lhsDims == rowsThenK)
    lhsTransposed = false;
  else if (lhsDims == kThenRows)
    lhsTransposed = true;
  std::optional<bool> rhsTransposed = orderOf(rhsDims, k, n);
  if (!lhsTransposed)
    return fail("the left operand is not (batch..., rows..., K) or (batch..., "
                "K, rows...)");
  if (!rhsTransposed)
    return fail("unexpected right operand layout");
  plan.lhsTransposed = *lhsTransposed;
  plan.rhsTransposed = *rhsTransposed;

  if (numBatch > 1 || rows.size() > 1) {
    // Groups over each operand's dims: the batch, then its other dims.
    auto groups = [&](ArrayRef<ArrayRef<unsigned>> runs) {
      SmallVector<ReassociationIndices> result;
      int64_t next = 0;
      for (ArrayRef<unsigned> run : runs) {
        if (run.empty())
          continue;
        ReassociationIndices group;
        for (size_t i = 0; i < run.size(); ++i)
          group.push_back(next++);
        result.push_back(group);
      }
      return result;
    };
    ArrayRef<unsigned> batch(dims->batch), kDim(k), nDim(n);
    plan.lhsGroups = plan.lhsTransposed ? groups({batch, kDim, rows})
                                        : groups({batch, rows, kDim});
    plan.rhsGroups = groups({batch, kDim, nDim});
    plan.outGroups = groups({batch, rows, nDim});
  }
  return plan;
}

/// Candidates: linalg ops on tensors with two inputs, one result, a
/// reduction loop and a multiplication in the body, other than the
/// canonical `linalg.matmul` / `linalg.batch_matmul` themselves.
bool looksLikeContraction(linalg::LinalgOp op) {
  if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
      !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op->getNumResults() != 1 ||
      op.getNumReductionLoops() == 0 || op->getNumRegions() != 1 ||
      op->getRegion(0).empty())
    return false;
  return llvm::any_of(op.getBlock()->getOperations(), [](Operation &inner) {
    return isa<arith::MulFOp, arith::MulIOp>(inner);
  });
}

/// How [b?, 1, X] collapses to [b?, X].
SmallVector<ReassociationIndices> unitRowGroups(bool batched) {
  if (batched)
    return {{0}, {1, 2}};
  return {{0, 1}};
}

/// `v` [b?, K] as [b?, 1, K] (or its init [b?, N] as [b?, 1, N]). A
/// constant fill of a `tensor.empty` is re-created in the new shape, so
/// that the merge and the GEMM's beta = 0 still recognize it.
Value insertUnitRow(RewriterBase &rewriter, Location loc, Value v,
                    bool batched) {
  auto type = cast<RankedTensorType>(v.getType());
  unsigned pos = batched ? 1 : 0;
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + pos, 1);
  auto expandedType = RankedTensorType::get(shape, type.getElementType());
  SmallVector<ReassociationIndices> groups = unitRowGroups(batched);
  // The collapsed result of a specialized matvec feeding the next: its
  // one-row source, so that decode chains (W2·(W1·x)) stay matmul chains.
  if (auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>())
    if (collapse.getSrcType() == expandedType &&
        collapse.getReassociationIndices() == groups)
      return collapse.getSrc();
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    if (auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>()) {
      SmallVector<OpFoldResult> sizes = empty.getMixedSizes();
      sizes.insert(sizes.begin() + pos, rewriter.getIndexAttr(1));
      Value newEmpty =
          tensor::EmptyOp::create(rewriter, loc, sizes, type.getElementType());
      return linalg::FillOp::create(rewriter, loc, fill.getInputs()[0],
                                    newEmpty)
          ->getResult(0);
    }
  return tensor::ExpandShapeOp::create(rewriter, loc, expandedType, v, groups);
}

/// The sizes of `v`, taken from the `tensor.empty` behind a fill when
/// there is one (so that the fill itself can go away).
SmallVector<OpFoldResult> sizesOf(OpBuilder &b, Location loc, Value v) {
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    if (auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
      return empty.getMixedSizes();
  return tensor::getMixedSizes(b, loc, v);
}

/// `v` with the dims of each of `groups` collapsed into one; a constant
/// fill of a `tensor.empty` becomes a fill of an empty of the collapsed
/// shape (what the merge and the GEMM's beta = 0 recognize).
Value collapseGroups(RewriterBase &rewriter, Location loc, Value v,
                     ArrayRef<ReassociationIndices> groups) {
  if (llvm::all_of(groups,
                   [](const ReassociationIndices &g) { return g.size() == 1; }))
    return v;
  auto fill = v.getDefiningOp<linalg::FillOp>();
  auto empty = fill ? fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>()
                    : tensor::EmptyOp();
  if (!empty)
    return tensor::CollapseShapeOp::create(rewriter, loc, v, groups);
  Value collapsedEmpty =
      tensor::CollapseShapeOp::create(rewriter, loc, empty, groups);
  Value newEmpty = tensor::EmptyOp::create(
      rewriter, loc, tensor::getMixedSizes(rewriter, loc, collapsedEmpty),
      getElementTypeOrSelf(v));
  return linalg::FillOp::create(rewriter, loc, fill.getInputs()[0], newEmpty)
      ->getResult(0);
}

struct SpecializeCounters {
  int64_t contractions = 0;
  int64_t narrowed = 0;
};

struct SpecializeContraction : OpInterfaceRewritePattern<linalg::LinalgOp> {
  SpecializeContraction(MLIRContext *ctx,
                        std::shared_ptr<SpecializeCounters> counters)
      : OpInterfaceRewritePattern(ctx), counters(std::move(counters)) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!looksLikeContraction(op))
      return rewriter.notifyMatchFailure(op, "not a contraction candidate");
    std::string why;
    FailureOr<MatmulPlan> plan = planMatmul(op, why);
    if (failed(plan)) {
      LLVM_DEBUG(llvm::dbgs() << "skip " << op->getName() << " at "
                              << op.getLoc() << ": " << why << "\n");
      return rewriter.notifyMatchFailure(op, why);
    }

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    Value lhs = plan->lhs;
    Value init = op.getDpsInitOperand(0)->get();
    Value rhs = plan->rhs;
    if (plan->rowVector) {
      lhs = insertUnitRow(rewriter, loc, lhs, plan->batched);
      init = insertUnitRow(rewriter, loc, init, plan->batched);
    }
    if (!plan->outGroups.empty()) {
      lhs = collapseGroups(rewriter, loc, lhs, plan->lhsGroups);
      rhs = collapseGroups(rewriter, loc, rhs, plan->rhsGroups);
      init = collapseGroups(rewriter, loc, init, plan->outGroups);
    }

    // Loops (b,) m, n, k.
    unsigned nb = plan->batched ? 1 : 0;
    auto map = [&](unsigned r, unsigned c) {
      SmallVector<AffineExpr> exprs;
      if (plan->batched)
        exprs.push_back(getAffineDimExpr(0, ctx));
      exprs.push_back(getAffineDimExpr(nb + r, ctx));
      exprs.push_back(getAffineDimExpr(nb + c, ctx));
      return AffineMap::get(nb + 3, 0, exprs, ctx);
    };
    SmallVector<AffineMap> maps = {plan->lhsTransposed ? map(2, 0) : map(0, 2),
                                   plan->rhsTransposed ? map(1, 2) : map(2, 1),
                                   map(0, 1)};
    NamedAttribute mapsAttr(rewriter.getStringAttr("indexing_maps"),
                            rewriter.getAffineMapArrayAttr(maps));
    Operation *matmul;
    if (plan->batched)
      matmul = linalg::BatchMatmulOp::create(rewriter, loc, init.getType(),
                                             ValueRange{lhs, rhs},
                                             ValueRange{init}, {mapsAttr});
    else
      matmul = linalg::MatmulOp::create(rewriter, loc, init.getType(),
                                        ValueRange{lhs, rhs}, ValueRange{init},
                                        {mapsAttr});
    Value result = matmul->getResult(0);
    if (plan->rowVector) {
      result = tensor::CollapseShapeOp::create(
          rewriter, loc, op->getResult(0).getType(), result,
          unitRowGroups(plan->batched));
    } else if (!plan->outGroups.empty()) {
      result = tensor::ExpandShapeOp::create(
          rewriter, loc, op->getResult(0).getType(), result, plan->outGroups,
          sizesOf(rewriter, loc, op.getDpsInitOperand(0)->get()));
    }

    ++counters->contractions;
    if (remarksEnabled()) {
      std::string what;
      llvm::raw_string_ostream os(what);
      os << "specialized " << op->getName() << " to " << matmul->getName()
         << " (" << getElementTypeOrSelf(lhs) << " x "
         << getElementTypeOrSelf(plan->rhs) << " -> "
         << getElementTypeOrSelf(init);
      if (plan->lhsTransposed)
        os << ", transposed A";
      if (plan->rhsTransposed)
        os << ", transposed B";
      if (plan->rowVector)
        os << ", " << describeValue(plan->lhs) << " as one row";
      if (!plan->outGroups.empty())
        os << ", " << cast<ShapedType>(op->getResult(0).getType()).getRank()
           << "-D result as " << cast<ShapedType>(init.getType()).getRank()
           << "-D";
      os << ")";
      emitOptimizationRemark(matmul, what);
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  std::shared_ptr<SpecializeCounters> counters;
};

/// The narrow value `v` widens, if `v` is an element-wise `arith.extf`
/// (torch-mlir's cast of a bf16 activation or weight to f32 before an f32
/// matmul).
Value widenedFrom(Value v) {
  Value input;
  return isa_and_nonnull<arith::ExtFOp>(matchElementwiseUnary(v, input))
             ? input
             : Value();
}

/// `linalg.matmul` / `batch_matmul` of two operands that are widened from
/// the same narrow float type (f16, bf16) reads the narrow values instead:
/// the named op's own implicit cast is that same `arith.extf`, so the
/// product is unchanged, and the GEMM library then multiplies bf16/f16
/// natively (f32 accumulation) instead of f32 copies twice the size. On
/// weights, the widened copies then never exist. The one difference: bf16
/// denormal inputs and results, which oneDNN's bf16 kernels flush to zero
/// (as PyTorch's bf16 matmuls do) where the f32 program kept them.
struct NarrowWidenedOperands : OpInterfaceRewritePattern<linalg::LinalgOp> {
  NarrowWidenedOperands(MLIRContext *ctx,
                        std::shared_ptr<SpecializeCounters> counters)
      : OpInterfaceRewritePattern(ctx), counters(std::move(counters)) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
        !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2)
      return failure();
    Value a = widenedFrom(op.getDpsInputOperand(0)->get());
    Value b = widenedFrom(op.getDpsInputOperand(1)->get());
    if (!a || !b)
      return failure();
    Type narrow = getElementTypeOrSelf(a);
    Type wide = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
    if (narrow != getElementTypeOrSelf(b) ||
        wide != getElementTypeOrSelf(op.getDpsInputOperand(1)->get()) ||
        wide != getElementTypeOrSelf(op->getResult(0).getType()) ||
        !(narrow.isF16() || narrow.isBF16()))
      return failure();
    NamedAttribute maps(
        rewriter.getStringAttr("indexing_maps"),
        rewriter.getAffineMapArrayAttr(op.getIndexingMapsArray()));
    Value init = op.getDpsInitOperand(0)->get();
    Operation *narrowed;
    if (isa<linalg::BatchMatmulOp>(op))
      narrowed = linalg::BatchMatmulOp::create(rewriter, op.getLoc(),
                                               init.getType(), ValueRange{a, b},
                                               ValueRange{init}, {maps});
    else
      narrowed =
          linalg::MatmulOp::create(rewriter, op.getLoc(), init.getType(),
                                   ValueRange{a, b}, ValueRange{init}, {maps});
    ++counters->narrowed;
    if (remarksEnabled()) {
      std::string what;
      llvm::raw_string_ostream os(what);
      os << "narrowed to " << narrow << " operands (" << describeValue(a)
         << ", " << describeValue(b) << " before their extf to " << wide
         << "): the product is the same, computed natively";
      emitOptimizationRemark(narrowed, what);
    }
    rewriter.replaceOp(op, narrowed->getResults());
    return success();
  }

  std::shared_ptr<SpecializeCounters> counters;
};

void addPatterns(RewritePatternSet &patterns,
                 const std::shared_ptr<SpecializeCounters> &counters) {
  patterns.add<SpecializeContraction, NarrowWidenedOperands>(
      patterns.getContext(), counters);
}

struct SpecializeContractionsPass
    : public linfuse::impl::SpecializeContractionsPassBase<
          SpecializeContractionsPass> {
  using SpecializeContractionsPassBase::SpecializeContractionsPassBase;

  void runOnOperation() override {
    // Remarks for what is left alone, once per op (the pattern driver may
    // visit an op several times).
    if (remarksEnabled())
      getOperation()->walk([](linalg::LinalgOp op) {
        std::string why;
        if (looksLikeContraction(op) && failed(planMatmul(op, why)))
          emitOptimizationRemark(op, "not specialized to a matmul: " + why);
      });
    auto counters = std::make_shared<SpecializeCounters>();
    RewritePatternSet patterns(&getContext());
    addPatterns(patterns, counters);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    // Producers first: a matvec feeding another is a one-row matmul by then.
    config.setUseTopDownTraversal(true);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    numSpecialized += counters->contractions;
    numNarrowed += counters->narrowed;
  }

  PassStatistic numSpecialized{
      this, "contractions-specialized",
      "Number of contractions rewritten as linalg.matmul / batch_matmul"};
  PassStatistic numNarrowed{
      this, "operands-narrowed",
      "Matmuls of widened f16/bf16 operands that now read the narrow ones"};
};

} // namespace

void mlir::linfuse::populateSpecializeContractionsPatterns(
    RewritePatternSet &patterns) {
  addPatterns(patterns, std::make_shared<SpecializeCounters>());
}
