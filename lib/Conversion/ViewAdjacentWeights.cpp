//===- ViewAdjacentWeights.cpp - merged weights in place when adjacent ----===//
//
// A weight-packing function builds a merged weight (gate and up, Q/K/V) as a
// new buffer with each weight copied into its rows: a second copy of those
// weights for as long as the packed weights live. When the caller already
// keeps the weights one after the other in memory (linfuse.torch places a
// merge group's parameters in one buffer before packing), that concatenation
// is the memory they occupy: the packed result can be a view of it. Whether
// they do is known only at run time, so the check and the fallback copy are
// both emitted.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_VIEWADJACENTWEIGHTSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

/// A packed result that is whole arguments copied into consecutive rows of
/// a new buffer: `pieces[i]` fills rows [rowOffsets[i], rowOffsets[i+1]).
struct RowConcat {
  memref::AllocOp alloc;
  SmallVector<BlockArgument> pieces;
  SmallVector<int64_t> rowOffsets;
  /// The ops that build the buffer (subviews and copies), in block order.
  SmallVector<Operation *> builders;
};

bool isContiguousStatic(MemRefType t) {
  return t.hasStaticShape() && t.getLayout().isIdentity() && t.getRank() >= 1;
}

/// The row concatenation `result` (operand `index` of `ret`) is, if it is
/// one: every use of its allocation other than the return is a subview of
/// whole rows that exactly one memref.copy from an entry-block argument of
/// the same element type fills, and the rows are covered once, in order.
std::optional<RowConcat> matchRowConcat(func::ReturnOp ret, unsigned index) {
  Value result = ret.getOperand(index);
  auto alloc = result.getDefiningOp<memref::AllocOp>();
  Block *entry = ret->getBlock();
  if (!alloc || alloc->getBlock() != entry ||
      !isContiguousStatic(alloc.getType()) ||
      llvm::count(ret->getOperands(), result) != 1)
    return std::nullopt;
  MemRefType type = alloc.getType();
  if (!type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;

  RowConcat c;
  c.alloc = alloc;
  SmallVector<std::tuple<int64_t, BlockArgument>> rows;
  for (Operation *user : result.getUsers()) {
    if (user == ret.getOperation())
      continue;
    auto slice = dyn_cast<memref::SubViewOp>(user);
    if (!slice || !slice->hasOneUse())
      return std::nullopt;
    auto copy = dyn_cast<memref::CopyOp>(*slice->getUsers().begin());
    auto arg = copy ? dyn_cast<BlockArgument>(copy.getSource()) : nullptr;
    if (!copy || copy.getTarget() != slice.getResult() || !arg ||
        arg.getOwner() != entry)
      return std::nullopt;
    auto argType = dyn_cast<MemRefType>(arg.getType());
    if (!argType || !isContiguousStatic(argType) ||
        argType.getElementType() != type.getElementType() ||
        argType.getRank() != type.getRank() ||
        argType.getShape().drop_front() != type.getShape().drop_front())
      return std::nullopt;
    // Whole rows: offset [r, 0, ...], the argument's sizes, unit strides.
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    if (ShapedType::isDynamic(offsets[0]) ||
        llvm::any_of(offsets.drop_front(), [](int64_t o) { return o != 0; }) ||
        slice.getStaticSizes() != argType.getShape() ||
        llvm::any_of(slice.getStaticStrides(),
                     [](int64_t s) { return s != 1; }))
      return std::nullopt;
    rows.push_back({offsets[0], arg});
    c.builders.push_back(slice);
    c.builders.push_back(copy);
  }
  llvm::sort(rows,
             [](auto &a, auto &b) { return std::get<0>(a) < std::get<0>(b); });
  int64_t next = 0;
  for (auto [offset, arg] : rows) {
    if (offset != next)
      return std::nullopt; // A gap or an overlap.
    c.rowOffsets.push_back(offset);
    c.pieces.push_back(arg);
    next += cast<MemRefType>(arg.getType()).getDimSize(0);
  }
  if (c.pieces.size() < 2 || next != type.getDimSize(0))
    return std::nullopt;
  c.rowOffsets.push_back(next);
  llvm::sort(c.builders,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return c;
}

/// The address of the first element of `memref` (aligned pointer plus the
/// descriptor's offset), in bytes, and that offset.
std::pair<Value, Value> firstElementAddress(OpBuilder &b, Location loc,
                                            Value memref, int64_t bytes) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value aligned =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value size = arith::ConstantIndexOp::create(b, loc, bytes);
  Value offsetBytes = arith::MulIOp::create(b, loc, meta.getOffset(), size);
  return {arith::AddIOp::create(b, loc, aligned, offsetBytes),
          meta.getOffset()};
}

/// Returns `c`'s first piece viewed as the whole result when the pieces lie
/// one after the other in memory (and the first at offset 0, the result's
/// layout), else builds the copy as before.
void viewWhenAdjacent(func::ReturnOp ret, unsigned index, RowConcat &c) {
  OpBuilder b(ret);
  Location loc = c.alloc.getLoc();
  MemRefType type = c.alloc.getType();
  int64_t eltBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t rowBytes = eltBytes;
  for (int64_t d : type.getShape().drop_front())
    rowBytes *= d;

  auto [first, firstOffset] =
      firstElementAddress(b, loc, c.pieces.front(), eltBytes);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value adjacent = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         firstOffset, zero);
  for (size_t i = 1; i < c.pieces.size(); ++i) {
    Value address = firstElementAddress(b, loc, c.pieces[i], eltBytes).first;
    Value expected = arith::AddIOp::create(
        b, loc, first,
        arith::ConstantIndexOp::create(b, loc, c.rowOffsets[i] * rowBytes));
    adjacent = arith::AndIOp::create(
        b, loc, adjacent,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, address,
                              expected));
  }

  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, adjacent,
                                /*withElseRegion=*/true);
  {
    OpBuilder then = ifOp.getThenBodyBuilder();
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (int64_t d = type.getRank() - 1; d > 0; --d)
      strides[d - 1] = strides[d] * type.getDimSize(d);
    Value view = memref::ReinterpretCastOp::create(
        then, loc, type, c.pieces.front(), /*offset=*/0, type.getShape(),
        strides);
    scf::YieldOp::create(then, loc, view);
  }
  {
    // The copy, as it was: the buffer and what fills it move into the
    // branch (they read only the function's arguments, which nothing
    // writes).
    Block *elseBlock = ifOp.elseBlock();
    OpBuilder otherwise = ifOp.getElseBodyBuilder();
    c.alloc->moveBefore(elseBlock, elseBlock->end());
    for (Operation *op : c.builders)
      op->moveBefore(elseBlock, elseBlock->end());
    scf::YieldOp::create(otherwise, loc, c.alloc.getResult());
  }
  ret.setOperand(index, ifOp.getResult(0));
}

struct ViewAdjacentWeightsPass
    : public linfuse::impl::ViewAdjacentWeightsPassBase<
          ViewAdjacentWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseSet<StringAttr> packs = linfuse::getWeightPackingFunctions(module);
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!packs.contains(fn.getSymNameAttr()) || fn.isExternal() ||
          !llvm::hasSingleElement(fn.getBody()))
        continue;
      auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
      for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i)
        if (std::optional<RowConcat> c = matchRowConcat(ret, i))
          viewWhenAdjacent(ret, i, *c);
    }
  }
};
} // namespace
