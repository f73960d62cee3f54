//===- RaiseToGemm.cpp - linalg matmuls to linfuse.gemm -------------------===//
//
// The lowering targets one op: `linfuse.gemm`, which a backend turns into a
// single BLAS / cuBLASLt call. This pass raises `linalg.matmul` and
// `linalg.batch_matmul` (plain or transposed operand maps) into it, and
// absorbs what such a call can do in its epilogue: a zero accumulator
// (beta = 0, so C is not even read), a following bias-add, a following
// activation (relu, gelu in either form, silu) and a truncation of the f32
// result to the operands' f16/bf16, each when it is the only user of what
// came before.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/IR/LinfuseDialect.h"
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"
#include "linfuse/Dialect/Linfuse/Transforms/ActivationMatcher.h"
#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_RAISETOGEMMPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

namespace {

struct RaiseCounters {
  int64_t gemms = 0, biases = 0, activations = 0, narrowed = 0;
};

/// Which operands a matmul's indexing maps transpose, if the maps are one
/// of the four (plain / transposed A / transposed B / both) forms, with
/// `batched` adding a leading batch loop to every operand.
std::optional<std::pair<bool, bool>> matchTransposes(linalg::LinalgOp op,
                                                     bool batched) {
  MLIRContext *ctx = op.getContext();
  unsigned nb = batched ? 1 : 0;
  auto map = [&](unsigned r, unsigned c) {
    SmallVector<AffineExpr> exprs;
    if (batched)
      exprs.push_back(getAffineDimExpr(0, ctx));
    exprs.push_back(getAffineDimExpr(nb + r, ctx));
    exprs.push_back(getAffineDimExpr(nb + c, ctx));
    return AffineMap::get(nb + 3, 0, exprs, ctx);
  };
  // Loops (b,) m, n, k = 0, 1, 2 after the batch.
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps.size() != 3 || maps[2] != map(0, 1))
    return std::nullopt;
  bool ta, tb;
  if (maps[0] == map(0, 2))
    ta = false;
  else if (maps[0] == map(2, 0))
    ta = true;
  else
    return std::nullopt;
  if (maps[1] == map(2, 1))
    tb = false;
  else if (maps[1] == map(1, 2))
    tb = true;
  else
    return std::nullopt;
  return std::make_pair(ta, tb);
}

bool isGemmFloat(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

/// The single user of `v`, if it has exactly one use.
Operation *singleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// Whether `user` only truncates `v` (f32) to `narrow`, element by element,
/// with the default rounding (to nearest even).
bool isTruncationOf(Operation *user, Value v, Type narrow) {
  Value input;
  auto trunc = dyn_cast_or_null<arith::TruncFOp>(
      user && user->getNumResults() == 1
          ? matchElementwiseUnary(user->getResult(0), input)
          : nullptr);
  return trunc && input == v && trunc.getType() == narrow &&
         !trunc.getRoundingmodeAttr();
}

/// `bias` (f32) as the same values in `narrow`, where they are exactly
/// representable there: a constant whose every value converts exactly, the
/// narrow value an `arith.extf` generic widened (torch-mlir's bias), or a
/// concatenation of such (a merge's biases). Null otherwise.
Value narrowedBias(RewriterBase &rewriter, Value bias, Type narrow) {
  if (auto concat = bias.getDefiningOp<tensor::ConcatOp>()) {
    SmallVector<Value> parts;
    for (Value part : concat.getInputs()) {
      parts.push_back(narrowedBias(rewriter, part, narrow));
      if (!parts.back())
        return {};
    }
    return tensor::ConcatOp::create(rewriter, concat.getLoc(), concat.getDim(),
                                    parts);
  }
  DenseElementsAttr values;
  if (matchPattern(bias, m_Constant(&values))) {
    auto floatType = cast<FloatType>(narrow);
    SmallVector<APFloat> narrowed;
    for (APFloat v : values.getValues<APFloat>()) {
      bool lost = false;
      APFloat n = v;
      if (n.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &lost) != APFloat::opOK ||
          lost)
        return {};
      narrowed.push_back(n);
    }
    auto type = RankedTensorType::get(values.getType().getShape(), narrow);
    return arith::ConstantOp::create(rewriter, bias.getLoc(),
                                     DenseElementsAttr::get(type, narrowed));
  }
  Value source;
  if (isa_and_nonnull<arith::ExtFOp>(matchElementwiseUnary(bias, source)) &&
      getElementTypeOrSelf(source) == narrow)
    return source;
  // A packed argument whose values the packing function widened from
  // `narrow` (`linfuse.exact_in`, --linfuse-lift-weight-packing): truncated
  // back on each call, exactly (N values, against M x N for the result).
  auto arg = dyn_cast<BlockArgument>(bias);
  auto fn = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp())
                : FunctionOpInterface();
  auto type = dyn_cast<RankedTensorType>(bias.getType());
  if (!fn || !type || arg.getOwner() != &fn.getFunctionBody().front())
    return {};
  // Only the lifting's own claim, on a packed argument of a function it
  // made: a hand-written one is not taken on trust.
  auto exact =
      fn.getArgAttrOfType<TypeAttr>(arg.getArgNumber(), "linfuse.exact_in");
  if (!exact || exact.getValue() != narrow ||
      !fn.getArgAttr(arg.getArgNumber(), "linfuse.packed") ||
      !fn->hasAttr("linfuse.pack_function"))
    return {};
  Location loc = bias.getLoc();
  Value init = tensor::EmptyOp::create(
      rewriter, loc, tensor::getMixedSizes(rewriter, loc, bias), narrow);
  AffineMap id = rewriter.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> loops(type.getRank(),
                                         utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             rewriter, loc, TypeRange{init.getType()}, ValueRange{bias},
             ValueRange{init}, ArrayRef<AffineMap>{id, id}, loops,
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value t = arith::TruncFOp::create(b, l, narrow, args[0]);
               linalg::YieldOp::create(b, l, t);
             })
      ->getResult(0);
}

/// Why cuBLASLt's int8 GEMM would refuse C = A * op(B) at run time, as far
/// as the types show (nullptr if it would not): its kernels take only the
/// "TN" format (A row-major M x K, B row-major N x K: a plain
/// x * W^T linear) with N and K multiples of 4 (lib/Runtime/CudaGemmPlan.h,
/// int8Refusal). Such a matmul stays a loop nest rather than becoming a
/// call that fails.
const char *cudaInt8Refusal(Value b, std::pair<bool, bool> trans) {
  if (trans.first || !trans.second)
    return "cuBLASLt's int8 GEMM needs B stored N x K (transpose_b only)";
  auto bType = cast<ShapedType>(b.getType());
  int64_t n = bType.getDimSize(bType.getRank() - 2);
  int64_t k = bType.getDimSize(bType.getRank() - 1);
  if (ShapedType::isDynamic(n) || ShapedType::isDynamic(k) || n % 4 || k % 4)
    return "cuBLASLt's int8 GEMM needs static N and K, multiples of 4";
  return nullptr;
}

template <typename MatmulOpTy>
struct RaiseMatmul : OpRewritePattern<MatmulOpTy> {
  RaiseMatmul(MLIRContext *ctx, bool epilogues, bool cudaEpilogues,
              std::shared_ptr<RaiseCounters> counters)
      : OpRewritePattern<MatmulOpTy>(ctx), epilogues(epilogues),
        cudaEpilogues(cudaEpilogues), counters(std::move(counters)) {}

  LogicalResult matchAndRewrite(MatmulOpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool batched = std::is_same_v<MatmulOpTy, linalg::BatchMatmulOp>;
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    auto transposes = matchTransposes(op, batched);
    if (!transposes)
      return rewriter.notifyMatchFailure(op, "unsupported indexing maps");
    Value a = op.getDpsInputOperand(0)->get();
    Value b = op.getDpsInputOperand(1)->get();
    Value init = op.getDpsInitOperand(0)->get();
    Type abElt = getElementTypeOrSelf(a.getType());
    Type cElt = getElementTypeOrSelf(init.getType());
    Type bElt = getElementTypeOrSelf(b.getType());
    bool integer = abElt.isInteger(8);
    // What the merge takes, narrowed to what the GEMM computes: float C of
    // A's type or f32.
    if (!isGemmElementTypes(op, abElt, bElt, cElt) ||
        (!integer && (!isGemmFloat(abElt) || (cElt != abElt && !cElt.isF32()))))
      return rewriter.notifyMatchFailure(op, "unsupported element types");
    if (integer && cudaEpilogues)
      if (const char *why = cudaInt8Refusal(b, *transposes))
        return rewriter.notifyMatchFailure(op, why);

    // C += A·B: a zero fill means beta = 0 (C is not read). When the fill
    // fills a tensor.empty, it goes away and the GEMM writes the empty
    // tensor's buffer; a fill of anything else (say the LHS itself) stays,
    // so bufferization still sees a fresh destination.
    Value c = init;
    float beta = 1.0f;
    if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
      if (fill.hasPureTensorSemantics() &&
          (matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
           matchPattern(fill.getInputs()[0], m_Zero()))) {
        beta = 0.0f;
        if (fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
          c = fill.getOutputs()[0];
      }
    }

    Value result = op->getResult(0);
    SmallVector<Operation *, 2> absorbed;
    Operation *biasBroadcast = nullptr;
    Value bias;
    Epilogue epilogue = Epilogue::None;
    if (epilogues && !integer) {
      if (Operation *user = singleUser(result))
        if (std::optional<BiasAdd> add = matchBiasAdd(user, result)) {
          bias = add->bias;
          biasBroadcast = add->broadcast;
          result = add->result();
          absorbed.push_back(add->op);
        }
      // The activation must read the result as its input (not merely
      // overwrite it as its destination).
      if (Operation *user = singleUser(result);
          user && isa<linalg::GenericOp>(user) &&
          cast<linalg::GenericOp>(user).getNumDpsInputs() == 1 &&
          cast<linalg::GenericOp>(user).getDpsInputOperand(0)->get() == result)
        if (std::optional<Epilogue> act = matchActivation(user);
            act && this->isSupported(*act)) {
          epilogue = *act;
          result = user->getResult(0);
          absorbed.push_back(user);
        }
    }

    // The GEMM goes where the last absorbed op was: the bias (and anything
    // else it reads) dominates that point.
    rewriter.setInsertionPoint(absorbed.empty() ? op.getOperation()
                                                : absorbed.back());

    // An f32 result truncated to A's f16/bf16 right after (torch-mlir's
    // bf16 Linear, IREE's f16 contraction, a merge's members): the GEMM
    // writes that type itself. It rounds once, after the epilogue, to
    // nearest even, as `arith.truncf` does: the same values. A bias must
    // then be of that type, and is only taken where its values are exact
    // there.
    bool narrowC = false;
    if (epilogues && !integer && beta == 0.0f && cElt.isF32() && abElt != cElt)
      if (Operation *user = singleUser(result);
          user && isTruncationOf(user, result, abElt)) {
        Value narrowBias = bias ? narrowedBias(rewriter, bias, abElt) : Value();
        if (!bias || narrowBias) {
          rewriter.setInsertionPoint(user);
          bias = narrowBias;
          c = tensor::EmptyOp::create(
              rewriter, op.getLoc(),
              tensor::getMixedSizes(rewriter, op.getLoc(), c), abElt);
          result = user->getResult(0);
          absorbed.push_back(user);
          narrowC = true;
        }
      }

    auto gemm = GemmOp::create(rewriter, op.getLoc(), a, b, bias, c,
                               transposes->first, transposes->second, epilogue,
                               /*alpha=*/1.0f, beta);
    // An absorbed op may spell a static size the matmul left dynamic (or
    // the other way round): its users keep the type they had.
    Value replacement = gemm.getResult();
    if (replacement.getType() != result.getType())
      replacement = tensor::CastOp::create(rewriter, op.getLoc(),
                                           result.getType(), replacement);
    rewriter.replaceAllUsesWith(result, replacement);
    for (Operation *dead : llvm::reverse(absorbed))
      rewriter.eraseOp(dead);
    if (biasBroadcast && biasBroadcast->use_empty())
      rewriter.eraseOp(biasBroadcast);
    rewriter.eraseOp(op);

    ++counters->gemms;
    counters->biases += bias ? 1 : 0;
    counters->activations += epilogue != Epilogue::None;
    counters->narrowed += narrowC;
    if (remarksEnabled()) {
      std::string what = "raised to linfuse.gemm";
      if (bias)
        what += " with bias";
      if (epilogue != Epilogue::None)
        what += (bias ? " and " : " with ") +
                stringifyEpilogue(epilogue).str() + " epilogue";
      if (narrowC)
        what += ", writing its result rounded to " +
                std::string(abElt.isBF16() ? "bf16" : "f16");
      emitOptimizationRemark(gemm, what);
    }
    return success();
  }

  /// cuBLASLt has RELU and GELU (the tanh approximation) epilogues, not
  /// the erf form or SiLU.
  bool isSupported(Epilogue e) const {
    return !cudaEpilogues || e == Epilogue::Relu || e == Epilogue::GeluTanh;
  }

  bool epilogues, cudaEpilogues;
  std::shared_ptr<RaiseCounters> counters;
};

void addPatterns(RewritePatternSet &patterns, bool epilogues,
                 bool cudaEpilogues,
                 const std::shared_ptr<RaiseCounters> &counters) {
  MLIRContext *ctx = patterns.getContext();
  patterns
      .add<RaiseMatmul<linalg::MatmulOp>, RaiseMatmul<linalg::BatchMatmulOp>>(
          ctx, epilogues, cudaEpilogues, counters);
}

struct RaiseToGemmPass
    : public linfuse::impl::RaiseToGemmPassBase<RaiseToGemmPass> {
  using RaiseToGemmPassBase::RaiseToGemmPassBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      emitError(getOperation()->getLoc())
          << "linfuse-raise-to-gemm: unknown target '" << target
          << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    auto counters = std::make_shared<RaiseCounters>();
    RewritePatternSet patterns(&getContext());
    addPatterns(patterns, epilogues, target == "cuda", counters);
    // Only the matched ops change; no folding of unrelated IR.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    numGemms += counters->gemms;
    numBiases += counters->biases;
    numActivations += counters->activations;
    numNarrowed += counters->narrowed;
  }

  PassStatistic numGemms{this, "gemms-raised",
                         "Number of linalg matmuls raised to linfuse.gemm"};
  PassStatistic numBiases{this, "biases-fused",
                          "Number of bias-adds absorbed into a GEMM"};
  PassStatistic numActivations{this, "activations-fused",
                               "Number of activations absorbed into a GEMM "
                               "epilogue"};
  PassStatistic numNarrowed{this, "truncations-fused",
                            "Number of f32 results truncated to f16/bf16 "
                            "that the GEMM writes in that type"};
};

} // namespace

void mlir::linfuse::populateRaiseToGemmPatterns(RewritePatternSet &patterns,
                                                bool epilogues,
                                                bool cudaEpilogues) {
  addPatterns(patterns, epilogues, cudaEpilogues,
              std::make_shared<RaiseCounters>());
}
