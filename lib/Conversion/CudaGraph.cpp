//===- CudaGraph.cpp - public functions captured into CUDA graphs ---------===//
//
// The body of each public function is bracketed by the runtime's
// function-graph calls (Runtime.h, lib/Runtime/CudaGraphs.cpp). The runtime
// does the capturing and replaying; the compiler's part is to say which
// call is which: a slot per function (a private, zero-initialized global:
// its address tells loaded modules apart, and the generation the runtime
// writes into it tells a module from an earlier one unloaded from the same
// address) and a key of everything a captured graph bakes in — the argument
// buffers' addresses and layouts and the scalar arguments.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_CUDAGRAPHPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;

static constexpr StringLiteral kBegin = "linfuse_cuda_function_begin";
static constexpr StringLiteral kEnd = "linfuse_cuda_function_end";

/// Appends the i64 words that identify `arg` in a graph: a memref's aligned
/// address, offset, sizes and strides; a scalar's bits.
static LogicalResult appendKeyWords(OpBuilder &b, Location loc,
                                    BlockArgument arg,
                                    SmallVectorImpl<Value> &words) {
  Type i64 = b.getI64Type();
  auto fromIndex = [&](Value v) -> Value {
    return arith::IndexCastOp::create(b, loc, i64, v);
  };
  Type type = arg.getType();
  if (auto memref = dyn_cast<MemRefType>(type)) {
    if (!memref.isStrided())
      return failure();
    words.push_back(
        fromIndex(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arg)));
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, arg);
    words.push_back(fromIndex(meta.getOffset()));
    for (Value v : meta.getSizes())
      words.push_back(fromIndex(v));
    for (Value v : meta.getStrides())
      words.push_back(fromIndex(v));
    return success();
  }
  if (type.isIndex()) {
    words.push_back(fromIndex(arg));
    return success();
  }
  Value bits = arg;
  if (auto flt = dyn_cast<FloatType>(type))
    bits =
        arith::BitcastOp::create(b, loc, b.getIntegerType(flt.getWidth()), arg);
  auto intType = dyn_cast<IntegerType>(bits.getType());
  if (!intType || intType.getWidth() > 64)
    return failure();
  words.push_back(intType.getWidth() == 64
                      ? bits
                      : arith::ExtUIOp::create(b, loc, i64, bits).getResult());
  return success();
}

namespace {
struct CudaGraphPass : public linfuse::impl::CudaGraphPassBase<CudaGraphPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseSet<StringAttr> packs = linfuse::getWeightPackingFunctions(module);
    SmallVector<func::FuncOp> functions;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal() &&
          !packs.contains(fn.getSymNameAttr()))
        functions.push_back(fn);
    SymbolTable symbols(module);
    for (func::FuncOp fn : functions)
      if (failed(bracket(fn, symbols)))
        return signalPassFailure();
  }

  LogicalResult bracket(func::FuncOp fn, SymbolTable &symbols) {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    Location loc = fn.getLoc();
    Type index = IndexType::get(ctx);

    // The slot: a private global, whose address identifies the function.
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    auto slotType = MemRefType::get({1}, IntegerType::get(ctx, 64));
    // Zero-initialized: the runtime writes a generation into it on the
    // first call, so graphs of a module unloaded from the same address are
    // never replayed.
    auto zero = DenseElementsAttr::get(
        RankedTensorType::get({1}, IntegerType::get(ctx, 64)), APInt(64, 0));
    auto slot = memref::GlobalOp::create(
        mb, loc, ("__linfuse_graph_slot_" + fn.getSymName()).str(),
        mb.getStringAttr("private"), slotType, zero,
        /*constant=*/false, /*alignment=*/nullptr);
    symbols.insert(slot); // Renamed on a clash.

    FailureOr<func::FuncOp> begin = func::lookupOrCreateFnDecl(
        mb, module, kBegin, {index, index, index}, nullptr, mb.getI32Type());
    FailureOr<func::FuncOp> end = func::lookupOrCreateFnDecl(
        mb, module, kEnd, {index}, nullptr, mb.getI32Type());
    if (failed(begin) || failed(end))
      return module.emitError("linfuse-cuda-graph: the module declares ")
             << kBegin << " or " << kEnd << " with another type";

    Block &entry = fn.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    SmallVector<Value> words;
    for (BlockArgument arg : entry.getArguments())
      if (failed(appendKeyWords(b, loc, arg, words)))
        return fn.emitError("linfuse-cuda-graph: argument #")
               << arg.getArgNumber() << " of type " << arg.getType()
               << " cannot be part of a CUDA graph's key (strided memrefs "
                  "and integer, index or float scalars of up to 64 bits "
                  "can)";
    auto key = memref::AllocaOp::create(
        b, loc,
        MemRefType::get({int64_t(words.size())}, IntegerType::get(ctx, 64)));
    for (auto [i, word] : llvm::enumerate(words))
      memref::StoreOp::create(
          b, loc, word, key,
          ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
    Value slotRef =
        memref::GetGlobalOp::create(b, loc, slotType, slot.getSymName());
    Value slotAddress =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, slotRef);
    Value keyAddress =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, key);
    Value length = arith::ConstantIndexOp::create(b, loc, words.size());
    func::CallOp::create(b, loc, *begin,
                         ValueRange{slotAddress, keyAddress, length});

    fn.walk([&](func::ReturnOp ret) {
      OpBuilder rb(ret);
      func::CallOp::create(rb, ret.getLoc(), *end, ValueRange{slotAddress});
    });
    return success();
  }
};
} // namespace
