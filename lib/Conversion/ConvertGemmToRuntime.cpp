//===- ConvertGemmToRuntime.cpp - linfuse.gemm to runtime calls -----------===//
//
// The runtime, not generated code, owns the GEMM: it picks BLAS or cuBLASLt
// calls, leading dimensions, workspaces and algorithms. So the lowering of
// `linfuse.gemm` is a single call with the operands as unranked memrefs
// (rank + descriptor pointer at the LLVM level: strided views pass in
// place) and the op's attributes as scalars.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Conversion/Passes.h"
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"
#include "linfuse/Runtime/Runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace linfuse {
#define GEN_PASS_DEF_CONVERTGEMMTORUNTIMEPASS
#include "linfuse/Conversion/Passes.h.inc"
} // namespace linfuse
} // namespace mlir

using namespace mlir;
using namespace mlir::linfuse;

// The epilogue code passed to the runtime is the enum's value.
static_assert(static_cast<int>(Epilogue::Relu) == LINFUSE_EPILOGUE_RELU &&
                  static_cast<int>(Epilogue::GeluErf) ==
                      LINFUSE_EPILOGUE_GELU_ERF &&
                  static_cast<int>(Epilogue::GeluTanh) ==
                      LINFUSE_EPILOGUE_GELU_TANH &&
                  static_cast<int>(Epilogue::Silu) == LINFUSE_EPILOGUE_SILU,
              "#linfuse.epilogue and linfuse_epilogue must agree");

static StringRef typeSuffix(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(8))
    return "i8";
  if (t.isInteger(32))
    return "i32";
  return "";
}

std::string mlir::linfuse::getGemmRuntimeFunctionName(StringRef target,
                                                      Type abElementType,
                                                      Type cElementType) {
  return ("linfuse_" + target + "_gemm_" + typeSuffix(abElementType) + "_" +
          typeSuffix(cElementType))
      .str();
}

/// Whether `v` holds the same values at the same address on every call of
/// its function: a view of a constant global, or of a packed weight (an
/// argument that `@f__pack` computed, `linfuse.packed`; the packing
/// function releases the runtime's reordered copies whenever it runs).
/// Weights passed as plain `linfuse.weight` arguments do not count: a
/// caller may pass other values at the same address.
static bool isConstantAcrossCalls(Value v) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      return fn && arg.getOwner() == &fn.getBody().front() &&
             fn.getArgAttr(arg.getArgNumber(), "linfuse.packed");
    }
    Operation *op = v.getDefiningOp();
    if (auto get = dyn_cast_or_null<memref::GetGlobalOp>(op)) {
      auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
          op, get.getNameAttr());
      return global && global.getConstant();
    }
    auto view = dyn_cast_or_null<ViewLikeOpInterface>(op);
    if (!view)
      return false;
    v = view.getViewSource();
  }
}

/// The part of a weight a GEMM reads as B, and how: the whole weight or a
/// subview with static offsets, sizes and strides, transposed or not (the
/// runtime's copies are per part and orientation).
struct WeightPart {
  SmallVector<int64_t> offsets, sizes, strides; // empty: the whole weight
  bool transposed = false;

  bool operator==(const WeightPart &o) const {
    return offsets == o.offsets && sizes == o.sizes && strides == o.strides &&
           transposed == o.transposed;
  }
  /// Whether the parts share no element (conservatively: rows or columns
  /// of unit-stride parts that do not overlap).
  bool disjointFrom(const WeightPart &o) const {
    if (offsets.empty() || o.offsets.empty() ||
        offsets.size() != o.offsets.size())
      return false;
    for (size_t d = 0; d < offsets.size(); ++d)
      if (strides[d] == 1 && o.strides[d] == 1 &&
          (offsets[d] + sizes[d] <= o.offsets[d] ||
           o.offsets[d] + o.sizes[d] <= offsets[d]))
        return true;
    return false;
  }
};

/// Whether every read of `arg` is a single (rank 2) GEMM reading it, or a
/// static subview of it, as B; and the parts GEMMs read are each the same
/// (in the same orientation) as or disjoint from the others. The runtime
/// drops a handed-over weight's values as soon as one copy of a part
/// exists, so no other GEMM may need an overlapping part.
static bool readOnlyAsGemmB(Value arg) {
  SmallVector<WeightPart> parts;
  // All readers of `v` are rank-2 GEMMs reading it as B only, all in the
  // same orientation (`transposed`, set from the first).
  auto gemmReads = [](Value v, bool &transposed) {
    bool first = true;
    return llvm::all_of(v.getUses(), [&](OpOperand &use) {
      auto gemm = dyn_cast<GemmOp>(use.getOwner());
      if (!gemm || use.get() != gemm.getB() || gemm.getA() == v ||
          gemm.getC() == v || gemm.getBias() == v ||
          cast<ShapedType>(gemm.getC().getType()).getRank() != 2)
        return false;
      if (first)
        transposed = gemm.getTransposeB();
      first = false;
      return transposed == gemm.getTransposeB();
    });
  };
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    WeightPart part;
    if (auto sub = dyn_cast<memref::SubViewOp>(user)) {
      if (sub.getSource() != arg ||
          !gemmReads(sub.getResult(), part.transposed) ||
          ShapedType::isDynamicShape(sub.getStaticOffsets()) ||
          ShapedType::isDynamicShape(sub.getStaticSizes()) ||
          ShapedType::isDynamicShape(sub.getStaticStrides()))
        return false;
      part.offsets.assign(sub.getStaticOffsets().begin(),
                          sub.getStaticOffsets().end());
      part.sizes.assign(sub.getStaticSizes().begin(),
                        sub.getStaticSizes().end());
      part.strides.assign(sub.getStaticStrides().begin(),
                          sub.getStaticStrides().end());
    } else if (!isa<GemmOp>(user) || !gemmReads(arg, part.transposed)) {
      return false;
    }
    for (const WeightPart &other : parts)
      if (!(other == part) && !other.disjointFrom(part))
        return false;
    parts.push_back(std::move(part));
  }
  return true;
}

/// Records on `fn`, as `linfuse.gemm_only_weights`, the numbers of the
/// weights it takes that it reads only as GEMM B operands: weights the
/// runtime reads from reordered copies alone once they exist, so a caller
/// may give their plain values up (Executable::handOverWeights). The weights
/// it takes are its packed weights (`linfuse.packed`, numbered by the
/// packing function's results) or, in a function nothing was packed for
/// (no merge, no fold: Phi-3's pre-fused projections), its `linfuse.weight`
/// arguments themselves, numbered in order.
static void markGemmOnlyWeights(func::FuncOp fn) {
  if (fn.isExternal())
    return;
  auto attr = [&](BlockArgument arg, StringRef name) {
    return fn.getArgAttr(arg.getArgNumber(), name);
  };
  bool packed = llvm::any_of(fn.getArguments(), [&](BlockArgument arg) {
    return attr(arg, "linfuse.packed") != nullptr;
  });
  SmallVector<int64_t> numbers;
  int64_t weights = 0;
  for (BlockArgument arg : fn.getArguments()) {
    std::optional<int64_t> number;
    if (auto p = dyn_cast_or_null<IntegerAttr>(attr(arg, "linfuse.packed")))
      number = p.getInt();
    else if (!packed && attr(arg, "linfuse.weight"))
      number = weights++;
    if (number && !arg.use_empty() && readOnlyAsGemmB(arg))
      numbers.push_back(*number);
  }
  if (!numbers.empty())
    fn->setAttr("linfuse.gemm_only_weights",
                DenseI64ArrayAttr::get(fn.getContext(), numbers));
}

namespace {
struct ConvertGemmToRuntimePass
    : public linfuse::impl::ConvertGemmToRuntimePassBase<
          ConvertGemmToRuntimePass> {
  using ConvertGemmToRuntimePassBase::ConvertGemmToRuntimePassBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      emitError(getOperation().getLoc())
          << "linfuse-convert-gemm-to-runtime: unknown target '" << target
          << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    SymbolTable symbols(getOperation());
    if (target == "cpu")
      getOperation().walk([](func::FuncOp fn) { markGemmOnlyWeights(fn); });
    SmallVector<GemmOp> gemms;
    getOperation().walk([&](GemmOp op) { gemms.push_back(op); });
    for (GemmOp op : gemms)
      if (failed(convert(op, symbols)))
        return signalPassFailure();
    if (target == "cpu" && releaseOnPack)
      releaseOnPacking(symbols);
  }

  /// Each weight-packing function starts by releasing the host runtime's
  /// reordered copies of constant B operands: the packed weights it is
  /// about to write may reuse the addresses of ones it replaces.
  void releaseOnPacking(SymbolTable &symbols) {
    ModuleOp module = getOperation();
    for (StringAttr name : getWeightPackingFunctions(module)) {
      auto pack = symbols.lookup<func::FuncOp>(name);
      if (!pack || pack.isExternal())
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(&pack.getBody().front());
      func::FuncOp release =
          getOrDeclare(symbols, "linfuse_cpu_release_packed_weights", {}, {});
      func::CallOp::create(b, pack.getLoc(), release, ValueRange());
    }
  }

  /// `func.func private @name(memref<*xAB> x2, memref<*xC> x2, i32, i32,
  /// f32, f32) -> i32`, declared once per module.
  func::FuncOp getOrDeclare(SymbolTable &symbols, StringRef name,
                            TypeRange argTypes, TypeRange resultTypes) {
    if (auto fn = symbols.lookup<func::FuncOp>(name))
      return fn;
    ModuleOp module = getOperation();
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto fn = func::FuncOp::create(b, module.getLoc(), name,
                                   b.getFunctionType(argTypes, resultTypes));
    fn.setPrivate();
    symbols.insert(fn);
    return fn;
  }

  LogicalResult convert(GemmOp op, SymbolTable &symbols) {
    if (op.hasPureTensorSemantics())
      return op.emitOpError("must be bufferized before "
                            "--linfuse-convert-gemm-to-runtime");
    auto cType = cast<MemRefType>(op.getC().getType());
    Type abElt = cast<MemRefType>(op.getA().getType()).getElementType();
    Type cElt = cType.getElementType();
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto unranked = [&](Value v) -> Value {
      auto t = cast<MemRefType>(v.getType());
      return memref::CastOp::create(
          b, loc,
          UnrankedMemRefType::get(t.getElementType(), t.getMemorySpace()), v);
    };
    Value a = unranked(op.getA()), bm = unranked(op.getB());
    Value c = unranked(op.getC());
    Value bias = op.getBias() ? unranked(op.getBias()) : c;

    int32_t flags =
        (op.getTransposeA() ? LINFUSE_GEMM_TRANSPOSE_A : 0) |
        (op.getTransposeB() ? LINFUSE_GEMM_TRANSPOSE_B : 0) |
        (op.getBias() ? LINFUSE_GEMM_HAS_BIAS : 0) |
        (isConstantAcrossCalls(op.getB()) ? LINFUSE_GEMM_CONSTANT_B : 0);
    auto i32 = [&](int32_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, v, 32);
    };
    auto f32 = [&](APFloat v) -> Value {
      return arith::ConstantFloatOp::create(b, loc, b.getF32Type(), v);
    };
    SmallVector<Value> args = {a,
                               bm,
                               bias,
                               c,
                               i32(flags),
                               i32(static_cast<int32_t>(op.getEpilogue())),
                               f32(op.getAlpha()),
                               f32(op.getBeta())};
    std::string name = getGemmRuntimeFunctionName(target, abElt, cElt);
    func::FuncOp fn = getOrDeclare(symbols, name, ValueRange(args).getTypes(),
                                   b.getI32Type());
    func::CallOp::create(b, loc, fn, args);
    op.erase();
    return success();
  }
};
} // namespace
