//===- MergeSlicedEpilogues.cpp - one epilogue over a merged result -------===//
//
// After a merge, each member's result is a column slice of the merged
// matmul's, and whatever the member did with it next still runs once per
// slice. When every slice feeds the same element-wise computation, differing
// only in per-column vectors (a quantized model's per-channel dequantization
// scale, an integer or post-dequantization bias, an activation), the
// computation is merged too: one `linalg.generic` over the whole merged
// result, those vectors concatenated in slice order like the weights were,
// and the members' results become slices of its result. Applied again, the
// next element-wise step of the chain merges as well.
//
// Legal because an element-wise map computes each element from the
// elements at the same position: with a body that reads no index
// (`linalg.index`) and per-column operands concatenated in the slices'
// order, element (i, offset + j) of the merged computation is element (i, j)
// of the member's.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/Patterns.h"
#include "linfuse/Dialect/Linfuse/Transforms/Remarks.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"

using namespace mlir;
using namespace mlir::linfuse;

namespace {

/// One slice of the merged result and the element-wise op consuming it.
struct Member {
  tensor::ExtractSliceOp slice;
  linalg::GenericOp epilogue;
  int64_t offset = 0, width = 0;
  /// The epilogue's input operand that reads the slice.
  unsigned sliceInput = 0;
};

/// True when `v` is available at `op`: a block argument of a block
/// enclosing `op`, or the result of an op before `op` in its block or
/// before the ancestor of `op` in the definer's block. Conservative across
/// the blocks of one region.
bool availableAt(Value v, Operation *op) {
  Block *block = v.getParentBlock();
  Operation *ancestor = block ? block->findAncestorOpInBlock(*op) : nullptr;
  if (!ancestor)
    return false;
  Operation *def = v.getDefiningOp();
  return !def || def->isBeforeInBlock(ancestor);
}

/// The slice and its consumer as a member, or nullopt: a unit-stride slice
/// of whole rows (offset 0, every leading dimension whole) and a static
/// range of the last dimension, read only by an all-parallel
/// `linalg.generic` on tensors that reads it with the identity map, whose
/// destination's value it does not read, and whose body is free of side
/// effects and of `linalg.index`.
std::optional<Member> matchMember(tensor::ExtractSliceOp slice) {
  Value source = slice.getSource();
  auto sourceType = cast<RankedTensorType>(source.getType());
  int64_t rank = sourceType.getRank();
  if (rank == 0 || slice.getType().getRank() != rank || !slice->hasOneUse())
    return std::nullopt;
  for (OpFoldResult stride : slice.getMixedStrides())
    if (getConstantIntValue(stride) != 1)
      return std::nullopt;
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  for (int64_t d = 0; d + 1 < rank; ++d) {
    if (getConstantIntValue(offsets[d]) != 0)
      return std::nullopt;
    FailureOr<bool> whole = ValueBoundsConstraintSet::areEqual(
        ValueBoundsConstraintSet::Variable(sizes[d]),
        ValueBoundsConstraintSet::Variable(source, d));
    if (failed(whole) || !*whole)
      return std::nullopt;
  }
  std::optional<int64_t> offset = getConstantIntValue(offsets.back());
  std::optional<int64_t> width = getConstantIntValue(sizes.back());
  if (!offset || !width || *width <= 0)
    return std::nullopt;

  auto generic = dyn_cast<linalg::GenericOp>(*slice->getUsers().begin());
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumLoops() != static_cast<unsigned>(rank) ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      generic.getNumDpsInits() != 1 || generic->getNumResults() != 1)
    return std::nullopt;
  OpOperand *init = generic.getDpsInitOperand(0);
  AffineMap identity =
      AffineMap::getMultiDimIdentityMap(rank, generic.getContext());
  if (generic.getMatchingIndexingMap(init) != identity ||
      generic.payloadUsesValueFromOperand(init) ||
      cast<ShapedType>(generic->getResult(0).getType()).getShape() !=
          slice.getType().getShape())
    return std::nullopt;
  std::optional<unsigned> sliceInput;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    if (input->get() != slice)
      continue;
    if (sliceInput || generic.getMatchingIndexingMap(input) != identity)
      return std::nullopt; // read twice, or transposed
    sliceInput = input->getOperandNumber();
  }
  if (!sliceInput)
    return std::nullopt;
  bool plainBody = true;
  generic.getBlock()->walk([&](Operation *op) {
    if (isa<linalg::IndexOp>(op) || !isMemoryEffectFree(op))
      plainBody = false;
  });
  if (!plainBody)
    return std::nullopt;
  return Member{slice, generic, *offset, *width, *sliceInput};
}

/// True when the two bodies compute the same: op by op, the same ops on
/// corresponding block arguments, results and values from above.
bool sameBody(Block &a, Block &b) {
  if (a.getNumArguments() != b.getNumArguments() ||
      a.getOperations().size() != b.getOperations().size())
    return false;
  IRMapping map;
  for (auto [x, y] : llvm::zip_equal(a.getArguments(), b.getArguments())) {
    if (x.getType() != y.getType())
      return false;
    map.map(x, y);
  }
  for (auto [x, y] : llvm::zip_equal(a, b)) {
    if (!OperationEquivalence::isEquivalentTo(
            &x, &y,
            [&](Value u, Value v) {
              return success(map.lookupOrDefault(u) == v);
            },
            [&](Value u, Value v) { map.map(u, v); },
            OperationEquivalence::IgnoreLocations))
      return false;
  }
  return true;
}

/// How the merged epilogue gets one of its inputs.
enum class InputKind { Merged, Shared, Concatenated };

struct MergeSlicedEpilogues : OpRewritePattern<tensor::ExtractSliceOp> {
  MergeSlicedEpilogues(MLIRContext *ctx, unsigned *counter)
      : OpRewritePattern(ctx), counter(counter) {}

  LogicalResult matchAndRewrite(tensor::ExtractSliceOp root,
                                PatternRewriter &rewriter) const override {
    Value source = root.getSource();
    auto sourceType = cast<RankedTensorType>(source.getType());
    int64_t rank = sourceType.getRank();
    if (rank == 0)
      return failure();
    int64_t n = sourceType.getDimSize(rank - 1);
    // The pattern fires at the slice of the first columns only: the others
    // leave before the members are gathered (and their sizes compared).
    if (ShapedType::isDynamic(n) ||
        getConstantIntValue(root.getMixedOffsets().back()) != 0)
      return failure();

    // Every user of the source is a member, and the members' columns
    // tile [0, n) exactly.
    SmallVector<Member> members;
    for (Operation *user : source.getUsers()) {
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice || slice.getSource() != source)
        return failure();
      std::optional<Member> member = matchMember(slice);
      if (!member)
        return failure();
      members.push_back(*member);
    }
    if (members.size() < 2)
      return failure();
    llvm::stable_sort(members, [](const Member &a, const Member &b) {
      return a.offset < b.offset;
    });
    // Another slice at offset 0 (two members over one tiling fail below).
    if (members.front().slice != root)
      return failure();
    int64_t end = 0;
    for (const Member &m : members) {
      if (m.offset != end)
        return failure();
      end += m.width;
    }
    if (end != n)
      return failure();

    // The epilogues agree on everything but their per-column vectors.
    linalg::GenericOp first = members.front().epilogue;
    SmallVector<AffineMap> maps = first.getIndexingMapsArray();
    unsigned numInputs = first.getNumDpsInputs();
    Type resultElement = getElementTypeOrSelf(first->getResult(0).getType());
    SmallVector<InputKind> kinds;
    for (OpOperand *input : first.getDpsInputOperands()) {
      unsigned i = input->getOperandNumber();
      if (i == members.front().sliceInput) {
        kinds.push_back(InputKind::Merged);
        continue;
      }
      AffineMap map = maps[i];
      auto column =
          AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, map.getContext()),
                         map.getContext());
      if (!map.isFunctionOfDim(rank - 1))
        kinds.push_back(InputKind::Shared); // the same for every column
      else if (map == column)
        kinds.push_back(InputKind::Concatenated);
      else
        return failure();
    }
    Operation *insertion = first;
    llvm::SmallPtrSet<Operation *, 4> epilogues;
    for (Member &m : members) {
      if (!epilogues.insert(m.epilogue).second)
        return failure(); // one op reading two slices (gate/up's SwiGLU)
      linalg::GenericOp e = m.epilogue;
      if (e.getNumDpsInputs() != numInputs ||
          m.sliceInput != members.front().sliceInput ||
          e.getIndexingMapsArray() != maps ||
          getElementTypeOrSelf(e->getResult(0).getType()) != resultElement ||
          e->getBlock() != first->getBlock() ||
          !sameBody(*first.getBlock(), *e.getBlock()))
        return failure();
      for (auto [i, kind] : llvm::enumerate(kinds)) {
        Value v = e.getDpsInputOperand(i)->get();
        Value v0 = first.getDpsInputOperand(i)->get();
        if (kind == InputKind::Shared && v != v0)
          return failure();
        if (kind == InputKind::Concatenated) {
          auto type = dyn_cast<RankedTensorType>(v.getType());
          if (!type || type.getRank() != 1 || type.getDimSize(0) != m.width ||
              type.getElementType() != getElementTypeOrSelf(v0.getType()))
            return failure();
        }
      }
      if (e->isBeforeInBlock(insertion))
        insertion = e;
    }
    // What the merged epilogue reads must exist where it goes: before the
    // first member's epilogue.
    for (Member &m : members)
      for (auto [i, kind] : llvm::enumerate(kinds))
        if (kind != InputKind::Merged &&
            !availableAt(m.epilogue.getDpsInputOperand(i)->get(), insertion))
          return failure();
    if (!availableAt(source, insertion))
      return failure();

    // Rewrite.
    SmallVector<Location> locs = llvm::map_to_vector(
        members, [](Member &m) { return m.epilogue.getLoc(); });
    Location loc = rewriter.getFusedLoc(locs);
    rewriter.setInsertionPoint(insertion);
    SmallVector<Value> inputs;
    for (auto [i, kind] : llvm::enumerate(kinds)) {
      switch (kind) {
      case InputKind::Merged:
        inputs.push_back(source);
        break;
      case InputKind::Shared:
        inputs.push_back(first.getDpsInputOperand(i)->get());
        break;
      case InputKind::Concatenated: {
        SmallVector<Value> parts = llvm::map_to_vector(members, [&](Member &m) {
          return m.epilogue.getDpsInputOperand(i)->get();
        });
        inputs.push_back(tensor::ConcatOp::create(rewriter, loc, 0, parts));
        break;
      }
      }
    }
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(rewriter, loc, source);
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes, resultElement);
    auto merged = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()}, inputs, ValueRange{init},
        maps, first.getIteratorTypesArray());
    rewriter.cloneRegionBefore(first.getRegion(), merged.getRegion(),
                               merged.getRegion().end());

    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    for (Member &m : members) {
      offsets.back() = rewriter.getIndexAttr(m.offset);
      sizes.back() = rewriter.getIndexAttr(m.width);
      Value part = tensor::ExtractSliceOp::create(
          rewriter, loc, merged->getResult(0), offsets, sizes, strides);
      Type type = m.epilogue->getResult(0).getType();
      if (part.getType() != type)
        part = tensor::CastOp::create(rewriter, loc, type, part);
      rewriter.replaceOp(m.epilogue, part);
      rewriter.eraseOp(m.slice);
    }
    if (counter)
      *counter += members.size() - 1;
    emitOptimizationRemark(merged, "merged " + std::to_string(members.size()) +
                                       " element-wise epilogues of slices "
                                       "into one over the " +
                                       describeShape(sourceType.getShape()) +
                                       " result");
    return success();
  }

  unsigned *counter;
};

} // namespace

void mlir::linfuse::populateMergeSlicedEpiloguesPatterns(
    RewritePatternSet &patterns, unsigned *counter) {
  patterns.add<MergeSlicedEpilogues>(patterns.getContext(), counter);
}
