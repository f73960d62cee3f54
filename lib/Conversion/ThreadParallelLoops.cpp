//===- ThreadParallelLoops.cpp - host loops on the runtime's thread pool --===//
//
// Element-wise code on the host (norms, activations, residual adds, casts,
// a pack function's copies) is vectorized by LLVM but ran on one thread,
// while the GEMMs around it used all of them. This pass hands each
// outermost scf.parallel to the runtime's linfuse_parallel_for, which runs
// it on the GEMMs' OpenMP pool (lib/Runtime/ParallelFor.cpp).
//
// Upstream's alternatives were measured against what linfuse needs:
// --convert-scf-to-openmp emits calls into LLVM's libomp (__kmpc_*), a
// second pool next to the libgomp one that oneDNN and PyTorch share; and
// --async-parallel-for brings the async runtime's own thread pool. A call
// into the runtime keeps one pool and one thread count.
//
// The outlined body takes (lo, hi, context): the values it reads from
// outside are stored in a stack struct in their LLVM form (a memref as its
// descriptor), bridged with unrealized casts that the LLVM conversions
// resolve. Nothing here depends on the body's ops beyond the legality
// check: the body is cloned as it is.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include <numeric>

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_THREADPARALLELLOOPSPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

namespace {

constexpr StringLiteral kParallelFor = "linfuse_parallel_for";

/// Whether `loop` may run on other threads: no results (a reduction across
/// iterations), and a body that only computes, loads and stores. Calls and
/// asserts could record an error in the runtime's per-thread state (or
/// longjmp out of a worker), allocations would be made per chunk.
bool canRunOnThreads(scf::ParallelOp loop) {
  if (loop.getNumResults() != 0)
    return false;
  WalkResult result = loop.getBody()->walk([](Operation *op) {
    if (isa<CallOpInterface, cf::AssertOp>(op))
      return WalkResult::interrupt();
    if (isMemoryEffectFree(op) || isa<memref::LoadOp, memref::StoreOp>(op) ||
        op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return !result.wasInterrupted();
}

bool hasNestedLoop(scf::ParallelOp loop) {
  return loop.getBody()
      ->walk([](LoopLikeOpInterface) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// Collapses the loop's dimensions into one range, except the innermost
/// when the body is straight-line code (it stays the vectorizer's loop).
/// Returns the loop to outline (the same one when nothing was collapsed).
scf::ParallelOp collapseOuterDims(RewriterBase &rewriter,
                                  scf::ParallelOp loop) {
  unsigned dims = loop.getNumLoops();
  unsigned outer = hasNestedLoop(loop) ? dims : dims - 1;
  if (outer <= 1)
    return loop;
  std::vector<unsigned> combined(outer);
  std::iota(combined.begin(), combined.end(), 0);
  SmallVector<std::vector<unsigned>> groups{combined};
  if (outer < dims)
    groups.push_back({dims - 1});
  Operation *next = loop->getNextNode();
  collapseParallelLoops(rewriter, loop, groups);
  return dyn_cast_or_null<scf::ParallelOp>(next->getPrevNode());
}

/// The type a captured value has in the context struct, null if it has no
/// plain LLVM form: a memref's descriptor, i64 for index, scalars as they
/// are.
Type storedType(Type type, const LLVMTypeConverter &converter) {
  MLIRContext *ctx = type.getContext();
  if (auto memref = dyn_cast<MemRefType>(type)) {
    Type converted = converter.convertType(memref);
    return isa_and_nonnull<LLVM::LLVMStructType>(converted) ? converted
                                                            : Type();
  }
  if (isa<IndexType>(type))
    return IntegerType::get(ctx, 64);
  if (isa<IntegerType, FloatType>(type))
    return type;
  return Type();
}

/// Whether `value` is computed from constants alone, by ops without side
/// effects (constants, memref.get_global, a collapsed loop's bound such as
/// 1 * 64): such values are recomputed in the outlined body, where LLVM
/// sees them as constants (a constant inner trip count vectorizes better),
/// instead of being stored. Appends the ops to clone, operands first.
bool collectClonable(Value value, SetVector<Operation *> &ops,
                     unsigned depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || depth > 8 || def->getNumRegions() != 0 ||
      def->getNumResults() != 1 || !isMemoryEffectFree(def))
    return false;
  if (ops.contains(def))
    return true;
  for (Value operand : def->getOperands())
    if (!collectClonable(operand, ops, depth + 1))
      return false;
  ops.insert(def);
  return true;
}

/// ceil((ub - lb) / step), at least 0.
Value tripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
  Value span = arith::SubIOp::create(b, loc, ub, lb);
  Value count = arith::CeilDivSIOp::create(b, loc, span, step);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::MaxSIOp::create(b, loc, count, zero);
}

/// Elements one iteration of dimension 0 touches, roughly: the trip counts
/// of the other dimensions and of the loops nested in the body whose bounds
/// are known before the loop.
Value workPerIteration(OpBuilder &b, Location loc, scf::ParallelOp loop) {
  Value work = arith::ConstantIndexOp::create(b, loc, 1);
  for (unsigned d = 1; d < loop.getNumLoops(); ++d)
    work = arith::MulIOp::create(b, loc, work,
                                 tripCount(b, loc, loop.getLowerBound()[d],
                                           loop.getUpperBound()[d],
                                           loop.getStep()[d]));
  Block *body = loop.getBody();
  while (body) {
    Block *next = nullptr;
    for (auto inner : body->getOps<scf::ForOp>()) {
      Value lb = inner.getLowerBound(), ub = inner.getUpperBound(),
            step = inner.getStep();
      if (!llvm::all_of(ValueRange{lb, ub, step}, [&](Value v) {
            return v.getParentRegion()->isProperAncestor(&loop.getRegion());
          }))
        break;
      work =
          arith::MulIOp::create(b, loc, work, tripCount(b, loc, lb, ub, step));
      next = inner.getBody();
      break;
    }
    body = next;
  }
  return work;
}

/// `copy` as an scf.parallel nest of loads and stores, so that large
/// copies (a packing function's concatenated weights, results copied out)
/// run on the pool like the other loops; LLVM vectorizes the innermost
/// loop. Copies between unranked or rank-0 memrefs stay as they are.
void copyAsLoops(IRRewriter &rewriter, memref::CopyOp copy) {
  auto source = dyn_cast<MemRefType>(copy.getSource().getType());
  auto target = dyn_cast<MemRefType>(copy.getTarget().getType());
  if (!source || !target || source.getRank() == 0 ||
      source.getElementType() != target.getElementType())
    return;
  Location loc = copy.getLoc();
  rewriter.setInsertionPoint(copy);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  SmallVector<Value> lbs(source.getRank(), zero), steps(source.getRank(), one);
  SmallVector<Value> ubs;
  for (int64_t d = 0; d < source.getRank(); ++d)
    ubs.push_back(memref::DimOp::create(rewriter, loc, copy.getSource(), d));
  scf::ParallelOp::create(
      rewriter, loc, lbs, ubs, steps,
      [&](OpBuilder &b, Location nested, ValueRange ivs) {
        Value v = memref::LoadOp::create(b, nested, copy.getSource(), ivs);
        memref::StoreOp::create(b, nested, v, copy.getTarget(), ivs);
      });
  rewriter.eraseOp(copy);
}

struct ThreadParallelLoopsPass
    : public linfuse::impl::ThreadParallelLoopsPassBase<
          ThreadParallelLoopsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    LowerToLLVMOptions options(&getContext(), DataLayout(module));
    LLVMTypeConverter converter(&getContext(), options);
    SymbolTable symbols(module);
    IRRewriter rewriter(&getContext());
    outlined.clear();

    for (auto fn : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (fn.isExternal())
        continue;
      SmallVector<memref::CopyOp> copies;
      fn.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
      for (memref::CopyOp copy : copies)
        copyAsLoops(rewriter, copy);
      SmallVector<scf::ParallelOp> outermost;
      fn.walk([&](scf::ParallelOp op) {
        if (!op->getParentOfType<scf::ParallelOp>() && canRunOnThreads(op))
          outermost.push_back(op);
      });
      unsigned count = 0;
      Operation *after = fn; // Outlined bodies follow `fn` in loop order.
      for (scf::ParallelOp loop : outermost) {
        scf::ParallelOp collapsed = collapseOuterDims(rewriter, loop);
        if (!collapsed) {
          loop->emitError("linfuse-thread-parallel-loops: collapsing the "
                          "loop's dimensions failed");
          return signalPassFailure();
        }
        func::FuncOp body =
            outline(rewriter, symbols, converter, fn, collapsed, count, after);
        if (body && after->isBeforeInBlock(body))
          after = body;
      }
    }
  }

  /// Outlined bodies by `bodyHash`, to share one among identical loops.
  DenseMap<size_t, SmallVector<func::FuncOp, 1>> outlined;

  /// The body's ops (their names, attributes and types; not their
  /// locations or the values they use).
  static llvm::hash_code bodyHash(func::FuncOp body) {
    llvm::hash_code hash =
        llvm::hash_value(body.getFunctionType().getAsOpaquePointer());
    body.getBody().walk([&](Operation *op) {
      hash = llvm::hash_combine(hash,
                                OperationEquivalence::computeHash(
                                    op, OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::IgnoreLocations));
    });
    return hash;
  }

  /// `body`, or an earlier outlined body that does the same (a decoder
  /// layer's two RMSNorms, Q's and K's rotary embedding, the residual adds
  /// of every layer in one partition): `body` is then erased. Each body is
  /// compiled by LLVM once instead of once per loop, a sixth to a fifth of
  /// a LLaMA-7B-shaped partition's JIT time (Benchmarks.md).
  func::FuncOp shared(func::FuncOp body, SymbolTable &symbols) {
    SmallVector<func::FuncOp, 1> &same = outlined[size_t(bodyHash(body))];
    for (func::FuncOp earlier : same)
      if (earlier.getFunctionType() == body.getFunctionType() &&
          OperationEquivalence::isRegionEquivalentTo(
              &earlier.getBody(), &body.getBody(),
              OperationEquivalence::IgnoreLocations)) {
        symbols.erase(body);
        return earlier;
      }
    same.push_back(body);
    return body;
  }

  /// The runtime's linfuse_parallel_for, declared once.
  func::FuncOp runtimeFunction(OpBuilder &b, SymbolTable &symbols) {
    if (auto fn = symbols.lookup<func::FuncOp>(kParallelFor))
      return fn;
    MLIRContext *ctx = b.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx), i64 = b.getI64Type();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(getOperation().getBody());
    auto fn = func::FuncOp::create(b, getOperation().getLoc(), kParallelFor,
                                   b.getFunctionType({ptr, ptr, i64, i64}, {}));
    fn.setPrivate();
    symbols.insert(fn);
    return fn;
  }

  /// Replaces `loop` by a linfuse_parallel_for call of its outlined body,
  /// placed after `after`; returns the body (null: the loop stays).
  func::FuncOp outline(IRRewriter &rewriter, SymbolTable &symbols,
                       const LLVMTypeConverter &converter, func::FuncOp parent,
                       scf::ParallelOp loop, unsigned &count,
                       Operation *after) {
    MLIRContext *ctx = &getContext();
    Location loc = loop.getLoc();
    Type ptrType = LLVM::LLVMPointerType::get(ctx);
    Type i64 = rewriter.getI64Type();

    // What the body reads from outside, and the bounds it needs.
    SetVector<Value> used;
    getUsedValuesDefinedAbove(loop.getRegion(), used);
    used.insert(loop.getLowerBound()[0]);
    used.insert(loop.getStep()[0]);
    for (unsigned d = 1; d < loop.getNumLoops(); ++d) {
      used.insert(loop.getLowerBound()[d]);
      used.insert(loop.getUpperBound()[d]);
      used.insert(loop.getStep()[d]);
    }
    SmallVector<Value> captured;
    SetVector<Operation *> cloned;
    SmallVector<Type> fields;
    for (Value v : used) {
      SetVector<Operation *> ops;
      if (collectClonable(v, ops)) {
        cloned.insert(ops.begin(), ops.end());
        continue;
      }
      Type field = storedType(v.getType(), converter);
      if (!field)
        return {}; // Stays on the calling thread.
      captured.push_back(v);
      fields.push_back(field);
    }
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, fields);

    // The outlined body: iterations [lo, hi) of dimension 0.
    Type indexType = rewriter.getIndexType();
    rewriter.setInsertionPointAfter(after);
    auto body = func::FuncOp::create(
        rewriter, loc, (parent.getName() + "__parallel" + Twine(count++)).str(),
        rewriter.getFunctionType({indexType, indexType, ptrType}, {}));
    body.setPrivate();
    symbols.insert(body);
    Block *entry = body.addEntryBlock();
    rewriter.setInsertionPointToStart(entry);
    Value lo = entry->getArgument(0), hi = entry->getArgument(1),
          context = entry->getArgument(2);
    IRMapping mapping;
    for (Operation *op : cloned) {
      // Folded as they are cloned: a collapsed bound such as 1 * 64 is a
      // constant in the body, as it was before the collapse.
      Operation *copy = rewriter.clone(*op, mapping);
      SmallVector<Value, 1> folded;
      if (succeeded(rewriter.tryFold(copy, folded)) && !folded.empty()) {
        mapping.map(op->getResult(0), folded.front());
        rewriter.eraseOp(copy);
      }
    }
    for (auto [i, v] : llvm::enumerate(captured)) {
      Value field =
          LLVM::GEPOp::create(rewriter, loc, ptrType, structType, context,
                              ArrayRef<LLVM::GEPArg>{0, int32_t(i)});
      Value loaded = LLVM::LoadOp::create(rewriter, loc, fields[i], field);
      Value value = loaded;
      if (isa<MemRefType>(v.getType()))
        value = UnrealizedConversionCastOp::create(rewriter, loc, v.getType(),
                                                   loaded)
                    .getResult(0);
      else if (isa<IndexType>(v.getType()))
        value = arith::IndexCastOp::create(rewriter, loc, indexType, loaded);
      mapping.map(v, value);
    }
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> lbs{lo}, ubs{hi}, steps{one};
    for (unsigned d = 1; d < loop.getNumLoops(); ++d) {
      lbs.push_back(mapping.lookup(loop.getLowerBound()[d]));
      ubs.push_back(mapping.lookup(loop.getUpperBound()[d]));
      steps.push_back(mapping.lookup(loop.getStep()[d]));
    }
    Value lb0 = mapping.lookup(loop.getLowerBound()[0]);
    Value step0 = mapping.lookup(loop.getStep()[0]);
    scf::ParallelOp::create(
        rewriter, loc, lbs, ubs, steps,
        [&](OpBuilder &b, Location nested, ValueRange ivs) {
          // The original induction variable: lb + i * step.
          Value scaled = arith::MulIOp::create(b, nested, ivs[0], step0);
          mapping.map(loop.getInductionVars()[0],
                      arith::AddIOp::create(b, nested, lb0, scaled));
          for (unsigned d = 1; d < ivs.size(); ++d)
            mapping.map(loop.getInductionVars()[d], ivs[d]);
          for (Operation &op : loop.getBody()->without_terminator())
            b.clone(op, mapping);
        });
    func::ReturnOp::create(rewriter, loc);
    if (func::FuncOp earlier = shared(body, symbols); earlier != body) {
      body = earlier;
      --count; // The next body takes the erased one's name.
    }

    // The call: the context on the parent's stack, the loop's size.
    rewriter.setInsertionPoint(loop);
    Value iterations = tripCount(rewriter, loc, loop.getLowerBound()[0],
                                 loop.getUpperBound()[0], loop.getStep()[0]);
    Value work = workPerIteration(rewriter, loc, loop);
    Value contextPtr;
    if (captured.empty()) {
      contextPtr = LLVM::ZeroOp::create(rewriter, loc, ptrType);
    } else {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&parent.getBody().front());
      Value size = LLVM::ConstantOp::create(rewriter, loc, i64,
                                            rewriter.getI64IntegerAttr(1));
      contextPtr =
          LLVM::AllocaOp::create(rewriter, loc, ptrType, structType, size);
    }
    for (auto [i, v] : llvm::enumerate(captured)) {
      Value stored = v;
      if (isa<MemRefType>(v.getType()))
        stored = UnrealizedConversionCastOp::create(rewriter, loc, fields[i], v)
                     .getResult(0);
      else if (isa<IndexType>(v.getType()))
        stored = arith::IndexCastOp::create(rewriter, loc, i64, v);
      Value field =
          LLVM::GEPOp::create(rewriter, loc, ptrType, structType, contextPtr,
                              ArrayRef<LLVM::GEPArg>{0, int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, stored, field);
    }
    Value fnValue = func::ConstantOp::create(
        rewriter, loc, body.getFunctionType(), body.getSymName());
    Value fnPtr =
        UnrealizedConversionCastOp::create(rewriter, loc, ptrType, fnValue)
            .getResult(0);
    func::FuncOp runtime = runtimeFunction(rewriter, symbols);
    func::CallOp::create(
        rewriter, loc, runtime,
        ValueRange{fnPtr, contextPtr,
                   arith::IndexCastOp::create(rewriter, loc, i64, iterations),
                   arith::IndexCastOp::create(rewriter, loc, i64, work)});
    rewriter.eraseOp(loop);
    return body;
  }
};

} // namespace
