//===- MergeParallelMatmuls.cpp - horizontal matmul merging ---------------===//
//
// Matmuls that read the same input (Q/K/V, gate/up) become one matmul over
// concatenated weights plus zero-copy slices; matmuls that read the same
// weight become one matmul over concatenated inputs. The legality rules are
// the ones XLA's DotMerger, TVM's CombineParallelMatmul and IREE's horizontal
// contraction fusion converged on: same operand after CSE, same K and element
// types, no member depending on another, and a placement where every operand
// dominates the merged op and the merged op dominates every user.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/MergeParallelMatmuls.h"
#include "linfuse/Dialect/Linfuse/Transforms/MatmulBuilders.h"
#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightValues.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "linfuse-merge-parallel-matmuls"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_MERGEPARALLELMATMULSPASS
#include "linfuse/Dialect/Linfuse/Transforms/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

/// True for an operand-less constant (weights, biases, fill scalars): the
/// rewrite may move it up to the merged op, so it never limits placement.
static bool isMovableConstant(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->hasTrait<OpTrait::ConstantLike>();
}

/// Everything `op` reads: its operands and the values its regions use from
/// above (a scalar captured by a linalg.generic body).
static SetVector<Value> readsOf(Operation *op) {
  SetVector<Value> reads(op->operand_begin(), op->operand_end());
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, reads);
  return reads;
}

/// True for a side-effect free op of weight preprocessing that the rewrite
/// re-materializes at the merged op: what it computes depends on constants
/// and `linfuse.weight` arguments alone (an importer's cast, transpose,
/// reshape or dequantization of a weight, emitted next to each use), so
/// like a constant it does not limit placement. Ops reading a run-time
/// value stay where they are, and so do matmuls and what reads a matmul
/// (a bias-add): another group may be rewriting those.
static bool isRematerializable(Operation *op) {
  if (!op || op->getNumResults() == 0 || !isMemoryEffectFree(op) ||
      isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
      !isLoadTimeValue(op->getResult(0)))
    return false;
  return llvm::none_of(readsOf(op), [](Value v) {
    return isa_and_nonnull<linalg::MatmulOp, linalg::BatchMatmulOp>(
        v.getDefiningOp());
  });
}

/// The later of two anchors (null = block start).
static Operation *laterOf(Operation *a, Operation *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a->isBeforeInBlock(b) ? b : a;
}

/// The last op of `block` that must come before a use of `v` at the merged
/// op: the op that is or contains the definition of `v`, or, when that is
/// re-materialized there, the last such op among what it reads. Null when
/// nothing in `block` limits the placement (`v` is defined outside `block`,
/// is one of its arguments, or is computed from constants and weights
/// alone). `memo` caches answers across one placement query.
static Operation *definerInBlock(Block &block, Value v,
                                 DenseMap<Value, Operation *> &memo) {
  Operation *def = v.getDefiningOp();
  if (!def || isMovableConstant(def))
    return nullptr;
  Operation *inBlock = block.findAncestorOpInBlock(*def);
  if (!inBlock || inBlock != def || !isRematerializable(def))
    return inBlock;
  auto [it, inserted] = memo.try_emplace(v, nullptr);
  if (!inserted)
    return it->second;
  Operation *latest = nullptr;
  for (Value read : readsOf(def))
    latest = laterOf(latest, definerInBlock(block, read, memo));
  memo[v] = latest;
  return latest;
}

/// The ops of `member` that disappear when it is merged.
static SmallVector<Operation *, 2> memberOps(const MatmulInfo &member,
                                             MergeKind kind) {
  SmallVector<Operation *, 2> ops{member.op};
  // Shared-LHS groups absorb the bias-adds; shared-RHS groups leave them on
  // the slices.
  if (member.biasAdd && kind == MergeKind::SharedLhs)
    ops.push_back(member.biasAdd->op);
  return ops;
}

/// The value a merge replaces by a slice.
static Value replacedValue(const MatmulInfo &member, MergeKind kind) {
  return kind == MergeKind::SharedLhs ? member.finalResult()
                                      : member.op->getResult(0);
}

/// Operands the merged computation needs from `member`, besides the shared
/// one. The accumulator is only needed when accumulators are concatenated.
static SmallVector<Value> neededValues(const MatmulInfo &member, MergeKind kind,
                                       bool concatInits) {
  SmallVector<Value> values;
  values.push_back(member.lhs);
  values.push_back(kind == MergeKind::SharedLhs ? member.weight : member.rhs);
  if (concatInits)
    values.push_back(member.init);
  if (member.biasAdd && kind == MergeKind::SharedLhs)
    values.push_back(member.biasAdd->bias);
  return values;
}

/// True when some op of `to` is in the backward slice of an op of `from`.
/// Only ops of the block at or after `horizon` are visited: nothing before
/// the group's first member can depend on a member, which keeps the walk
/// local (a layer, not the whole model).
static bool dependsOn(ArrayRef<Operation *> from, ArrayRef<Operation *> to,
                      Operation *horizon) {
  Block *block = horizon->getBlock();
  BackwardSliceOptions options;
  options.inclusive = false;
  options.omitBlockArguments = true;
  options.filter = [&](Operation *op) {
    Operation *inBlock = block->findAncestorOpInBlock(*op);
    return inBlock && !inBlock->isBeforeInBlock(horizon);
  };
  SetVector<Operation *> slice;
  for (Operation *op : from)
    (void)getBackwardSlice(op, &slice, options);
  return llvm::any_of(to, [&](Operation *op) { return slice.contains(op); });
}

/// The first user of `member`'s result that does not come after `anchor`
/// (the merged op could not dominate it), or null when every one does.
static Operation *userNotFollowing(Block &block, const MatmulInfo &member,
                                   MergeKind kind, Operation *anchor) {
  if (!anchor)
    return nullptr;
  for (Operation *user : replacedValue(member, kind).getUsers()) {
    Operation *inBlock = block.findAncestorOpInBlock(*user);
    if (!inBlock || !anchor->isBeforeInBlock(inBlock))
      return user;
  }
  return nullptr;
}

/// "model.py:12:9": where an op is, as remarks name it (the innermost file
/// location of a fused or named one).
static std::string describeLoc(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else
    loc.print(os);
  return text;
}

/// "linalg.generic at model.py:12:9": an op as remarks name it.
static std::string describeOp(Operation *op) {
  return op->getName().getStringRef().str() + " at " +
         describeLoc(op->getLoc());
}

namespace {
/// Builds legal groups greedily, in program order, from candidates that
/// already agree on everything the group key checks.
class GroupBuilder {
public:
  GroupBuilder(Block &block, MergeKind kind, const MergeOptions &options)
      : block(block), kind(kind), options(options) {}

  /// Why `candidate` cannot join a group of `head` alone (a missed-merge
  /// remark), or nullopt when it can.
  std::optional<std::string> whyNot(const MatmulInfo &head,
                                    const MatmulInfo &candidate) {
    MergeGroup group;
    group.kind = kind;
    std::string why;
    if (!tryAdd(group, head, &why))
      return why;
    if (!tryAdd(group, candidate, &why))
      return why;
    return std::nullopt;
  }

  void build(ArrayRef<MatmulInfo> candidates,
             SmallVectorImpl<MergeGroup> &groups) {
    SmallVector<MatmulInfo> remaining(candidates.begin(), candidates.end());
    while (remaining.size() >= options.minGroupSize) {
      MergeGroup group;
      group.kind = kind;
      SmallVector<bool> taken(remaining.size(), false);
      for (auto [index, candidate] : llvm::enumerate(remaining)) {
        if (tryAdd(group, candidate))
          taken[index] = true;
      }
      bool kept = group.members.size() >= options.minGroupSize;
      if (kept)
        groups.push_back(group);
      // What the group did not keep may still form one without the head
      // (the head is dropped either way, so the loop terminates).
      SmallVector<MatmulInfo> rest;
      for (auto [index, candidate] : llvm::enumerate(remaining))
        if (index != 0 && !(kept && taken[index]))
          rest.push_back(candidate);
      remaining = std::move(rest);
    }
  }

private:
  int64_t concatBytesOf(const MatmulInfo &member) const {
    if (kind == MergeKind::SharedLhs)
      return member.weightBytes();
    auto lhsType = cast<ShapedType>(member.lhs.getType());
    if (!lhsType.hasStaticShape())
      return 0; // Unknown until run time; the cap cannot apply.
    return getByteSize(lhsType);
  }

  /// The scalar to fill the merged accumulator with, if all accumulators of
  /// `members` are fills of one constant; null otherwise.
  static Value commonFill(ArrayRef<MatmulInfo> members) {
    std::optional<Attribute> first = matchConstantFill(members.front().init);
    if (!first)
      return Value();
    for (const MatmulInfo &m : members.drop_front())
      if (matchConstantFill(m.init) != first)
        return Value();
    return members.front().init.getDefiningOp<linalg::FillOp>().getInputs()[0];
  }

  bool tryAdd(MergeGroup &group, const MatmulInfo &candidate,
              std::string *why = nullptr) {
    int64_t bytes = group.concatBytes + concatBytesOf(candidate);
    if (bytes > options.maxMergedBytes) {
      LLVM_DEBUG(llvm::dbgs() << "skip (size cap " << options.maxMergedBytes
                              << " B): " << *candidate.op << "\n");
      if (why)
        *why = "the concatenated weights would be " + std::to_string(bytes) +
               " bytes, over max-merged-bytes=" +
               std::to_string(options.maxMergedBytes);
      return false;
    }
    SmallVector<MatmulInfo> members(group.members);
    members.push_back(candidate);

    // No member may depend on another, in either direction (a member's
    // bias-add may come after the candidate).
    if (!group.members.empty()) {
      Operation *horizon = group.members.front().op;
      SmallVector<Operation *> candOps(memberOps(candidate, kind));
      SmallVector<Operation *> groupOps;
      for (const MatmulInfo &member : group.members)
        llvm::append_range(groupOps, memberOps(member, kind));
      if (dependsOn(candOps, groupOps, horizon) ||
          dependsOn(groupOps, candOps, horizon)) {
        LLVM_DEBUG(llvm::dbgs()
                   << "skip (dependency): " << *candidate.op << "\n");
        if (why)
          *why = "one depends on the other";
        return false;
      }
    }

    // Placement: after every needed operand, before every user.
    Value fill = commonFill(members);
    Operation *anchor = nullptr;
    DenseMap<Value, Operation *> memo;
    for (const MatmulInfo &member : members) {
      for (Value v : neededValues(member, kind, /*concatInits=*/!fill))
        anchor = laterOf(anchor, definerInBlock(block, v, memo));
    }
    if (fill)
      anchor = laterOf(anchor, definerInBlock(block, fill, memo));
    for (const MatmulInfo &member : members) {
      if (Operation *user = userNotFollowing(block, member, kind, anchor)) {
        LLVM_DEBUG(llvm::dbgs() << "skip (no placement dominates all uses): "
                                << *candidate.op << "\n");
        if (why)
          *why = "no place for the merged matmul: " + describeOp(user) +
                 " uses one before " + describeOp(anchor) +
                 " defines what the other reads";
        return false;
      }
    }

    group.members = std::move(members);
    group.anchor = anchor;
    group.fillScalar = fill;
    group.concatBytes = bytes;
    return true;
  }

  Block &block;
  MergeKind kind;
  const MergeOptions &options;
};
} // namespace

/// What two matmuls reading one input disagree on that a shared-LHS
/// group needs them to agree on ("" when nothing): the group key, and the
/// reason a missed-merge remark gives.
static std::string keyDifference(const MatmulInfo &a, const MatmulInfo &b) {
  auto typeText = [](Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  };
  if (a.lhsMap != b.lhsMap || a.batched != b.batched || a.batch != b.batch)
    return "different layouts of the shared input (indexing maps or batch)";
  if (a.k != b.k)
    return "different K (" + std::to_string(a.k) + " vs " +
           std::to_string(b.k) + ")";
  if (a.weightElementType() != b.weightElementType())
    return "different weight types (" + typeText(a.weightElementType()) +
           " vs " + typeText(b.weightElementType()) + ")";
  if (a.resultElementType() != b.resultElementType())
    return "different result types (" + typeText(a.resultElementType()) +
           " vs " + typeText(b.resultElementType()) + ")";
  // A member without a bias-add merges with ones that have one: it gets a
  // bias of -0.0, which leaves every value as it was (x + -0.0 == x, -0.0
  // and NaN included). Parallel attention + MLP blocks read one norm with
  // a bias-free Q/K/V and a biased fc_in (CodeGen, GPT-J in bf16).
  return "";
}

/// Members of one shared-LHS group agree on all of this.
static bool sameLhsKey(const MatmulInfo &a, const MatmulInfo &b) {
  return a.lhs == b.lhs && keyDifference(a, b).empty();
}

/// Members of one shared-RHS group agree on all of this.
static bool sameRhsKey(const MatmulInfo &a, const MatmulInfo &b) {
  return a.rhs == b.rhs && !a.batched && !b.batched && !a.lhsTransposed &&
         !b.lhsTransposed && a.maps == b.maps &&
         a.lhsElementType() == b.lhsElementType() &&
         a.resultElementType() == b.resultElementType();
}

/// Splits `candidates` into buckets whose members agree on `sameKey`,
/// keeping program order inside each bucket. Candidates are first hashed on
/// the shared operand so the work stays linear in the number of matmuls.
template <typename KeyFn>
static SmallVector<SmallVector<MatmulInfo>>
bucketBy(ArrayRef<MatmulInfo> candidates,
         Value (*sharedOperand)(const MatmulInfo &), KeyFn sameKey) {
  SmallVector<SmallVector<MatmulInfo>> buckets;
  DenseMap<Value, SmallVector<unsigned, 2>> bucketsByOperand;
  for (const MatmulInfo &c : candidates) {
    SmallVector<unsigned, 2> &ids = bucketsByOperand[sharedOperand(c)];
    auto it = llvm::find_if(
        ids, [&](unsigned id) { return sameKey(buckets[id].front(), c); });
    if (it == ids.end()) {
      ids.push_back(buckets.size());
      buckets.push_back({c});
    } else {
      buckets[*it].push_back(c);
    }
  }
  return buckets;
}

static Value lhsOf(const MatmulInfo &m) { return m.lhs; }
static Value rhsOf(const MatmulInfo &m) { return m.rhs; }

SmallVector<MergeGroup>
mlir::linfuse::findMergeGroups(Block &block, const MergeOptions &options) {
  SmallVector<MatmulInfo> candidates;
  for (Operation &op : block)
    if (std::optional<MatmulInfo> info = matchMatmul(&op))
      candidates.push_back(*info);

  SmallVector<MergeGroup> groups;
  unsigned minSize = std::max(options.minGroupSize, 2u);
  MergeOptions effective = options;
  effective.minGroupSize = minSize;
  for (auto &bucket : bucketBy(candidates, lhsOf, sameLhsKey))
    if (bucket.size() >= minSize)
      GroupBuilder(block, MergeKind::SharedLhs, effective)
          .build(bucket, groups);
  if (!options.mergeSharedRhs)
    return groups;

  // Shared-RHS merging only considers matmuls no shared-LHS group took.
  llvm::SmallPtrSet<Operation *, 16> taken;
  for (const MergeGroup &g : groups)
    for (const MatmulInfo &m : g.members)
      taken.insert(m.op);
  SmallVector<MatmulInfo> rest;
  for (const MatmulInfo &c : candidates)
    if (!taken.contains(c.op))
      rest.push_back(c);
  for (auto &bucket : bucketBy(rest, rhsOf, sameRhsKey))
    if (bucket.size() >= minSize)
      GroupBuilder(block, MergeKind::SharedRhs, effective)
          .build(bucket, groups);
  return groups;
}

void mlir::linfuse::explainMissedMerges(Block &block,
                                        const MergeOptions &options) {
  DenseMap<Value, SmallVector<MatmulInfo, 2>> byLhs;
  SmallVector<Value> order;
  for (Operation &op : block)
    if (std::optional<MatmulInfo> info = matchMatmul(&op)) {
      auto &list = byLhs[info->lhs];
      if (list.empty())
        order.push_back(info->lhs);
      list.push_back(*info);
    }
  MergeOptions pair = options;
  pair.minGroupSize = 2;
  for (Value lhs : order) {
    ArrayRef<MatmulInfo> siblings = byLhs[lhs];
    // Each later sibling against the first one reading the input.
    const MatmulInfo &head = siblings.front();
    for (const MatmulInfo &other : siblings.drop_front()) {
      std::string why = keyDifference(head, other);
      if (why.empty()) {
        GroupBuilder builder(block, MergeKind::SharedLhs, pair);
        why = builder.whyNot(head, other).value_or("");
      }
      if (why.empty())
        continue;
      emitOptimizationRemark(other.op, "not merged with the matmul at " +
                                           describeLoc(head.op->getLoc()) +
                                           ", both reading " +
                                           describeValue(lhs) + ": " + why);
    }
  }
}

//===----------------------------------------------------------------------===//
// Rewrite
//===----------------------------------------------------------------------===//

static Value concatOrSelf(OpBuilder &b, Location loc, int64_t dim,
                          ArrayRef<Value> values) {
  if (values.size() == 1)
    return values.front();
  return tensor::ConcatOp::create(b, loc, dim, values);
}

/// Transposes the last two dims of a weight.
static Value transposeLastTwo(OpBuilder &b, Location loc, Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  SmallVector<OpFoldResult> sizes =
      applyPermutation(tensor::getMixedSizes(b, loc, weight), perm);
  Value init = tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
  return linalg::TransposeOp::create(b, loc, weight, init, perm)->getResult(0);
}

/// `(d0, ..., d{n-1}) -> (d_i...)` over the matmul's loops.
static AffineMap loopsMap(MLIRContext *ctx, bool batched,
                          std::initializer_list<unsigned> dims) {
  unsigned numDims = batched ? 4 : 3;
  SmallVector<AffineExpr> exprs;
  if (batched)
    exprs.push_back(getAffineDimExpr(0, ctx));
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d + (batched ? 1 : 0), ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

/// The merged accumulator: one fill, or the members' accumulators
/// concatenated along `dim`.
static Value mergedInit(OpBuilder &b, Location loc, const MergeGroup &group,
                        RankedTensorType type, ValueRange dynamicSizes,
                        int64_t dim) {
  if (group.fillScalar)
    return buildFilledTensor(b, loc, type, dynamicSizes, group.fillScalar);
  SmallVector<Value> inits = llvm::map_to_vector(
      group.members, [](const MatmulInfo &m) { return m.init; });
  return concatOrSelf(b, loc, dim, inits);
}

/// Creates a matmul of the same kind as `like` with explicit maps.
static linalg::LinalgOp createMatmul(OpBuilder &b, Location loc,
                                     const MatmulInfo &like,
                                     RankedTensorType type, Value lhs,
                                     Value rhs, Value init,
                                     ArrayRef<AffineMap> maps) {
  Operation *op;
  if (like.batched)
    op = linalg::BatchMatmulOp::create(b, loc, TypeRange{type},
                                       ValueRange{lhs, rhs}, ValueRange{init});
  else
    op = linalg::MatmulOp::create(b, loc, TypeRange{type}, ValueRange{lhs, rhs},
                                  ValueRange{init});
  op->setAttr("indexing_maps",
              b.getAffineMapArrayAttr(SmallVector<AffineMap>(maps)));
  return cast<linalg::LinalgOp>(op);
}

/// True when some member adds a bias (the others then get a -0.0 one).
static bool anyBiasAdd(ArrayRef<MatmulInfo> members) {
  return llvm::any_of(
      members, [](const MatmulInfo &m) { return m.biasAdd.has_value(); });
}

/// Replaces each member's result by its slice and erases the member.
static void replaceMembers(RewriterBase &rewriter, const MergeGroup &group,
                           ArrayRef<Value> slices) {
  for (auto [member, slice] : llvm::zip_equal(group.members, slices)) {
    rewriter.replaceAllUsesWith(member.finalResult(), slice);
    if (member.biasAdd) {
      rewriter.eraseOp(member.biasAdd->op);
      if (Operation *broadcast = member.biasAdd->broadcast;
          broadcast && broadcast->use_empty())
        rewriter.eraseOp(broadcast);
    }
    rewriter.eraseOp(member.op);
  }
}

static FailureOr<linalg::LinalgOp>
mergeSharedLhs(RewriterBase &rewriter, const MergeGroup &group, Location loc) {
  const MatmulInfo &first = group.members.front();
  MLIRContext *ctx = rewriter.getContext();
  bool batched = first.batched;

  // Normalize every weight to the layout most members already have, so
  // only the minority gets a (compile-time, for constants) transpose.
  unsigned numNK = llvm::count_if(group.members, [](const MatmulInfo &m) {
    return m.layout == WeightLayout::NK;
  });
  WeightLayout layout =
      2 * numNK >= group.members.size() ? WeightLayout::NK : WeightLayout::KN;
  SmallVector<Value> weights;
  int64_t totalN = 0;
  for (const MatmulInfo &m : group.members) {
    weights.push_back(m.layout == layout
                          ? m.weight
                          : transposeLastTwo(rewriter, loc, m.weight));
    totalN += m.n;
  }
  int64_t weightNDim = (batched ? 1 : 0) + (layout == WeightLayout::NK ? 0 : 1);
  Value weight = concatOrSelf(rewriter, loc, weightNDim, weights);

  auto firstType = cast<RankedTensorType>(first.op->getResult(0).getType());
  SmallVector<int64_t> shape(firstType.getShape());
  shape.back() = totalN;
  auto type = RankedTensorType::get(shape, firstType.getElementType());
  SmallVector<Value> dynSizes =
      dynamicSizesFromLhs(rewriter, loc, first.lhs, first.lhsMap, type);
  Value init =
      mergedInit(rewriter, loc, group, type, dynSizes, type.getRank() - 1);

  // Loop dims: m = 0, n = 1, k = 2 (after the batch dim when batched).
  AffineMap rhsMap = layout == WeightLayout::NK
                         ? loopsMap(ctx, batched, {1, 2})
                         : loopsMap(ctx, batched, {2, 1});
  linalg::LinalgOp merged =
      createMatmul(rewriter, loc, first, type, first.lhs, weight, init,
                   {first.lhsMap, rhsMap, loopsMap(ctx, batched, {0, 1})});
  Value result = merged->getResult(0);

  if (anyBiasAdd(group.members)) {
    // Bias-add and result share the element type (matchBiasAdd), and the
    // members share the result type (keyDifference).
    Type element = type.getElementType();
    SmallVector<Value> biases =
        llvm::map_to_vector(group.members, [&](const MatmulInfo &m) -> Value {
          if (m.biasAdd)
            return m.biasAdd->bias;
          auto zeros =
              DenseElementsAttr::get(RankedTensorType::get({m.n}, element),
                                     rewriter.getFloatAttr(element, -0.0));
          return arith::ConstantOp::create(rewriter, loc, zeros);
        });
    result = buildBiasAdd(rewriter, loc, result,
                          concatOrSelf(rewriter, loc, 0, biases), dynSizes);
  }

  // Slices along N: offsets are static, leading sizes may be dynamic.
  SmallVector<Value> slices;
  int64_t offset = 0;
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> leadingSizes;
  for (int64_t i = 0, dyn = 0; i < rank; ++i)
    leadingSizes.push_back(
        type.isDynamicDim(i)
            ? OpFoldResult(dynSizes[dyn++])
            : OpFoldResult(rewriter.getIndexAttr(type.getDimSize(i))));
  for (const MatmulInfo &m : group.members) {
    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes(leadingSizes);
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    offsets.back() = rewriter.getIndexAttr(offset);
    sizes.back() = rewriter.getIndexAttr(m.n);
    slices.push_back(tensor::ExtractSliceOp::create(
        rewriter, loc, cast<RankedTensorType>(m.finalResult().getType()),
        result, offsets, sizes, strides));
    offset += m.n;
  }
  replaceMembers(rewriter, group, slices);
  return merged;
}

static FailureOr<linalg::LinalgOp>
mergeSharedRhs(RewriterBase &rewriter, const MergeGroup &group, Location loc) {
  const MatmulInfo &first = group.members.front();
  SmallVector<Value> lhss = llvm::map_to_vector(
      group.members, [](const MatmulInfo &m) { return m.lhs; });
  Value lhs = concatOrSelf(rewriter, loc, 0, lhss);

  auto firstType = cast<RankedTensorType>(first.op->getResult(0).getType());
  int64_t totalM = cast<RankedTensorType>(lhs.getType()).getDimSize(0);
  auto type = RankedTensorType::get({totalM, firstType.getDimSize(1)},
                                    firstType.getElementType());
  SmallVector<Value> dynSizes;
  if (ShapedType::isDynamic(totalM))
    dynSizes.push_back(tensor::DimOp::create(rewriter, loc, lhs, 0));
  Value init = mergedInit(rewriter, loc, group, type, dynSizes, 0);
  linalg::LinalgOp merged = createMatmul(rewriter, loc, first, type, lhs,
                                         first.rhs, init, first.maps);

  // Slices along M; offsets are sums of (possibly dynamic) row counts.
  SmallVector<Value> slices;
  OpFoldResult offset = rewriter.getIndexAttr(0);
  for (const MatmulInfo &m : group.members) {
    OpFoldResult rows = tensor::getMixedSize(rewriter, loc, m.lhs, 0);
    SmallVector<OpFoldResult> offsets{offset, rewriter.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes{rows, rewriter.getIndexAttr(first.n)};
    SmallVector<OpFoldResult> strides(2, rewriter.getIndexAttr(1));
    slices.push_back(tensor::ExtractSliceOp::create(
        rewriter, loc, cast<RankedTensorType>(m.op->getResult(0).getType()),
        merged->getResult(0), offsets, sizes, strides));
    if (&m == &group.members.back())
      break;
    std::optional<int64_t> a = getConstantIntValue(offset),
                           c = getConstantIntValue(rows);
    if (a && c) {
      offset = rewriter.getIndexAttr(*a + *c);
    } else if (a == 0) {
      offset = rows;
    } else {
      Value lhsV = getValueOrCreateConstantIndexOp(rewriter, loc, offset);
      Value rhsV = getValueOrCreateConstantIndexOp(rewriter, loc, rows);
      offset = arith::AddIOp::create(rewriter, loc, lhsV, rhsV).getResult();
    }
  }
  // Only the matmuls merge; a member's own bias-add keeps consuming its
  // slice, so it must be the matmul result that gets replaced.
  for (auto [member, slice] : llvm::zip_equal(group.members, slices)) {
    rewriter.replaceAllUsesWith(member.op->getResult(0), slice);
    rewriter.eraseOp(member.op);
  }
  return merged;
}

FailureOr<linalg::LinalgOp> mlir::linfuse::mergeGroup(RewriterBase &rewriter,
                                                      const MergeGroup &group) {
  if (group.members.size() < 2)
    return failure();
  Block *block = group.members.front().op->getBlock();
  SmallVector<Location> locs = llvm::map_to_vector(
      group.members, [](const MatmulInfo &m) { return m.op->getLoc(); });
  Location loc = rewriter.getFusedLoc(locs);

  OpBuilder::InsertionGuard guard(rewriter);
  if (group.anchor)
    rewriter.setInsertionPointAfter(group.anchor);
  else
    rewriter.setInsertionPointToStart(block);

  // Constants of this block (weights interleaved with the matmuls, as an
  // importer emits them) are re-materialized at the merged op: a clone of a
  // constant shares its attribute and costs no data. Weight-only producers
  // (casts, transposes, reshapes of weights) that are not above the merged
  // op already are cloned there too, with their own producers (the same
  // path as constants); each original is erased once the members were its
  // last users.
  DenseMap<Value, Value> clones;
  SmallVector<Operation *> clonedProducers;
  std::function<Value(Value)> materialize = [&](Value v) -> Value {
    Operation *def = v ? v.getDefiningOp() : nullptr;
    if (!def || def->getBlock() != block)
      return v;
    bool constant = isMovableConstant(def);
    if (!constant && (!isRematerializable(def) ||
                      (group.anchor && (def == group.anchor ||
                                        def->isBeforeInBlock(group.anchor)))))
      return v;
    if (Value clone = clones.lookup(v))
      return clone;
    IRMapping mapping;
    for (Value read : readsOf(def))
      mapping.map(read, materialize(read));
    Operation *clone = rewriter.clone(*def, mapping);
    for (auto [from, to] :
         llvm::zip_equal(def->getResults(), clone->getResults()))
      clones[from] = to;
    if (!constant)
      clonedProducers.push_back(def);
    return clones.lookup(v);
  };
  MergeGroup local = group;
  local.fillScalar = materialize(group.fillScalar);
  bool sharedLhs = local.kind == MergeKind::SharedLhs;
  for (MatmulInfo &m : local.members) {
    // Only what the merged computation reads: the (looked-through) weight
    // of a shared-LHS group, the shared right operand of a shared-RHS one.
    m.lhs = materialize(m.lhs);
    if (sharedLhs)
      m.weight = materialize(m.weight);
    else
      m.rhs = materialize(m.rhs);
    if (!local.fillScalar)
      m.init = materialize(m.init);
    if (m.biasAdd && sharedLhs)
      m.biasAdd->bias = materialize(m.biasAdd->bias);
  }
  FailureOr<linalg::LinalgOp> merged =
      sharedLhs ? mergeSharedLhs(rewriter, local, loc)
                : mergeSharedRhs(rewriter, local, loc);
  // Users before producers: a producer dies with the last of its users.
  for (Operation *original : llvm::reverse(clonedProducers))
    if (original->use_empty())
      rewriter.eraseOp(original);
  return merged;
}

/// Everything a group reads (operands, anchor) and everything it replaces
/// or erases, as opaque pointers taken before any rewrite of the round.
namespace {
struct Footprint {
  SmallVector<const void *> reads, writes;
};
} // namespace

static Footprint footprintOf(const MergeGroup &group) {
  Footprint fp;
  auto read = [&](Value v) {
    if (v)
      fp.reads.push_back(v.getAsOpaquePointer());
  };
  if (group.anchor)
    fp.reads.push_back(group.anchor);
  read(group.fillScalar);
  for (const MatmulInfo &m : group.members) {
    read(m.lhs);
    read(m.rhs);
    read(m.weight);
    read(m.init);
    if (m.biasAdd)
      read(m.biasAdd->bias);
    for (Operation *op : memberOps(m, group.kind)) {
      fp.writes.push_back(op);
      fp.writes.push_back(op->getResult(0).getAsOpaquePointer());
    }
  }
  return fp;
}

LogicalResult mlir::linfuse::mergeParallelMatmuls(RewriterBase &rewriter,
                                                  Block &block,
                                                  const MergeOptions &options,
                                                  MergeListener *listener) {
  // Rounds: analyze once, then merge every group that neither reads what an
  // earlier group of the round replaced nor is read by one (their analysis
  // is still exact); the others wait for the next round's fresh analysis.
  // Typical models need one productive round, so the pass stays linear.
  while (true) {
    SmallVector<MergeGroup> groups = findMergeGroups(block, options);
    SmallVector<Footprint> footprints =
        llvm::map_to_vector(groups, footprintOf);
    DenseSet<const void *> roundReads, roundWrites;
    unsigned merged = 0;
    for (auto [group, fp] : llvm::zip_equal(groups, footprints)) {
      if (llvm::any_of(
              fp.reads,
              [&](const void *p) { return roundWrites.contains(p); }) ||
          llvm::any_of(fp.writes,
                       [&](const void *p) { return roundReads.contains(p); }))
        continue;
      roundReads.insert(fp.reads.begin(), fp.reads.end());
      roundWrites.insert(fp.writes.begin(), fp.writes.end());
      if (listener)
        listener->notifyGroupMerging(group);
      FailureOr<linalg::LinalgOp> op = mergeGroup(rewriter, group);
      if (failed(op))
        return block.getParentOp()->emitError(
            "linfuse: failed to merge a legal matmul group");
      if (listener)
        listener->notifyGroupMerged(*op);
      ++merged;
    }
    if (merged == 0)
      return success();
  }
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct MergeParallelMatmulsPass
    : public linfuse::impl::MergeParallelMatmulsPassBase<
          MergeParallelMatmulsPass> {
  using MergeParallelMatmulsPassBase::MergeParallelMatmulsPassBase;

  void runOnOperation() override {
    MergeOptions options;
    options.minGroupSize = minGroupSize;
    options.maxMergedBytes = maxMergedBytes;
    options.mergeSharedRhs = mergeSharedRhs;

    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) { blocks.push_back(block); });

    struct Listener : MergeListener {
      Listener(MergeParallelMatmulsPass &pass) : pass(pass) {}
      void notifyGroupMerging(const MergeGroup &group) override {
        if (remarksEnabled())
          remark = describe(group);
        ++pass.numGroupsMerged;
        pass.numMatmulsRemoved += group.members.size() - 1;
        pass.numBytesConcatenated += group.concatBytes;
      }
      void notifyGroupMerged(linalg::LinalgOp merged) override {
        auto type = cast<ShapedType>(merged->getResult(0).getType());
        emitOptimizationRemark(merged, remark + describeShape(type.getShape()) +
                                           " GEMM");
      }
      MergeParallelMatmulsPass &pass;
      std::string remark;
    } listener(*this);

    IRRewriter rewriter(&getContext());
    for (Block *block : blocks) {
      if (failed(mergeParallelMatmuls(rewriter, *block, options, &listener)))
        return signalPassFailure();
      if (remarksEnabled())
        explainMissedMerges(*block, options);
    }

    // The members' element-wise epilogues that no group absorbed (a
    // per-channel dequantization, an integer bias) merge next, slice by
    // slice along their chains. Only slices and what they create are
    // visited: folding and clean-up belong to the pipeline.
    SmallVector<Operation *> slices;
    getOperation()->walk(
        [&](tensor::ExtractSliceOp op) { slices.push_back(op); });
    if (slices.empty())
      return;
    unsigned epilogues = 0;
    RewritePatternSet patterns(&getContext());
    populateMergeSlicedEpiloguesPatterns(patterns, &epilogues);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    if (failed(applyOpPatternsGreedily(slices, std::move(patterns), config)))
      return signalPassFailure();
    numEpiloguesMerged += epilogues;
  }

  PassStatistic numGroupsMerged{this, "groups-merged",
                                "Number of matmul groups merged into one"};
  PassStatistic numMatmulsRemoved{this, "matmuls-removed",
                                  "Number of matmuls removed by merging"};
  PassStatistic numBytesConcatenated{
      this, "bytes-concatenated", "Bytes of weights (or inputs) concatenated"};
  PassStatistic numEpiloguesMerged{
      this, "epilogues-merged",
      "Element-wise epilogues of slices removed by merging them into one "
      "over the whole"};

  /// "merged 3 matmuls sharing %x into one " (the shape follows).
  static std::string describe(const MergeGroup &group) {
    const MatmulInfo &first = group.members.front();
    bool lhs = group.kind == MergeKind::SharedLhs;
    std::string text = "merged " + std::to_string(group.members.size()) +
                       " matmuls sharing " +
                       describeValue(lhs ? first.lhs : first.rhs);
    if (lhs && anyBiasAdd(group.members))
      text += " (with their bias-adds)";
    return text + " into one ";
  }
};
} // namespace
