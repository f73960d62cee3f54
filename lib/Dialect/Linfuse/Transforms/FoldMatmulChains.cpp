//===- FoldMatmulChains.cpp - pre-multiply constant linear chains ---------===//
//
// "Can three nn.Linear layers be fused into one?" Only where nothing
// non-linear stands between them, and only where it does not raise the cost.
// This pass answers it on IR: linear chains of matmuls with constant weights
// (and their bias-adds) are re-associated where a dynamic program says the
// run-time FLOPs drop; sums of linear branches of one input (LoRA) become one
// matmul; constant input scales (norm gamma) move into the weights.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulBuilders.h"
#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightMatrix.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <memory>

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
  int64_t chains = 0, sums = 0, scales = 0, matmulsRemoved = 0;
  llvm::DenseSet<Operation *> remarked;
};
using CountersPtr = std::shared_ptr<FoldCounters>;

//===----------------------------------------------------------------------===//
// Recognizing linear steps
//===----------------------------------------------------------------------===//

/// A rank-2 matmul with a constant weight and zero accumulator, plus its
/// constant bias-add if any: `out = in · W (+ b)`. Matching only checks that
/// the data is constant; it is decoded (per element, into f64) by readWeight
/// and readBias once a rewrite has been decided, not on every match.
struct LinearStep {
  MatmulInfo mm;
  bool rhsIsNK = false; // Layout of the weight as the matmul reads it.

  /// A `tensor.expand_shape` + `tensor.collapse_shape` pair that restores
  /// `output`'s shape before the next step reads it (leading batch dims split
  /// and merged again, as importers emit around 3-D linears), last first.
  SmallVector<Operation *, 2> reshapes;

  Value input() const { return mm.lhs; }
  Value output() const { return mm.finalResult(); }
  int64_t flopsPerRow() const { return 2 * mm.k * mm.n; }
  /// W as [K, N].
  FailureOr<Matrix> readWeight() const {
    FailureOr<Matrix> rhs = readConstantMatrix(mm.rhs);
    if (failed(rhs) || !rhsIsNK)
      return rhs;
    return transpose(*rhs);
  }
  /// b as 1 x N, when there is a bias-add.
  FailureOr<std::optional<Matrix>> readBias() const {
    if (!mm.biasAdd)
      return std::optional<Matrix>();
    FailureOr<Matrix> bias = readConstantMatrix(mm.biasAdd->bias);
    if (failed(bias))
      return failure();
    return std::optional<Matrix>(std::move(*bias));
  }
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
  if (!isConstantMatrix(mm->rhs) ||
      (mm->biasAdd && !isConstantMatrix(mm->biasAdd->bias)))
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

/// `x * s` for a constant scalar `s`, or `x * g` with a constant vector `g`
/// broadcast along the last dim. Returns {x, g (1 x K) or scale (1 x 1)}.
struct Scale {
  Operation *op;
  Value input;
  Matrix factor; // 1 x 1 (scalar) or 1 x K
};

std::optional<Scale> matchScale(Operation *op) {
  if (!op || op->getNumResults() != 1)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getRank() != 2)
    return std::nullopt;
  int64_t k = type.getDimSize(1);
  auto asFactor = [&](Value v) -> std::optional<Matrix> {
    if (std::optional<double> s = readConstantScalar(v)) {
      Matrix m(1, 1);
      m.at(0, 0) = *s;
      return m;
    }
    FailureOr<Matrix> g = readConstantMatrix(v);
    if (succeeded(g) && g->rows == 1 && g->cols == k &&
        cast<ShapedType>(v.getType()).getRank() == 1)
      return *g;
    return std::nullopt;
  };

  if (auto mul = dyn_cast<linalg::MulOp>(op)) {
    if (!mul.hasPureTensorSemantics())
      return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      Value x = mul.getDpsInputOperand(i)->get();
      Value other = mul.getDpsInputOperand(1 - i)->get();
      if (auto b = other.getDefiningOp<linalg::BroadcastOp>())
        if (b.getDimensions() == ArrayRef<int64_t>{0})
          other = b.getInput();
      if (std::optional<Matrix> f = asFactor(other))
        return Scale{op, x, *f};
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
  auto mulf = dyn_cast<arith::MulFOp>(body.front());
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (!mulf || yield.getOperand(0) != mulf.getResult())
    return std::nullopt;
  MLIRContext *ctx = op->getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, getAffineDimExpr(1, ctx));
  if (generic.getMatchingIndexingMap(generic.getDpsInitOperand(0)) != id)
    return std::nullopt;
  // Either x * <constant scalar in the body>, or x * g[k].
  Value inputs[2] = {mulf.getLhs(), mulf.getRhs()};
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
      Matrix m(1, 1);
      m.at(0, 0) = *s;
      return Scale{op, xOperand->get(), m};
    }
    auto otherArg = dyn_cast<BlockArgument>(other);
    if (!otherArg || otherArg.getOwner() != &body ||
        otherArg.getArgNumber() >= generic.getNumDpsInputs() ||
        generic.getNumDpsInputs() != 2)
      continue;
    OpOperand *gOperand = generic.getDpsInputOperand(otherArg.getArgNumber());
    if (generic.getMatchingIndexingMap(gOperand) != row)
      continue;
    if (std::optional<Matrix> f = asFactor(gOperand->get()))
      return Scale{op, xOperand->get(), *f};
  }
  return std::nullopt;
}

/// Builds `x · W (+ c)` with constant W and c where `like` was.
Value buildLinear(PatternRewriter &rewriter, Location loc, Value x,
                  const Matrix &w, const std::optional<Matrix> &c,
                  const LinearStep &like, int64_t threshold) {
  auto wType =
      RankedTensorType::get({w.rows, w.cols}, like.mm.weightElementType());
  Value weight = arith::ConstantOp::create(
      rewriter, loc, wType, writeConstantMatrix(w, wType, threshold));
  Value out =
      buildMatmul(rewriter, loc, x, weight, like.mm.resultElementType());
  if (!c)
    return out;
  auto cType = RankedTensorType::get({c->cols}, like.mm.resultElementType());
  Value bias = arith::ConstantOp::create(
      rewriter, loc, cType, writeConstantMatrix(*c, cType, threshold));
  SmallVector<Value> dyn;
  if (ShapedType::isDynamic(cast<ShapedType>(x.getType()).getDimSize(0)))
    dyn.push_back(tensor::DimOp::create(rewriter, loc, x, 0));
  return buildBiasAdd(rewriter, loc, out, bias, dyn);
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

    // Decode the weights of the folded segments (and only those).
    SmallVector<Matrix> weights(n);
    SmallVector<std::optional<Matrix>> biases(n);
    for (auto [i, j] : segments) {
      if (j - i < 2)
        continue;
      for (size_t t = i; t < j; ++t) {
        FailureOr<Matrix> w = steps[t].readWeight();
        FailureOr<std::optional<Matrix>> b = steps[t].readBias();
        if (failed(w) || failed(b))
          return rewriter.notifyMatchFailure(op, "unreadable constant");
        weights[t] = std::move(*w);
        biases[t] = std::move(*b);
      }
    }

    // A constant input scale in front of a chain whose first segment folds
    // is absorbed into the first weight before the product, so the folded
    // weight is rounded once (not once for the chain, once for the scale).
    Operation *absorbedScale = nullptr;
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
        scaleRows(weights.front(), scale->factor);
        absorbedScale = scale->op;
        chainInput = scale->input;
      }
    }

    // Replace the last segment first: earlier segments feed it through
    // values that must stay alive until they are replaced themselves.
    for (auto [i, j] : llvm::reverse(segments)) {
      if (j - i < 2)
        continue;
      Matrix w = weights[i];
      std::optional<Matrix> c = biases[i];
      for (size_t t = i + 1; t < j; ++t) {
        w = multiply(w, weights[t]);
        if (c)
          c = multiply(*c, weights[t]);
        if (biases[t])
          c = c ? addScaled(*c, *biases[t], 1.0) : *biases[t];
      }
      const LinearStep &last = steps[j - 1];
      rewriter.setInsertionPoint(last.mm.op);
      Value folded = buildLinear(rewriter, last.mm.op->getLoc(),
                                 i == 0 ? chainInput : steps[i].input(), w, c,
                                 last, threshold);
      SmallVector<int64_t> segDims(dims.begin() + i, dims.begin() + j + 1);
      emitOptimizationRemark(folded.getDefiningOp(),
                             "folded chain of " + Twine(j - i) +
                                 " matmuls, FLOPs per row " +
                                 flopsFormula(segDims) + " → 2·" +
                                 Twine(dims[i]) + "·" + Twine(dims[j]));
      rewriter.replaceAllUsesWith(last.output(), folded);
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
    if (absorbedScale) {
      Value scaled = absorbedScale->getResult(0);
      for (OpOperand &use : llvm::make_early_inc_range(scaled.getUses()))
        rewriter.modifyOpInPlace(use.getOwner(), [&] { use.set(chainInput); });
      rewriter.eraseOp(absorbedScale);
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

/// `value = x · T + c`, traced back through single-use steps and scales.
struct LinearTrace {
  Value x;
  Matrix t;                     // K x N
  std::optional<Matrix> c;      // 1 x N
  SmallVector<Operation *> ops; // last first
  int64_t flopsPerRow = 0;
  std::optional<LinearStep> anyStep;
};

std::optional<LinearTrace> traceLinear(Value v) {
  // Invariant: v = u · (alpha · T) + c, with T the identity while unset.
  LinearTrace trace;
  double alpha = 1.0;
  std::optional<Matrix> t;
  Value u = v;
  while (trace.ops.empty() || u.hasOneUse()) {
    if (std::optional<Scale> scale = matchScale(u.getDefiningOp())) {
      if (scale->factor.cols != 1 || scale->input.getType() != u.getType())
        break; // Per-column scales are the scale-folding pattern's.
      alpha *= scale->factor.at(0, 0); // u = s · w
      trace.ops.push_back(scale->op);
      u = scale->input;
      continue;
    }
    std::optional<LinearStep> step = producerStep(u);
    if (!step || (trace.anyStep && !sameTypes(*step, *trace.anyStep)))
      break;
    FailureOr<Matrix> weight = step->readWeight();
    FailureOr<std::optional<Matrix>> bias = step->readBias();
    if (failed(weight) || failed(bias))
      break;
    // u = w · W + b:  v = w · (alpha · W T) + (alpha · b T + c).
    if (*bias) {
      Matrix bt = t ? multiply(**bias, *t) : **bias;
      trace.c = trace.c ? addScaled(*trace.c, bt, alpha)
                        : addScaled(Matrix(bt.rows, bt.cols), bt, alpha);
    }
    t = t ? multiply(*weight, *t) : std::move(*weight);
    trace.flopsPerRow += step->flopsPerRow();
    llvm::append_range(trace.ops, step->opsLastFirst());
    trace.anyStep = *step;
    u = step->input();
  }
  if (!t)
    return std::nullopt;
  for (double &e : t->data)
    e *= alpha;
  trace.x = u;
  trace.t = std::move(*t);
  return trace;
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
        lhs->t.rows != rhs->t.rows || lhs->t.cols != rhs->t.cols)
      return rewriter.notifyMatchFailure(op, "not a sum of linear branches");
    if (!operands->first.hasOneUse() || !operands->second.hasOneUse())
      return rewriter.notifyMatchFailure(op, "branch result used elsewhere");
    int64_t before = lhs->flopsPerRow + rhs->flopsPerRow;
    int64_t after = 2 * lhs->t.rows * lhs->t.cols;
    if (policy == FoldPolicy::Cost && after >= before)
      return rewriter.notifyMatchFailure(op, "folding does not pay");

    Matrix w = addScaled(lhs->t, rhs->t, 1.0);
    std::optional<Matrix> c = lhs->c;
    if (rhs->c)
      c = c ? addScaled(*c, *rhs->c, 1.0) : *rhs->c;
    rewriter.setInsertionPoint(op);
    Value folded = buildLinear(rewriter, op->getLoc(), lhs->x, w, c,
                               *lhs->anyStep, threshold);
    emitOptimizationRemark(folded.getDefiningOp(),
                           "folded a sum of linear branches (LoRA) into one "
                           "matmul, FLOPs per row " +
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
  }

  FoldPolicy policy;
  int64_t threshold;
  CountersPtr counters;
};

//===----------------------------------------------------------------------===//
// Input scales (norm gamma)
//===----------------------------------------------------------------------===//

/// `y = x * g` whose every user is a constant matmul reading `y` as its LHS:
/// the scale moves into each user's weight rows.
struct FoldInputScale : RewritePattern {
  FoldInputScale(MLIRContext *ctx, int64_t threshold, CountersPtr counters)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        threshold(threshold), counters(counters) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    std::optional<Scale> scale = matchScale(op);
    if (!scale || scale->input.getType() != op->getResult(0).getType())
      return failure();
    Value y = op->getResult(0);
    SmallVector<LinearStep, 2> users;
    SmallVector<tensor::DimOp> dims;
    for (OpOperand &use : y.getUses()) {
      // Shape queries read the same sizes from the unscaled input.
      if (auto dim = dyn_cast<tensor::DimOp>(use.getOwner())) {
        dims.push_back(dim);
        continue;
      }
      std::optional<LinearStep> step = matchLinearStep(use.getOwner());
      if (!step || use.getOperandNumber() != 0 || step->mm.rhs == y)
        return rewriter.notifyMatchFailure(op, "a user cannot absorb it");
      users.push_back(std::move(*step));
    }
    if (users.empty())
      return failure();
    // Decode every weight before changing anything.
    SmallVector<Matrix, 2> weights;
    for (const LinearStep &user : users) {
      FailureOr<Matrix> w = user.readWeight();
      if (failed(w))
        return rewriter.notifyMatchFailure(op, "unreadable constant");
      weights.push_back(std::move(*w));
    }
    for (auto [user, w] : llvm::zip_equal(users, weights)) {
      // Row k of the [K, N] weight is scaled by g[k].
      scaleRows(w, scale->factor);
      // Written back in the layout the matmul reads, so its maps, bias-add
      // and uses stay as they are.
      auto rhsType = cast<RankedTensorType>(user.mm.rhs.getType());
      rewriter.setInsertionPoint(user.mm.op);
      Value weight = arith::ConstantOp::create(
          rewriter, user.mm.op->getLoc(), rhsType,
          writeConstantMatrix(user.rhsIsNK ? transpose(w) : w, rhsType,
                              threshold));
      rewriter.modifyOpInPlace(user.mm.op, [&] {
        user.mm.op->setOperand(0, scale->input);
        user.mm.op->setOperand(1, weight);
      });
      emitOptimizationRemark(user.mm.op,
                             "folded a constant input scale into the weight");
    }
    for (tensor::DimOp dim : dims)
      rewriter.modifyOpInPlace(
          dim, [&] { dim.getSourceMutable().assign(scale->input); });
    rewriter.eraseOp(op);
    ++counters->scales;
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
  patterns.add<FoldInputScale>(ctx, threshold, counters);
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
        else if (!isConstantMatrix(info->rhs))
          why = "weight " + describeValue(info->weight) + " is not a constant";
        else if (info->biasAdd && !isConstantMatrix(info->biasAdd->bias))
          why = "bias " + describeValue(info->biasAdd->bias) +
                " is not a constant";
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
  PassStatistic numMatmulsRemoved{this, "matmuls-removed",
                                  "Number of matmuls removed by folding"};
};

} // namespace

void mlir::linfuse::populateFoldMatmulChainsPatterns(
    RewritePatternSet &patterns, FoldPolicy policy, int64_t resourceThreshold) {
  addPatterns(patterns, policy, resourceThreshold,
              std::make_shared<FoldCounters>());
}
