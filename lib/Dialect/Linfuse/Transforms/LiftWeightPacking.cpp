//===- LiftWeightPacking.cpp - one-time packing of run-time weights -------===//
//
// When weights arrive as function arguments, the merge leaves a
// tensor.concat of them (and folding could leave products of them) in the
// function body, where it would run on every call. This pass moves all
// weight-only computation into `@f__pack`, to be run once at load time.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"

#include <functional>

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_LIFTWEIGHTPACKINGPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

static constexpr StringLiteral kWeightAttr = kWeightArgAttr;
static constexpr StringLiteral kPackedAttr = "linfuse.packed";
/// On a packed argument of @f: its values are all exact in this narrower
/// float type (a packed bias widened from bf16), which the lowering may use
/// to read it in that type (a GEMM writing bf16 needs a bf16 bias).
static constexpr StringLiteral kExactInAttr = "linfuse.exact_in";
static constexpr StringLiteral kPackFunctionAttr = "linfuse.pack_function";

namespace {
/// Which values of a function depend only on its weights and constants.
struct WeightAnalysis {
  llvm::DenseSet<Value> isStatic;
  /// Static ops that read a weight (directly or not), in program order: the
  /// ones to lift. Static ops that read no weight (constants, a
  /// tensor.empty) stay; copies go where lifted ops need them.
  SmallVector<Operation *> staticOps;
};
} // namespace

static WeightAnalysis analyze(func::FuncOp fn) {
  WeightAnalysis a;
  Block &entry = fn.getBody().front();
  llvm::DenseSet<Value> fromWeights;
  for (BlockArgument arg : entry.getArguments())
    if (fn.getArgAttr(arg.getArgNumber(), kWeightAttr)) {
      a.isStatic.insert(arg);
      fromWeights.insert(arg);
    }
  // Only the entry block's top level: an op in a loop or branch runs per
  // iteration or conditionally and stays where it is.
  for (Operation &op : entry.without_terminator()) {
    bool constant = op.hasTrait<OpTrait::ConstantLike>();
    bool pure = isMemoryEffectFree(&op) && op.getNumResults() > 0;
    if (!constant && !pure)
      continue;
    // Ops with regions qualify when their regions use nothing from outside
    // but static values (a linalg.generic's body uses its block arguments).
    bool allStatic = llvm::all_of(
        op.getOperands(), [&](Value v) { return a.isStatic.contains(v); });
    bool regionsClosed = true;
    op.walk([&](Operation *nested) {
      if (nested == &op)
        return;
      for (Value v : nested->getOperands())
        if (!op.isAncestor(v.getParentRegion()->getParentOp()) &&
            !a.isStatic.contains(v))
          regionsClosed = false;
    });
    if (!allStatic || !regionsClosed)
      continue;
    bool readsWeight = false;
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        readsWeight |= fromWeights.contains(v);
    });
    for (Value r : op.getResults()) {
      a.isStatic.insert(r);
      if (readsWeight)
        fromWeights.insert(r);
    }
    if (!constant && readsWeight)
      a.staticOps.push_back(&op);
  }
  return a;
}

namespace {
struct LiftWeightPackingPass
    : public linfuse::impl::LiftWeightPackingPassBase<LiftWeightPackingPass> {
  using LiftWeightPackingPassBase::LiftWeightPackingPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
    for (func::FuncOp fn : fns)
      if (!fn.isExternal() && failed(lift(fn, symbols)))
        return signalPassFailure();
  }

  LogicalResult lift(func::FuncOp fn, SymbolTable &symbols) {
    if (!fn.getBody().hasOneBlock())
      return success();
    Block &entry = fn.getBody().front();
    WeightAnalysis a = analyze(fn);
    if (a.staticOps.empty())
      return success();

    // Packed values: static results used by non-static code (lifted op
    // results first, then weights read directly).
    auto usedOutside = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        Operation *top = entry.findAncestorOpInBlock(*user);
        return !top || !llvm::is_contained(a.staticOps, top);
      });
    };
    // Only tensors are packed: a weight-derived size (`tensor.dim` of a
    // weight with a dynamic dimension, arithmetic on it) is computed again
    // in @f from the packed tensors' descriptors (`sizes`), and the tensors
    // it reads are packed for it.
    SmallVector<Value> packed, sizes;
    auto packTensor = [&](Value v) {
      if (!llvm::is_contained(packed, v))
        packed.push_back(v);
    };
    for (Operation *op : a.staticOps)
      for (Value r : op->getResults())
        if (usedOutside(r))
          (isa<ShapedType>(r.getType()) ? packed : sizes).push_back(r);
    // Which packed values are widenings (of a narrower float type, as an
    // element-wise extf or a concatenation of such): computed before the
    // lifted ops go away.
    std::function<Type(Value)> exactIn = [&](Value v) -> Type {
      if (auto concat = v.getDefiningOp<tensor::ConcatOp>()) {
        Type common;
        for (Value part : concat.getInputs()) {
          Type t = exactIn(part);
          if (!t || (common && t != common))
            return {};
          common = t;
        }
        return common;
      }
      Value input;
      if (isa_and_nonnull<arith::ExtFOp>(matchElementwiseUnary(v, input)))
        return getElementTypeOrSelf(input);
      return {};
    };
    SmallVector<BlockArgument> weights;
    for (BlockArgument arg : entry.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), kWeightAttr)) {
        weights.push_back(arg);
        if (usedOutside(arg))
          packTensor(arg);
      }
    if (failed(collectSizeSources(sizes, packTensor)))
      return failure();

    SmallVector<Type> exact = llvm::map_to_vector(packed, exactIn);

    // @f__pack(weights...) -> packed...
    OpBuilder b(fn);
    SmallVector<Type> weightTypes = llvm::map_to_vector(
        weights, [](BlockArgument w) { return w.getType(); });
    SmallVector<Type> packedTypes =
        llvm::map_to_vector(packed, [](Value v) { return v.getType(); });
    auto pack =
        func::FuncOp::create(b, fn.getLoc(), (fn.getName() + "__pack").str(),
                             b.getFunctionType(weightTypes, packedTypes));
    pack.setVisibility(fn.getVisibility());
    for (auto [i, w] : llvm::enumerate(weights))
      pack.setArgAttrs(i, fn.getArgAttrDict(w.getArgNumber()));
    symbols.insert(pack); // Renames on a clash.
    Block *packBody = pack.addEntryBlock();
    IRMapping map;
    for (auto [w, arg] : llvm::zip_equal(weights, packBody->getArguments()))
      map.map(w, arg);
    OpBuilder pb = OpBuilder::atBlockEnd(packBody);
    // What the lifted ops read besides weights (constants, tensor.empty) is
    // cloned, not moved: the function may still use it too.
    std::function<void(Value)> cloneDeps = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (map.contains(v) || !def)
        return;
      for (Value operand : def->getOperands())
        cloneDeps(operand);
      pb.clone(*def, map);
    };
    for (Operation *op : a.staticOps) {
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (!op->isAncestor(v.getParentRegion()->getParentOp()))
            cloneDeps(v);
      });
      pb.clone(*op, map);
    }
    SmallVector<Value> results =
        llvm::map_to_vector(packed, [&](Value v) { return map.lookup(v); });
    func::ReturnOp::create(pb, fn.getLoc(), results);
    // One loop per packed weight where the lifted work is element-wise.
    RewritePatternSet fusion(pack.getContext());
    populateWeightPackingFusionPatterns(fusion);
    if (failed(applyPatternsGreedily(pack, std::move(fusion))))
      return pack.emitError("fusing the packing function's element-wise "
                            "work did not converge");

    // @f(others..., packed...): new block arguments replace the packed
    // values; the weight arguments and the lifted ops go away.
    unsigned firstPacked = entry.getNumArguments();
    IRMapping inF;
    for (Value v : packed)
      inF.map(v, entry.addArgument(v.getType(), v.getLoc()));
    OpBuilder fb = OpBuilder::atBlockBegin(&entry);
    for (Value size : sizes)
      size.replaceAllUsesWith(rematerialize(fb, size, inF));
    for (Value v : packed)
      v.replaceAllUsesWith(inF.lookup(v));
    for (Operation *op : llvm::reverse(a.staticOps))
      op->erase();
    // What only the lifted ops read (their tensor.empty, constants) is dead.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
      if (isOpTriviallyDead(&op) && llvm::all_of(op.getResults(), [&](Value r) {
            return a.isStatic.contains(r);
          }))
        op.erase();
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    llvm::BitVector erase(entry.getNumArguments());
    for (BlockArgument arg : entry.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (i < firstPacked && fn.getArgAttr(i, kWeightAttr)) {
        erase.set(i);
        continue;
      }
      argTypes.push_back(arg.getType());
      if (i < firstPacked)
        argAttrs.push_back(fn.getArgAttrDict(i));
      else {
        SmallVector<NamedAttribute> attrs = {
            b.getNamedAttr(kPackedAttr, b.getI64IntegerAttr(i - firstPacked))};
        if (Type t = exact[i - firstPacked])
          attrs.push_back(b.getNamedAttr(kExactInAttr, TypeAttr::get(t)));
        argAttrs.push_back(b.getDictionaryAttr(attrs));
      }
    }
    entry.eraseArguments(erase);
    fn.setFunctionType(b.getFunctionType(argTypes, fn.getResultTypes()));
    fn.setAllArgAttrs(argAttrs);
    fn->setAttr(kPackFunctionAttr,
                FlatSymbolRefAttr::get(pack.getSymNameAttr()));

    emitOptimizationRemark(pack, "lifted " + Twine(a.staticOps.size()) +
                                     " weight-only ops of @" + fn.getName() +
                                     " into a one-time packing function");
    ++numFunctions;
    numOps += a.staticOps.size();
    return success();
  }

  /// The packed tensors the weight-derived `sizes` are computed from (the
  /// sources of their `tensor.dim`s), passed to `pack`; fails, with an error
  /// at the op, on a size computed otherwise.
  static LogicalResult
  collectSizeSources(ArrayRef<Value> sizes,
                     llvm::function_ref<void(Value)> pack) {
    SmallVector<Value> work(sizes.begin(), sizes.end());
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!seen.insert(v).second || isa<BlockArgument>(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (auto dim = dyn_cast<tensor::DimOp>(def)) {
        pack(dim.getSource());
        work.push_back(dim.getIndex());
        continue;
      }
      if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
        return def->emitError("a weight-derived ")
               << v.getType() << " cannot be lifted: only tensors are packed";
      llvm::append_range(work, def->getOperands());
    }
    return success();
  }

  /// `v` (a weight-derived size) computed again at `b`'s insertion point
  /// from what `inF` maps (the packed tensors' arguments of @f).
  static Value rematerialize(OpBuilder &b, Value v, IRMapping &inF) {
    if (Value done = inF.lookupOrNull(v))
      return done;
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      rematerialize(b, operand, inF);
    Operation *copy = b.clone(*def, inF);
    return copy->getResult(cast<OpResult>(v).getResultNumber());
  }

  PassStatistic numFunctions{this, "functions-lifted",
                             "Number of functions given a packing function"};
  PassStatistic numOps{this, "ops-lifted",
                       "Number of weight-only ops moved into packing "
                       "functions"};
};
} // namespace
