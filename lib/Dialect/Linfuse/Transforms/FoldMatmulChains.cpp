//===- FoldMatmulChains.cpp - pre-multiply constant linear chains ---------===//
//
// "Can three nn.Linear layers be fused into one?" Only where nothing
// non-linear stands between them, and only where it does not raise the cost.
// This pass answers it on IR: linear chains of matmuls with constant weights
// (and their bias-adds) are re-associated where a dynamic program says the
// run-time FLOPs drop; sums of linear branches of one input (LoRA) become one
// matmul; input scales (norm gamma) move into the weights and input shifts
// (LayerNorm beta) into the biases.
//
// The rewrites are written once, over two weight algebras: constants are
// multiplied now, in f64 (ConstantAlgebra); for run-time `linfuse.weight`
// arguments the products are emitted as IR (IRAlgebra: f64, f32 for
// f16/bf16), which `--linfuse-lift-weight-packing` then moves into the
// one-time packing function. Either way the folded weight is rounded once.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulBuilders.h"
#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightMatrix.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightProducts.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <memory>
#include <variant>

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_FOLDMATMULCHAINSPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

namespace {

/// What the patterns did, for statistics; also remembers which ops already
/// got a "not folded" remark (patterns are retried until a fixpoint).
struct FoldCounters {
  int64_t chains = 0, sums = 0, scales = 0, shifts = 0, matmulsRemoved = 0;
  llvm::DenseSet<Operation *> remarked;
};
using CountersPtr = std::shared_ptr<FoldCounters>;

//===----------------------------------------------------------------------===//
// Recognizing linear steps
//===----------------------------------------------------------------------===//

/// A rank-2 matmul with a load-time weight (constant, or computed from
/// `linfuse.weight` arguments) and zero accumulator, plus its load-time
/// bias-add if any: `out = in · W (+ b)`. Matching only checks where the data
/// comes from; constants are decoded (into f64) once a rewrite is decided.
struct LinearStep {
  MatmulInfo mm;
  bool rhsIsNK = false; // Layout of the weight as the matmul reads it.
  /// Weight and bias are constants that can be read now.
  bool constant = true;

  /// A `tensor.expand_shape` + `tensor.collapse_shape` pair that restores
  /// `output`'s shape before the next step reads it (leading batch dims split
  /// and merged again, as importers emit around 3-D linears), last first.
  SmallVector<Operation *, 2> reshapes;

  Value input() const { return mm.lhs; }
  Value output() const { return mm.finalResult(); }
  int64_t flopsPerRow() const { return 2 * mm.k * mm.n; }
  /// Ops computing `output` (and its reshapes) from `input`, last first.
  SmallVector<Operation *, 4> opsLastFirst() const {
    SmallVector<Operation *, 4> ops(reshapes.begin(), reshapes.end());
    if (mm.biasAdd)
      ops.push_back(mm.biasAdd->op);
    ops.push_back(mm.op);
    return ops;
  }
};

bool isZero(Attribute attr) {
  auto f = dyn_cast<FloatAttr>(attr);
  return f && f.getValue().isZero();
}

std::optional<LinearStep> matchLinearStep(Operation *op) {
  std::optional<MatmulInfo> mm = matchMatmul(op);
  if (!mm || mm->batched || mm->lhsTransposed)
    return std::nullopt;
  std::optional<Attribute> fill = matchConstantFill(mm->init);
  if (!fill || !isZero(*fill))
    return std::nullopt;
  LinearStep step;
  step.mm = *mm;
  // The layout as read by the matmul's map (the matcher looked through a
  // transpose of the weight; readConstantMatrix looks through it again).
  step.rhsIsNK =
      (mm->layout == WeightLayout::NK) != (mm->weightTranspose != nullptr);
  step.constant = isConstantMatrix(mm->rhs) &&
                  (!mm->biasAdd || isConstantMatrix(mm->biasAdd->bias));
  if (!step.constant && (!isLoadTimeValue(mm->rhs) ||
                         (mm->biasAdd && !isLoadTimeValue(mm->biasAdd->bias))))
    return std::nullopt;
  // A matmul of weights only is load-time work (the products this pass emits
  // for run-time weights among them), not a step of a run-time chain.
  if (isLoadTimeValue(mm->lhs))
    return std::nullopt;
  return step;
}

/// `v` itself, or `w` when `v = collapse_shape(expand_shape(w))` restores
/// `w`'s type exactly (the reshape pair then only renames rows).
Value lookThroughReshapes(Value v, SmallVectorImpl<Operation *> &pair) {
  auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse)
    return v;
  auto expand = collapse.getSrc().getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand || !expand->hasOneUse() ||
      expand.getSrc().getType() != v.getType() ||
      expand.getReassociationIndices() != collapse.getReassociationIndices())
    return v;
  pair.assign({collapse, expand});
  return expand.getSrc();
}

/// The step whose output is `v` (through a restoring reshape pair).
std::optional<LinearStep> producerStep(Value v) {
  SmallVector<Operation *, 2> pair;
  v = lookThroughReshapes(v, pair);
  if (!pair.empty() && !v.hasOneUse())
    return std::nullopt;
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  Operation *candidate = def;
  if (!isa<linalg::MatmulOp>(def)) {
    candidate = nullptr;
    for (Value operand : def->getOperands())
      if (auto mm = operand.getDefiningOp<linalg::MatmulOp>())
        candidate = mm;
  }
  if (!candidate)
    return std::nullopt;
  std::optional<LinearStep> step = matchLinearStep(candidate);
  if (!step || step->output() != v)
    return std::nullopt;
  step->reshapes = std::move(pair);
  return step;
}

/// The step reading `v` as its LHS when that (through a restoring reshape
/// pair) is v's only use.
std::optional<LinearStep> consumerStep(Value v) {
  if (!v.hasOneUse())
    return std::nullopt;
  Operation *user = *v.getUsers().begin();
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user)) {
    if (!expand->hasOneUse())
      return std::nullopt;
    auto collapse =
        dyn_cast<tensor::CollapseShapeOp>(*expand->getUsers().begin());
    if (!collapse || !collapse->hasOneUse() ||
        collapse.getType() != v.getType() ||
        expand.getReassociationIndices() != collapse.getReassociationIndices())
      return std::nullopt;
    v = collapse.getResult();
    user = *v.getUsers().begin();
  }
  std::optional<LinearStep> step = matchLinearStep(user);
  if (!step || step->input() != v)
    return std::nullopt;
  return step;
}

/// True when `a` and `b` can be one matmul's operands and result.
bool sameTypes(const LinearStep &a, const LinearStep &b) {
  return a.mm.lhsElementType() == b.mm.lhsElementType() &&
         a.mm.weightElementType() == b.mm.weightElementType() &&
         a.mm.resultElementType() == b.mm.resultElementType() &&
         a.mm.lhsElementType() == a.mm.resultElementType();
}

/// `x ⊕ s` for a constant scalar `s`, or `x ⊕ v` with a load-time vector `v`
/// of length K broadcast along the rows, where ⊕ is a multiply (a scale:
/// norm gamma) or an add (a shift: LayerNorm's beta).
struct RowOperand {
  Operation *op;
  Value input;
  std::optional<double> scalar;
  Value vector; // Rank 1, when not a scalar.

  bool isConstant() const { return scalar || isConstantMatrix(vector); }
};
using Scale = RowOperand;
using Shift = RowOperand;

/// Matches `op` as `x ⊕ s` or `x ⊕ v` (either operand order): a named
/// `NamedOp` (the vector through a `linalg.broadcast` of its rows) or a
/// `linalg.generic` whose body is one `ArithOp`.
template <typename NamedOp, typename ArithOp>
std::optional<RowOperand> matchRowOperand(Operation *op) {
  if (!op || op->getNumResults() != 1)
    return std::nullopt;
  // Rank 2, or more where the rows are collapsed before the linear.
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getRank() < 2)
    return std::nullopt;
  int64_t rank = type.getRank();
  int64_t k = type.getDimSize(rank - 1);
  auto asOperand = [&](Value x, Value v) -> std::optional<RowOperand> {
    if (std::optional<double> s = readConstantScalar(v))
      return RowOperand{op, x, s, Value()};
    auto vType = dyn_cast<RankedTensorType>(v.getType());
    if (vType && vType.getRank() == 1 && vType.getDimSize(0) == k &&
        isa<FloatType>(vType.getElementType()) && isLoadTimeValue(v))
      return RowOperand{op, x, std::nullopt, v};
    return std::nullopt;
  };

  if (auto named = dyn_cast<NamedOp>(op)) {
    if (!named.hasPureTensorSemantics())
      return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      Value x = named.getDpsInputOperand(i)->get();
      Value other = named.getDpsInputOperand(1 - i)->get();
      SmallVector<int64_t> leading =
          llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
      if (auto b = other.template getDefiningOp<linalg::BroadcastOp>())
        if (b.getDimensions() == ArrayRef<int64_t>(leading))
          other = b.getInput();
      if (std::optional<RowOperand> row = asOperand(x, other))
        return row;
    }
    return std::nullopt;
  }

  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return std::nullopt;
  Block &body = *generic.getBlock();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return std::nullopt;
  auto combine = dyn_cast<ArithOp>(body.front());
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (!combine || yield.getOperand(0) != combine.getResult())
    return std::nullopt;
  MLIRContext *ctx = op->getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap row = AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx));
  if (generic.getMatchingIndexingMap(generic.getDpsInitOperand(0)) != id)
    return std::nullopt;
  // Either x ⊕ <constant scalar in the body>, or x ⊕ v[k].
  Value inputs[2] = {combine.getLhs(), combine.getRhs()};
  for (int i = 0; i < 2; ++i) {
    auto arg = dyn_cast<BlockArgument>(inputs[i]);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= generic.getNumDpsInputs())
      continue;
    OpOperand *xOperand = generic.getDpsInputOperand(arg.getArgNumber());
    if (generic.getMatchingIndexingMap(xOperand) != id)
      continue;
    Value other = inputs[1 - i];
    if (std::optional<double> s = readConstantScalar(other)) {
      if (generic.getNumDpsInputs() != 1)
        continue;
      return RowOperand{op, xOperand->get(), s, Value()};
    }
    auto otherArg = dyn_cast<BlockArgument>(other);
    if (!otherArg || otherArg.getOwner() != &body ||
        otherArg.getArgNumber() >= generic.getNumDpsInputs() ||
        generic.getNumDpsInputs() != 2)
      continue;
    OpOperand *vOperand = generic.getDpsInputOperand(otherArg.getArgNumber());
    if (generic.getMatchingIndexingMap(vOperand) != row)
      continue;
    if (std::optional<RowOperand> r =
            asOperand(xOperand->get(), vOperand->get()))
      return r;
  }
  return std::nullopt;
}

std::optional<Scale> matchScale(Operation *op) {
  return matchRowOperand<linalg::MulOp, arith::MulFOp>(op);
}

/// Only vector shifts: a scalar one would need a row of ones in the algebra,
/// and no norm emits it.
std::optional<Shift> matchShift(Operation *op) {
  std::optional<Shift> shift =
      matchRowOperand<linalg::AddOp, arith::AddFOp>(op);
  if (!shift || shift->scalar)
    return std::nullopt;
  return shift;
}

//===----------------------------------------------------------------------===//
// Weight algebra
//===----------------------------------------------------------------------===//

/// Constants, multiplied now in f64 and rounded once into an `arith.constant`.
struct ConstantAlgebra {
  using M = Matrix;
  OpBuilder &b;
  int64_t threshold;
  Location loc;

  FailureOr<M> load(Value v, bool transposed = false) {
    FailureOr<Matrix> m = readConstantMatrix(v);
    if (failed(m) || !transposed)
      return m;
    return linfuse::transpose(*m);
  }
  M multiply(const M &x, const M &y) { return linfuse::multiply(x, y); }
  M addScaled(const M &x, const M &y, double s) {
    return linfuse::addScaled(x, y, s);
  }
  M scale(M x, double s) {
    for (double &e : x.data)
      e *= s;
    return x;
  }
  M scaleRows(M m, const M &g) {
    linfuse::scaleRows(m, g);
    return m;
  }
  Value store(const M &m, RankedTensorType type, bool transposed = false) {
    return arith::ConstantOp::create(
        b, loc, type,
        writeConstantMatrix(transposed ? linfuse::transpose(m) : m, type,
                            threshold));
  }
};

/// Load-time values (`linfuse.weight` arguments): the same algebra emitted
/// as IR, accumulated in f64 (f32 for f16/bf16) and rounded once by `store`.
struct IRAlgebra {
  using M = Value;
  OpBuilder &b;
  Type weightType;
  Location loc;

  WeightProductBuilder builder() { return {b, loc, weightType}; }
  FailureOr<M> load(Value v, bool transposed = false) {
    return builder().load(v, transposed);
  }
  M multiply(M x, M y) { return builder().multiply(x, y); }
  M addScaled(M x, M y, double s) { return builder().addScaled(x, y, s); }
  M scale(M x, double s) { return builder().scale(x, s); }
  M scaleRows(M m, M g) { return builder().scaleRows(m, g); }
  Value store(M m, RankedTensorType type, bool transposed = false) {
    return builder().store(m, type, transposed);
  }
};

/// Runs `fn` with the constant algebra when `constant`, else the IR one.
template <typename Fn>
LogicalResult withAlgebra(bool constant, OpBuilder &b, int64_t threshold,
                          Type weightType, Location loc, Fn &&fn) {
  if (constant) {
    ConstantAlgebra alg{b, threshold, loc};
    return fn(alg);
  }
  IRAlgebra alg{b, weightType, loc};
  return fn(alg);
}

/// W of `step` as [K, N].
template <typename Alg>
FailureOr<typename Alg::M> loadWeight(Alg &alg, const LinearStep &step) {
  return alg.load(step.mm.rhs, step.rhsIsNK);
}

/// b of `step` as 1 x N, when there is a bias-add.
template <typename Alg>
FailureOr<std::optional<typename Alg::M>> loadBias(Alg &alg,
                                                   const LinearStep &step) {
  using M = typename Alg::M;
  if (!step.mm.biasAdd)
    return std::optional<M>();
  FailureOr<M> bias = alg.load(step.mm.biasAdd->bias);
  if (failed(bias))
    return failure();
  return std::optional<M>(std::move(*bias));
}

/// `diag(scale) · m`.
template <typename Alg>
FailureOr<typename Alg::M> applyScale(Alg &alg, typename Alg::M m,
                                      const Scale &scale) {
  if (scale.scalar)
    return alg.scale(std::move(m), *scale.scalar);
  auto g = alg.load(scale.vector);
  if (failed(g))
    return failure();
  return alg.scaleRows(std::move(m), *g);
}

/// A folded linear map `x · W + c` before it is stored.
template <typename M> struct FoldedLinear {
  M w;
  std::optional<M> c;
};

/// Puts `b` where IR computing a new weight of `user` from the load-time
/// values `weights` can go: right after the last of them defined in
/// `user`'s block, or at the block's start. Weight work placed just before
/// its matmul would pin that matmul's new weight there, and a merge of it
/// with its siblings (Q/K/V after a norm scale is folded into each) must
/// place the merged GEMM after every weight.
static void setInsertionPointForWeight(OpBuilder &b, Operation *user,
                                       ArrayRef<Value> weights) {
  Block *block = user->getBlock();
  Operation *anchor = nullptr;
  for (Value v : weights) {
    Operation *def = v ? v.getDefiningOp() : nullptr;
    Operation *inBlock = def ? block->findAncestorOpInBlock(*def) : nullptr;
    if (inBlock && (!anchor || anchor->isBeforeInBlock(inBlock)))
      anchor = inBlock;
  }
  if (anchor)
    b.setInsertionPointAfter(anchor);
  else
    b.setInsertionPointToStart(block);
}

/// Builds `x · W (+ c)` with N columns, storing W and c in the element types
/// of `like`: at `weightsAt` when given (where the IR computing them ends),
/// else at the builder's insertion point like the matmul.
template <typename Alg>
Value buildLinear(Alg &alg, OpBuilder &b, Value x,
                  const FoldedLinear<typename Alg::M> &folded, int64_t n,
                  const LinearStep &like,
                  std::optional<OpBuilder::InsertPoint> weightsAt = {}) {
  int64_t k = cast<RankedTensorType>(x.getType()).getDimSize(1);
  auto wType = RankedTensorType::get({k, n}, like.mm.weightElementType());
  auto cType = RankedTensorType::get({n}, like.mm.resultElementType());
  Value weight, bias;
  {
    OpBuilder::InsertionGuard guard(b);
    if (weightsAt)
      b.restoreInsertionPoint(*weightsAt);
    weight = alg.store(folded.w, wType);
    if (folded.c)
      bias = alg.store(*folded.c, cType);
  }
  Value out = buildMatmul(b, alg.loc, x, weight, like.mm.resultElementType());
  if (!folded.c)
    return out;
  SmallVector<Value> dyn;
  if (ShapedType::isDynamic(cast<ShapedType>(x.getType()).getDimSize(0)))
    dyn.push_back(tensor::DimOp::create(b, alg.loc, x, 0));
  return buildBiasAdd(b, alg.loc, out, bias, dyn);
}

/// "2·(12·12+12·12)"
std::string flopsFormula(ArrayRef<int64_t> dims) {
  std::string s = "2·(";
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    s += (i ? "+" : "") + std::to_string(dims[i]) + "·" +
         std::to_string(dims[i + 1]);
  return s + ")";
}

//===----------------------------------------------------------------------===//
// Chains
//===----------------------------------------------------------------------===//

/// Folds `x·A·B(·C…)` rooted at the chain's last matmul.
struct FoldLinearChain : OpRewritePattern<linalg::MatmulOp> {
  FoldLinearChain(MLIRContext *ctx, FoldPolicy policy, int64_t threshold,
                  CountersPtr counters)
      : OpRewritePattern(ctx), policy(policy), threshold(threshold),
        counters(counters) {}

  LogicalResult matchAndRewrite(linalg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<LinearStep> tail = matchLinearStep(op);
    if (!tail)
      return rewriter.notifyMatchFailure(op, "not a constant linear step");
    if (std::optional<LinearStep> next = consumerStep(tail->output()))
      if (sameTypes(*next, *tail))
        return rewriter.notifyMatchFailure(op, "not the end of the chain");
    SmallVector<LinearStep, 4> steps{*tail};
    while (true) {
      Value in = steps.front().input();
      if (!in.hasOneUse())
        break;
      std::optional<LinearStep> prev = producerStep(in);
      if (!prev || !sameTypes(*prev, *tail))
        break;
      steps.insert(steps.begin(), std::move(*prev));
    }
    if (steps.size() < 2)
      return rewriter.notifyMatchFailure(op, "single matmul");

    // dims[i] -> dims[i+1] is step i; a run-time segment from i to j costs
    // dims[i]·dims[j] multiply-adds per row (the products in between are
    // computed once, at compile time).
    SmallVector<int64_t> dims{steps.front().mm.k};
    for (const LinearStep &s : steps)
      dims.push_back(s.mm.n);
    size_t n = steps.size();
    SmallVector<int64_t> best(n + 1, std::numeric_limits<int64_t>::max());
    SmallVector<size_t> from(n + 1, 0);
    best[0] = 0;
    for (size_t j = 1; j <= n; ++j)
      for (size_t i = 0; i < j; ++i) {
        int64_t cost = best[i] + dims[i] * dims[j];
        // Ties keep more, smaller matmuls: the fold must pay for itself.
        if (cost < best[j] || (cost == best[j] && i > from[j])) {
          best[j] = cost;
          from[j] = i;
        }
      }
    SmallVector<std::pair<size_t, size_t>> segments;
    if (policy == FoldPolicy::Always) {
      segments.push_back({0, n});
    } else {
      for (size_t j = n; j > 0; j = from[j])
        segments.push_back({from[j], j});
      std::reverse(segments.begin(), segments.end());
    }
    int64_t before = 0;
    for (size_t i = 0; i + 1 < dims.size(); ++i)
      before += dims[i] * dims[i + 1];
    if (segments.size() == n) {
      if (counters->remarked.insert(op).second)
        emitOptimizationRemark(
            op, "chain of " + Twine(n) + " matmuls not folded: FLOPs per row " +
                    flopsFormula(dims) + " = " + Twine(2 * before) +
                    " would become " + Twine(2 * dims.front() * dims.back()));
      return rewriter.notifyMatchFailure(op, "folding does not pay");
    }

    // A constant input scale in front of a chain whose first segment folds
    // is absorbed into the first weight before the product, so the folded
    // weight is rounded once (not once for the chain, once for the scale).
    std::optional<Scale> absorbed;
    Value chainInput = steps.front().input();
    if (segments.front().second - segments.front().first >= 2) {
      std::optional<Scale> scale = matchScale(chainInput.getDefiningOp());
      bool onlyThisUser =
          scale && scale->input.getType() == chainInput.getType() &&
          llvm::all_of(chainInput.getUsers(), [&](Operation *user) {
            return user == steps.front().mm.op.getOperation() ||
                   isa<tensor::DimOp>(user);
          });
      if (onlyThisUser) {
        absorbed = scale;
        chainInput = scale->input;
      }
    }

    bool constant = !absorbed || absorbed->isConstant();
    for (auto [i, j] : segments)
      for (size_t t = i; j - i >= 2 && t < j; ++t)
        constant &= steps[t].constant;
    return withAlgebra(constant, rewriter, threshold,
                       tail->mm.weightElementType(), op.getLoc(),
                       [&](auto &alg) {
                         return rewrite(alg, rewriter, steps, segments, dims,
                                        absorbed, chainInput);
                       });
  }

  template <typename Alg>
  LogicalResult
  rewrite(Alg &alg, PatternRewriter &rewriter, ArrayRef<LinearStep> steps,
          ArrayRef<std::pair<size_t, size_t>> segments, ArrayRef<int64_t> dims,
          const std::optional<Scale> &absorbed, Value chainInput) const {
    using M = typename Alg::M;
    size_t n = steps.size();
    // Compute every folded segment's map before changing anything: reading
    // a constant may still fail. (The IR algebra cannot fail; what it emits
    // goes before the segment's last matmul, where all its weights dominate.)
    SmallVector<std::optional<FoldedLinear<M>>> folded;
    for (auto [i, j] : segments) {
      folded.emplace_back();
      if (j - i < 2)
        continue;
      // Everything the segment reads dominates the op producing its output
      // (the last bias-add reads the last bias, which may be defined after
      // the last matmul).
      rewriter.setInsertionPoint(steps[j - 1].output().getDefiningOp());
      alg.loc = steps[j - 1].mm.op->getLoc();
      FailureOr<M> w = loadWeight(alg, steps[i]);
      FailureOr<std::optional<M>> c = loadBias(alg, steps[i]);
      if (failed(w) || failed(c))
        return rewriter.notifyMatchFailure(steps[i].mm.op, "unreadable");
      if (i == 0 && absorbed) {
        w = applyScale(alg, std::move(*w), *absorbed);
        if (failed(w))
          return rewriter.notifyMatchFailure(steps[i].mm.op, "unreadable");
      }
      for (size_t t = i + 1; t < j; ++t) {
        FailureOr<M> wt = loadWeight(alg, steps[t]);
        FailureOr<std::optional<M>> bt = loadBias(alg, steps[t]);
        if (failed(wt) || failed(bt))
          return rewriter.notifyMatchFailure(steps[t].mm.op, "unreadable");
        w = alg.multiply(*w, *wt);
        if (*c)
          *c = alg.multiply(**c, *wt);
        if (*bt)
          *c = *c ? alg.addScaled(**c, **bt, 1.0) : **bt;
      }
      folded.back() = FoldedLinear<M>{std::move(*w), std::move(*c)};
    }

    // Replace the last segment first: earlier segments feed it through
    // values that must stay alive until they are replaced themselves.
    for (size_t s = segments.size(); s-- > 0;) {
      auto [i, j] = segments[s];
      if (j - i < 2)
        continue;
      const LinearStep &last = steps[j - 1];
      rewriter.setInsertionPoint(last.output().getDefiningOp());
      alg.loc = last.mm.op->getLoc();
      Value result =
          buildLinear(alg, rewriter, i == 0 ? chainInput : steps[i].input(),
                      *folded[s], last.mm.n, last);
      SmallVector<int64_t> segDims(dims.begin() + i, dims.begin() + j + 1);
      emitOptimizationRemark(result.getDefiningOp(),
                             "folded chain of " + Twine(j - i) +
                                 " matmuls, FLOPs per row " +
                                 flopsFormula(segDims) + " → 2·" +
                                 Twine(dims[i]) + "·" + Twine(dims[j]));
      rewriter.replaceAllUsesWith(last.output(), result);
      for (size_t t = j; t-- > i;) {
        SmallVector<Operation *, 4> dead = steps[t].opsLastFirst();
        // The reshape pair after a segment's last step feeds the next kept
        // step (it now reads the folded value): it stays.
        if (t == j - 1 && j < n)
          dead.erase(dead.begin(), dead.begin() + steps[t].reshapes.size());
        for (Operation *op : dead)
          rewriter.eraseOp(op);
      }
      ++counters->chains;
      counters->matmulsRemoved += j - i - 1;
    }
    if (absorbed) {
      Value scaled = absorbed->op->getResult(0);
      for (OpOperand &use : llvm::make_early_inc_range(scaled.getUses()))
        rewriter.modifyOpInPlace(use.getOwner(), [&] { use.set(chainInput); });
      rewriter.eraseOp(absorbed->op);
      ++counters->scales;
    }
    return success();
  }

  FoldPolicy policy;
  int64_t threshold;
  CountersPtr counters;
};

//===----------------------------------------------------------------------===//
// Sums of linear branches (LoRA)
//===----------------------------------------------------------------------===//

/// `value = x · T + c`, traced back through single-use steps and scalar
/// scales; T and c are computed by `evaluate` once a rewrite is decided.
struct LinearTrace {
  Value x;
  /// From the traced value back to x: a linear step or a scalar factor.
  SmallVector<std::variant<LinearStep, double>> items;
  SmallVector<Operation *> ops; // last first
  int64_t flopsPerRow = 0;
  std::optional<LinearStep> anyStep;
  int64_t k = 0, n = 0; // T is K x N.
  bool constant = true;
};

std::optional<LinearTrace> traceLinear(Value v) {
  LinearTrace trace;
  Value u = v;
  while (trace.ops.empty() || u.hasOneUse()) {
    if (std::optional<Scale> scale = matchScale(u.getDefiningOp())) {
      if (!scale->scalar || scale->input.getType() != u.getType())
        break; // Per-column scales are the scale-folding pattern's.
      trace.items.push_back(*scale->scalar);
      trace.ops.push_back(scale->op);
      u = scale->input;
      continue;
    }
    std::optional<LinearStep> step = producerStep(u);
    if (!step || (trace.anyStep && !sameTypes(*step, *trace.anyStep)))
      break;
    if (!trace.anyStep)
      trace.n = step->mm.n;
    trace.k = step->mm.k;
    trace.flopsPerRow += step->flopsPerRow();
    trace.constant &= step->constant;
    llvm::append_range(trace.ops, step->opsLastFirst());
    trace.anyStep = *step;
    u = step->input();
    trace.items.push_back(std::move(*step));
  }
  if (!trace.anyStep)
    return std::nullopt;
  trace.x = u;
  return trace;
}

/// T and c of `trace`.
template <typename Alg>
FailureOr<FoldedLinear<typename Alg::M>> evaluate(Alg &alg,
                                                  const LinearTrace &trace) {
  using M = typename Alg::M;
  // Invariant: value = u · (alpha · T) + c, with T the identity while unset.
  double alpha = 1.0;
  std::optional<M> t, c;
  for (const auto &item : trace.items) {
    if (const double *s = std::get_if<double>(&item)) {
      alpha *= *s; // u = s · w
      continue;
    }
    const LinearStep &step = std::get<LinearStep>(item);
    FailureOr<M> weight = loadWeight(alg, step);
    FailureOr<std::optional<M>> bias = loadBias(alg, step);
    if (failed(weight) || failed(bias))
      return failure();
    // u = w · W + b:  value = w · (alpha · W T) + (alpha · b T + c).
    if (*bias) {
      M bt = alg.scale(t ? alg.multiply(**bias, *t) : **bias, alpha);
      c = c ? alg.addScaled(*c, bt, 1.0) : bt;
    }
    t = t ? alg.multiply(*weight, *t) : std::move(*weight);
  }
  return FoldedLinear<M>{alg.scale(std::move(*t), alpha), std::move(c)};
}

/// True when `op` adds two [M, N] tensors element-wise.
std::optional<std::pair<Value, Value>> matchElementwiseAdd(Operation *op) {
  if (auto add = dyn_cast<linalg::AddOp>(op)) {
    if (!add.hasPureTensorSemantics())
      return std::nullopt;
    return std::make_pair(add.getDpsInputOperand(0)->get(),
                          add.getDpsInputOperand(1)->get());
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return std::nullopt;
  Block &body = *generic.getBlock();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return std::nullopt;
  auto addf = dyn_cast<arith::AddFOp>(body.front());
  if (!addf ||
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0) != addf)
    return std::nullopt;
  BlockArgument a0 = body.getArgument(0), a1 = body.getArgument(1);
  if (!((addf.getLhs() == a0 && addf.getRhs() == a1) ||
        (addf.getLhs() == a1 && addf.getRhs() == a0)))
    return std::nullopt;
  return std::make_pair(generic.getDpsInputOperand(0)->get(),
                        generic.getDpsInputOperand(1)->get());
}

/// `x·W (+ b) + s·(x·A)·B` -> `x·(W + s·AB) (+ b)`, and generally the sum of
/// two linear branches of the same input.
struct FoldLinearSum : RewritePattern {
  FoldLinearSum(MLIRContext *ctx, FoldPolicy policy, int64_t threshold,
                CountersPtr counters)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/2, ctx), policy(policy),
        threshold(threshold), counters(counters) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    auto operands = matchElementwiseAdd(op);
    if (!operands)
      return failure();
    std::optional<LinearTrace> lhs = traceLinear(operands->first);
    std::optional<LinearTrace> rhs = traceLinear(operands->second);
    if (!lhs || !rhs || lhs->x != rhs->x || lhs->ops.empty() ||
        rhs->ops.empty() || !sameTypes(*lhs->anyStep, *rhs->anyStep) ||
        lhs->k != rhs->k || lhs->n != rhs->n)
      return rewriter.notifyMatchFailure(op, "not a sum of linear branches");
    if (!operands->first.hasOneUse() || !operands->second.hasOneUse())
      return rewriter.notifyMatchFailure(op, "branch result used elsewhere");
    int64_t before = lhs->flopsPerRow + rhs->flopsPerRow;
    int64_t after = 2 * lhs->k * lhs->n;
    if (policy == FoldPolicy::Cost && after >= before)
      return rewriter.notifyMatchFailure(op, "folding does not pay");

    // The folded weight is computed right after the weights it reads, not
    // at the sum: placed there it would pin the matmul's weight late, and a
    // merge with the matmul's siblings (q/k/v, only some with LoRA) must put
    // the merged GEMM after every member's weight.
    SmallVector<Value> weights;
    for (const LinearTrace *trace : {&*lhs, &*rhs})
      for (const auto &item : trace->items)
        if (const auto *step = std::get_if<LinearStep>(&item)) {
          weights.push_back(step->mm.rhs);
          if (step->mm.biasAdd)
            weights.push_back(step->mm.biasAdd->bias);
        }
    setInsertionPointForWeight(rewriter, op, weights);
    return withAlgebra(
        lhs->constant && rhs->constant, rewriter, threshold,
        lhs->anyStep->mm.weightElementType(), op->getLoc(),
        [&](auto &alg) -> LogicalResult {
          auto l = evaluate(alg, *lhs);
          auto r = evaluate(alg, *rhs);
          if (failed(l) || failed(r))
            return rewriter.notifyMatchFailure(op, "unreadable constant");
          auto sum = *l;
          sum.w = alg.addScaled(l->w, r->w, 1.0);
          if (r->c)
            sum.c = sum.c ? alg.addScaled(*sum.c, *r->c, 1.0) : *r->c;
          OpBuilder::InsertPoint weightsAt = rewriter.saveInsertionPoint();
          rewriter.setInsertionPoint(op);
          Value folded = buildLinear(alg, rewriter, lhs->x, sum, lhs->n,
                                     *lhs->anyStep, weightsAt);
          emitOptimizationRemark(folded.getDefiningOp(),
                                 "folded a sum of linear branches (LoRA) "
                                 "into one matmul, FLOPs per row " +
                                     Twine(before) + " → " + Twine(after));
          rewriter.replaceOp(op, folded);
          int64_t matmuls = 0;
          for (LinearTrace *trace : {&*lhs, &*rhs})
            for (Operation *dead : trace->ops) {
              matmuls += isa<linalg::MatmulOp>(dead);
              rewriter.eraseOp(dead);
            }
          ++counters->sums;
          counters->matmulsRemoved += matmuls - 1;
          return success();
        });
  }

  FoldPolicy policy;
  int64_t threshold;
  CountersPtr counters;
};

//===----------------------------------------------------------------------===//
// Input scales (norm gamma) and shifts (LayerNorm beta)
//===----------------------------------------------------------------------===//

/// The users of an element-wise result `y` when each can read its input
/// `x` instead: linear steps reading `y` (or its rows, through a
/// `tensor.collapse_shape` of the leading dims, as importers emit before a
/// linear) as their LHS, and shape queries.
struct LinearUsers {
  SmallVector<LinearStep, 2> steps;
  SmallVector<tensor::DimOp> dims;
  SmallVector<tensor::CollapseShapeOp> collapses;

  /// Fails when some user is none of these, or no linear step is.
  LogicalResult collect(Value y) {
    auto readsAsLhs = [&](OpOperand &use) {
      std::optional<LinearStep> step = matchLinearStep(use.getOwner());
      if (!step || use.getOperandNumber() != 0 || step->mm.rhs == use.get())
        return false;
      steps.push_back(std::move(*step));
      return true;
    };
    for (OpOperand &use : y.getUses()) {
      if (auto dim = dyn_cast<tensor::DimOp>(use.getOwner())) {
        dims.push_back(dim);
        continue;
      }
      if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(use.getOwner())) {
        int64_t rank = collapse.getSrcType().getRank();
        SmallVector<ReassociationIndices> groups =
            collapse.getReassociationIndices();
        if (collapse.getResultType().getRank() != 2 ||
            groups.back() != ReassociationIndices{rank - 1})
          return failure();
        for (OpOperand &rowUse : collapse.getResult().getUses())
          if (!isa<tensor::DimOp>(rowUse.getOwner()) && !readsAsLhs(rowUse))
            return failure();
        collapses.push_back(collapse);
        continue;
      }
      if (!readsAsLhs(use))
        return failure();
    }
    return success(!steps.empty());
  }

  /// Makes every user read `x` (of y's type) instead of `y`.
  void redirect(PatternRewriter &rewriter, Value y, Value x) const {
    for (const LinearStep &step : steps)
      if (step.mm.lhs == y)
        rewriter.modifyOpInPlace(step.mm.op,
                                 [&] { step.mm.op->setOperand(0, x); });
    for (tensor::CollapseShapeOp collapse : collapses)
      rewriter.modifyOpInPlace(collapse,
                               [&] { collapse.getSrcMutable().assign(x); });
    for (tensor::DimOp dim : dims)
      rewriter.modifyOpInPlace(dim, [&] { dim.getSourceMutable().assign(x); });
  }
};

/// `y = x * g` whose every user is a constant matmul reading `y` as its LHS:
/// the scale moves into each user's weight rows. On `linfuse.weight`
/// arguments only with policy=always: there the scaled weights are new
/// buffers beside the caller's (a second copy of every weight the norm
/// feeds: Q/K/V, gate and up, 70% of a LLaMA layer), to save one multiply
/// per input element that the norm's fused element-wise loop does anyway.
/// A constant's scaled weight replaces it at compile time, at no cost.
struct FoldInputScale : RewritePattern {
  FoldInputScale(MLIRContext *ctx, FoldPolicy policy, int64_t threshold,
                 CountersPtr counters)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx), policy(policy),
        threshold(threshold), counters(counters) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    std::optional<Scale> scale = matchScale(op);
    if (!scale || scale->input.getType() != op->getResult(0).getType())
      return failure();
    LinearUsers linearUsers;
    if (failed(linearUsers.collect(op->getResult(0))))
      return rewriter.notifyMatchFailure(op, "a user cannot absorb it");
    ArrayRef<LinearStep> users = linearUsers.steps;
    bool constant =
        scale->isConstant() && llvm::all_of(users, [](const LinearStep &user) {
          return user.constant;
        });
    if (!constant && policy != FoldPolicy::Always) {
      int64_t bytes = 0;
      for (const LinearStep &user : users)
        if (auto t = cast<ShapedType>(user.mm.rhs.getType());
            t.hasStaticShape())
          bytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
      if (counters->remarked.insert(op).second)
        emitOptimizationRemark(
            op, "input scale not folded into weight arguments: the scaled "
                "weights would be a second copy of " +
                    Twine(bytes) +
                    " bytes of weights (policy=always folds it)");
      return rewriter.notifyMatchFailure(op, "would copy weight arguments");
    }
    LogicalResult result = withAlgebra(
        constant, rewriter, threshold, users.front().mm.weightElementType(),
        op->getLoc(), [&](auto &alg) -> LogicalResult {
          using M = typename std::decay_t<decltype(alg)>::M;
          // Compute every scaled weight before changing anything. Row k of
          // the [K, N] weight is scaled by g[k].
          SmallVector<M, 2> weights;
          // Where each weight's IR ends: its store goes there.
          SmallVector<OpBuilder::InsertPoint, 2> ends;
          for (const LinearStep &user : users) {
            setInsertionPointForWeight(rewriter, user.mm.op,
                                       {user.mm.rhs, scale->vector});
            alg.loc = user.mm.op->getLoc();
            FailureOr<M> w = loadWeight(alg, user);
            if (succeeded(w))
              w = applyScale(alg, std::move(*w), *scale);
            if (failed(w))
              return rewriter.notifyMatchFailure(op, "unreadable constant");
            weights.push_back(std::move(*w));
            ends.push_back(rewriter.saveInsertionPoint());
          }
          for (auto [user, w, end] : llvm::zip_equal(users, weights, ends)) {
            // Written back in the layout the matmul reads, so its maps,
            // bias-add and uses stay as they are.
            auto rhsType = cast<RankedTensorType>(user.mm.rhs.getType());
            rewriter.restoreInsertionPoint(end);
            alg.loc = user.mm.op->getLoc();
            Value weight = alg.store(w, rhsType, user.rhsIsNK);
            rewriter.modifyOpInPlace(
                user.mm.op, [&] { user.mm.op->setOperand(1, weight); });
            emitOptimizationRemark(user.mm.op,
                                   "folded an input scale into the weight");
          }
          return success();
        });
    if (failed(result))
      return result;
    linearUsers.redirect(rewriter, op->getResult(0), scale->input);
    rewriter.eraseOp(op);
    ++counters->scales;
    return success();
  }

  FoldPolicy policy;
  int64_t threshold;
  CountersPtr counters;
};

/// `y = x + v` (LayerNorm's beta) whose every user is a linear step reading
/// `y` as its LHS: `y·W + c = x·W + (v·W + c)`, so each user reads `x` and
/// gets `v·W` added to its bias (a bias-add is created where there was
/// none). With the shift gone, the scale in front of it (gamma) usually has
/// only matmul users left, and FoldInputScale takes it.
struct FoldInputShift : RewritePattern {
  FoldInputShift(MLIRContext *ctx, int64_t threshold, CountersPtr counters)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        threshold(threshold), counters(counters) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    std::optional<Shift> shift = matchShift(op);
    if (!shift || shift->input.getType() != op->getResult(0).getType())
      return failure();
    Value y = op->getResult(0);
    LinearUsers linearUsers;
    if (failed(linearUsers.collect(y)))
      return rewriter.notifyMatchFailure(op, "a user cannot absorb it");
    ArrayRef<LinearStep> users = linearUsers.steps;
    bool constant =
        shift->isConstant() && llvm::all_of(users, [](const LinearStep &user) {
          return user.constant;
        });
    LogicalResult result = withAlgebra(
        constant, rewriter, threshold, users.front().mm.weightElementType(),
        op->getLoc(), [&](auto &alg) -> LogicalResult {
          // Compute every new bias before changing anything.
          SmallVector<Value, 2> biases;
          for (const LinearStep &user : users) {
            Value oldBias = user.mm.biasAdd ? user.mm.biasAdd->bias : Value();
            setInsertionPointForWeight(rewriter, user.mm.op,
                                       {user.mm.rhs, shift->vector, oldBias});
            alg.loc = user.mm.op->getLoc();
            auto v = alg.load(shift->vector);
            auto w = loadWeight(alg, user);
            auto c = loadBias(alg, user);
            if (failed(v) || failed(w) || failed(c))
              return rewriter.notifyMatchFailure(op, "unreadable constant");
            auto bias = alg.multiply(*v, *w);
            if (*c)
              bias = alg.addScaled(bias, **c, 1.0);
            biases.push_back(
                alg.store(bias, RankedTensorType::get(
                                    {user.mm.n}, user.mm.resultElementType())));
          }
          linearUsers.redirect(rewriter, y, shift->input);
          for (auto [user, bias] : llvm::zip_equal(users, biases)) {
            Operation *last = user.output().getDefiningOp();
            Value product = user.mm.op->getResult(0);
            rewriter.setInsertionPointAfter(last);
            Location loc = user.mm.op->getLoc();
            // Rows are counted on the (redirected) LHS: a second use of the
            // product would hide the new bias-add from the merge's matcher.
            SmallVector<Value> dyn;
            if (ShapedType::isDynamic(
                    cast<ShapedType>(product.getType()).getDimSize(0)))
              dyn.push_back(tensor::DimOp::create(
                  rewriter, loc, user.mm.op->getOperand(0), 0));
            Value added = buildBiasAdd(rewriter, loc, product, bias, dyn);
            if (user.mm.biasAdd) {
              rewriter.replaceOp(user.mm.biasAdd->op, added);
            } else {
              rewriter.replaceUsesWithIf(product, added, [&](OpOperand &use) {
                return use.getOwner() != added.getDefiningOp() &&
                       !isa<tensor::DimOp>(use.getOwner());
              });
            }
            emitOptimizationRemark(user.mm.op,
                                   "folded an input shift into the bias");
          }
          return success();
        });
    if (failed(result))
      return result;
    rewriter.eraseOp(op);
    ++counters->shifts;
    return success();
  }

  int64_t threshold;
  CountersPtr counters;
};

void addPatterns(RewritePatternSet &patterns, FoldPolicy policy,
                 int64_t threshold, const CountersPtr &counters) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<FoldLinearChain>(ctx, policy, threshold, counters);
  patterns.add<FoldLinearSum>(ctx, policy, threshold, counters);
  patterns.add<FoldInputScale>(ctx, policy, threshold, counters);
  patterns.add<FoldInputShift>(ctx, threshold, counters);
}

struct FoldMatmulChainsPass
    : public linfuse::impl::FoldMatmulChainsPassBase<FoldMatmulChainsPass> {
  using FoldMatmulChainsPassBase::FoldMatmulChainsPassBase;

  void runOnOperation() override {
    if (policy == FoldPolicy::Never)
      return;
    auto counters = std::make_shared<FoldCounters>();
    RewritePatternSet patterns(&getContext());
    addPatterns(patterns, policy, resourceThreshold, counters);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::AnyOp);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    if (remarksEnabled())
      remarkUnfoldableChains();
    numChains += counters->chains;
    numSums += counters->sums;
    numScales += counters->scales;
    numShifts += counters->shifts;
    numMatmulsRemoved += counters->matmulsRemoved;
  }

  /// Explains matmul pairs that look like a chain but could not be folded.
  void remarkUnfoldableChains() {
    getOperation()->walk([&](linalg::MatmulOp op) {
      std::optional<MatmulInfo> mm = matchMatmul(op);
      if (!mm || !mm->finalResult().hasOneUse())
        return;
      auto next =
          dyn_cast<linalg::MatmulOp>(*mm->finalResult().getUsers().begin());
      if (!next || next.getDpsInputOperand(0)->get() != mm->finalResult())
        return;
      std::string why;
      for (Operation *step : {op.getOperation(), next.getOperation()}) {
        if (matchLinearStep(step))
          continue;
        std::optional<MatmulInfo> info = matchMatmul(step);
        if (!info)
          why = "unsupported matmul form";
        else if (!isLoadTimeValue(info->rhs))
          why = "weight " + describeValue(info->weight) +
                " is neither a constant nor a linfuse.weight argument";
        else if (info->biasAdd && !isLoadTimeValue(info->biasAdd->bias))
          why = "bias " + describeValue(info->biasAdd->bias) +
                " is neither a constant nor a linfuse.weight argument";
        else if (isLoadTimeValue(info->lhs))
          return; // Weight-only work (this pass's own products among it).
        else
          why = "accumulator is not a zero fill";
        break;
      }
      if (!why.empty())
        emitOptimizationRemark(next, "chain of matmuls not folded: " + why);
    });
  }

  PassStatistic numChains{this, "chains-folded",
                          "Number of matmul chains pre-multiplied"};
  PassStatistic numSums{this, "sums-folded",
                        "Number of sums of linear branches (LoRA) folded"};
  PassStatistic numScales{this, "scales-folded",
                          "Number of constant input scales folded into "
                          "weights"};
  PassStatistic numShifts{this, "shifts-folded",
                          "Number of input shifts (LayerNorm beta) folded "
                          "into biases"};
  PassStatistic numMatmulsRemoved{this, "matmuls-removed",
                                  "Number of matmuls removed by folding"};
};

} // namespace

void mlir::linfuse::populateFoldMatmulChainsPatterns(
    RewritePatternSet &patterns, FoldPolicy policy, int64_t resourceThreshold) {
  addPatterns(patterns, policy, resourceThreshold,
              std::make_shared<FoldCounters>());
}
