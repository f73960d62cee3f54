//===- ReturnViews.cpp - return merged-result slices without copies -------===//
//
// The merge passes turn three projections into one GEMM plus three slices
// of its result; inside a function the slices are strided views (no
// copies). At the function boundary, bufferization's identity-layout results
// would copy each slice into its own buffer again. The memref descriptor a
// caller gets carries sizes and strides anyway, so the slice itself can be
// returned: this pass undoes those copies after bufferization and
// deallocation, when what each buffer's lifetime is has been made explicit
// (a dealloc of the merged buffer that the returned views now outlive).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_RETURNVIEWSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

/// One result to return as a view: the copy into it, and the base buffer's
/// dealloc that must go.
struct Candidate {
  unsigned resultIndex;
  memref::CopyOp copy;
  memref::SubViewOp slice;
  memref::DeallocOp baseDealloc;
};

/// The dealloc of `base` in `block`, if every use of `base` and of the
/// views of it (subviews, casts, reshapes: transitively) after `copy` only
/// reads it into another buffer, views it or deallocates it: once the copy
/// is gone, the returned view sees what the copy saw.
memref::DeallocOp deallocAfterReadsOnly(Value base, memref::CopyOp copy,
                                        Block *block) {
  memref::DeallocOp dealloc;
  SmallVector<Value> aliases = {base};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers()) {
      if (user->getBlock() != block)
        return nullptr;
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == aliases[i])
          llvm::append_range(aliases, user->getResults());
        continue;
      }
      if (!copy->isBeforeInBlock(user))
        continue;
      if (auto d = dyn_cast<memref::DeallocOp>(user)) {
        if (d.getMemref() != base || dealloc)
          return nullptr;
        dealloc = d;
        continue;
      }
      auto c = dyn_cast<memref::CopyOp>(user);
      if (!c || c.getSource() != aliases[i])
        return nullptr;
    }
  return dealloc;
}

/// Whether result `index` of `ret` is an allocation filled by one copy from
/// a subview of another allocation of the same block and used by nothing
/// else; the candidate if so.
std::optional<Candidate> match(func::ReturnOp ret, unsigned index) {
  Value result = ret.getOperand(index);
  auto alloc = result.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != ret->getBlock())
    return std::nullopt;
  memref::CopyOp copy;
  for (OpOperand &use : result.getUses()) {
    if (use.getOwner() == ret.getOperation() && use.getOperandNumber() == index)
      continue;
    auto c = dyn_cast<memref::CopyOp>(use.getOwner());
    if (!c || c.getTarget() != result || copy)
      return std::nullopt; // Also: returned twice, read or written again.
    copy = c;
  }
  if (!copy)
    return std::nullopt;
  auto slice = copy.getSource().getDefiningOp<memref::SubViewOp>();
  if (!slice)
    return std::nullopt;
  auto base = slice.getSource().getDefiningOp<memref::AllocOp>();
  if (!base || base->getBlock() != ret->getBlock())
    return std::nullopt;
  memref::DeallocOp dealloc =
      deallocAfterReadsOnly(base.getResult(), copy, ret->getBlock());
  if (!dealloc)
    return std::nullopt;
  return Candidate{index, copy, slice, dealloc};
}

struct ReturnViewsPass
    : public linfuse::impl::ReturnViewsPassBase<ReturnViewsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseSet<StringAttr> packs = linfuse::getWeightPackingFunctions(module);
    SymbolTableCollection tables;
    SymbolUserMap users(tables, module);
    for (auto fn : module.getOps<func::FuncOp>()) {
      // (@f names its packing function in an attribute: not a call.)
      bool isPack = packs.contains(fn.getSymNameAttr());
      if (!fn.isPublic() || fn.isExternal() || (!isPack && !users.useEmpty(fn)))
        continue;
      // One return (what bufferization of a linalg function gives); with
      // several, every one would have to change alike.
      SmallVector<func::ReturnOp> returns;
      fn.walk([&](func::ReturnOp r) { returns.push_back(r); });
      if (returns.size() != 1)
        continue;
      if (isPack)
        returnWeightsUncopied(returns.front());
      else
        rewrite(fn, returns.front());
    }
  }

  /// A packing function returns the weights @f reads unchanged as copies
  /// (a result must be owned, says the deallocation pipeline): a second
  /// copy of every such weight for as long as the packed weights live.
  /// The weight itself is returned instead; the caller already holds it.
  static void returnWeightsUncopied(func::ReturnOp ret) {
    Block *entry = &ret->getParentOfType<func::FuncOp>().getBody().front();
    for (OpOperand &operand : ret->getOpOperands()) {
      auto alloc = operand.get().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != ret->getBlock())
        continue;
      memref::CopyOp copy;
      bool onlyCopiedInto = true;
      for (Operation *user : alloc->getUsers()) {
        if (user == ret.getOperation())
          continue;
        auto c = dyn_cast<memref::CopyOp>(user);
        if (!c || c.getTarget() != alloc.getResult() || copy)
          onlyCopiedInto = false;
        copy = c;
      }
      auto arg = copy ? dyn_cast<BlockArgument>(copy.getSource()) : nullptr;
      if (!onlyCopiedInto || !arg || arg.getOwner() != entry ||
          arg.getType() != alloc.getType() ||
          llvm::count(ret->getOperands(), alloc.getResult()) != 1)
        continue;
      operand.set(arg);
      copy.erase();
      alloc.erase();
    }
  }

  void rewrite(func::FuncOp fn, func::ReturnOp ret) {
    SmallVector<Candidate> candidates;
    for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i)
      if (std::optional<Candidate> c = match(ret, i))
        candidates.push_back(*c);
    if (candidates.empty())
      return;
    SmallPtrSet<Operation *, 4> deallocs;
    for (Candidate &c : candidates) {
      Operation *alloc = c.copy.getTarget().getDefiningOp();
      ret.setOperand(c.resultIndex, c.slice.getResult());
      c.copy.erase();
      alloc->erase();
      deallocs.insert(c.baseDealloc);
    }
    for (Operation *d : deallocs)
      d->erase();
    fn.setType(FunctionType::get(&getContext(), fn.getArgumentTypes(),
                                 ret.getOperandTypes()));
  }
};
} // namespace
