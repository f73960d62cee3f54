//===- LinfuseOps.cpp - linfuse.gemm builders and verifier ----------------===//

#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::linfuse;

#define GET_OP_CLASSES
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

namespace {
/// The logical (after op()) matrix view of one rank-2 or rank-3 operand.
struct MatrixView {
  ShapedType type;
  bool transposed;

  int64_t batchDims() const { return type.getRank() - 2; }
  int64_t rows() const {
    return type.getDimSize(batchDims() + (transposed ? 1 : 0));
  }
  int64_t cols() const {
    return type.getDimSize(batchDims() + (transposed ? 0 : 1));
  }
};
} // namespace

static std::string dimToString(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// Two sizes conflict only when both are static and differ.
static bool conflict(int64_t lhs, int64_t rhs) {
  return !ShapedType::isDynamic(lhs) && !ShapedType::isDynamic(rhs) &&
         lhs != rhs;
}

int64_t GemmOp::getStaticM() {
  return MatrixView{cast<ShapedType>(getC().getType()), false}.rows();
}
int64_t GemmOp::getStaticN() {
  return MatrixView{cast<ShapedType>(getC().getType()), false}.cols();
}
int64_t GemmOp::getStaticK() {
  return MatrixView{cast<ShapedType>(getA().getType()), getTransposeA()}.cols();
}

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

void GemmOp::build(OpBuilder &builder, OperationState &state, Value a, Value b,
                   Value bias, Value c, bool transposeA, bool transposeB,
                   Epilogue epilogue, float alpha, float beta) {
  Type resultType = isa<RankedTensorType>(c.getType()) ? c.getType() : Type();
  build(builder, state, resultType, a, b, bias, c,
        transposeA ? builder.getUnitAttr() : UnitAttr(),
        transposeB ? builder.getUnitAttr() : UnitAttr(),
        builder.getF32FloatAttr(alpha), builder.getF32FloatAttr(beta),
        EpilogueAttr::get(builder.getContext(), epilogue));
}

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::verify() {
  auto aType = cast<ShapedType>(getA().getType());
  auto bType = cast<ShapedType>(getB().getType());
  auto cType = cast<ShapedType>(getC().getType());
  ShapedType biasType =
      getBias() ? cast<ShapedType>(getBias().getType()) : ShapedType();

  // Tensor and memref forms must not be mixed.
  bool tensorForm = isa<RankedTensorType>(cType);
  auto checkKind = [&](ShapedType t, StringRef name) -> LogicalResult {
    if (isa<RankedTensorType>(t) != tensorForm)
      return emitOpError() << "operand '" << name << "' is a "
                           << (tensorForm ? "memref" : "tensor")
                           << " but 'c' is a "
                           << (tensorForm ? "tensor" : "memref")
                           << "; operands must be all tensors or all memrefs";
    return success();
  };
  if (failed(checkKind(aType, "a")) || failed(checkKind(bType, "b")) ||
      (biasType && failed(checkKind(biasType, "bias"))))
    return failure();

  if (tensorForm && !getResult())
    return emitOpError("tensor form must return the updated 'c'");
  if (!tensorForm && getResult())
    return emitOpError("memref form writes 'c' in place and has no result");
  if (getResult() && getResult().getType() != cType)
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match 'c' type " << cType;

  // Ranks.
  int64_t rank = aType.getRank();
  if (rank != 2 && rank != 3)
    return emitOpError() << "expects rank 2 or 3 (batched) operands, but 'a' "
                            "has rank "
                         << rank;
  if (bType.getRank() != rank)
    return emitOpError() << "operand 'b' has rank " << bType.getRank()
                         << " but 'a' has rank " << rank;
  if (cType.getRank() != rank)
    return emitOpError() << "operand 'c' has rank " << cType.getRank()
                         << " but 'a' has rank " << rank;

  // Element types: A and B agree; C (and bias) is A's type or f32.
  Type abElt = aType.getElementType();
  if (bType.getElementType() != abElt)
    return emitOpError() << "element type mismatch: 'a' has " << abElt
                         << " but 'b' has " << bType.getElementType();
  Type cElt = cType.getElementType();
  if (abElt.isInteger(8) != cElt.isInteger(32) || abElt.isInteger(32))
    return emitOpError() << "integer GEMMs multiply i8 into i32, not " << abElt
                         << " into " << cElt;
  if (abElt.isInteger(8)) {
    float beta = getBeta().convertToFloat();
    if (getEpilogue() != Epilogue::None ||
        getAlpha().convertToFloat() != 1.0f || (beta != 0.0f && beta != 1.0f))
      return emitOpError()
             << "an integer GEMM takes no activation and alpha 1 (beta 0 or 1)";
  } else if (cElt != abElt && !cElt.isF32()) {
    return emitOpError() << "'c' element type " << cElt << " must be f32 or "
                         << "the element type of 'a' (" << abElt << ")";
  }

  // Dimensions.
  MatrixView opA{aType, getTransposeA()}, opB{bType, getTransposeB()},
      viewC{cType, false};
  if (rank == 3) {
    int64_t ba = aType.getDimSize(0), bb = bType.getDimSize(0),
            bc = cType.getDimSize(0);
    if (conflict(ba, bb) || conflict(ba, bc) || conflict(bb, bc))
      return emitOpError() << "batch dimension mismatch: 'a' has "
                           << dimToString(ba) << ", 'b' has " << dimToString(bb)
                           << ", 'c' has " << dimToString(bc);
  }
  if (conflict(opA.cols(), opB.rows()))
    return emitOpError() << "K mismatch: op(a) has K = "
                         << dimToString(opA.cols())
                         << " but op(b) has K = " << dimToString(opB.rows());
  if (conflict(opA.rows(), viewC.rows()))
    return emitOpError() << "M mismatch: op(a) has M = "
                         << dimToString(opA.rows())
                         << " but 'c' has M = " << dimToString(viewC.rows());
  if (conflict(opB.cols(), viewC.cols()))
    return emitOpError() << "N mismatch: op(b) has N = "
                         << dimToString(opB.cols())
                         << " but 'c' has N = " << dimToString(viewC.cols());

  if (biasType) {
    if (biasType.getRank() != 1)
      return emitOpError() << "'bias' must be a vector of length N, but has "
                              "rank "
                           << biasType.getRank();
    if (conflict(biasType.getDimSize(0), viewC.cols()))
      return emitOpError() << "N mismatch: 'bias' has length "
                           << dimToString(biasType.getDimSize(0))
                           << " but 'c' has N = " << dimToString(viewC.cols());
    if (biasType.getElementType() != cElt)
      return emitOpError() << "'bias' element type "
                           << biasType.getElementType()
                           << " must match the element type of 'c' (" << cElt
                           << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Interfaces
//===----------------------------------------------------------------------===//

void GemmOp::getAsmResultNames(function_ref<void(Value, StringRef)> setNameFn) {
  if (getResult())
    setNameFn(getResult(), "gemm");
}

void GemmOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // The tensor form is pure; the memref form reads its inputs and writes C.
  if (hasPureTensorSemantics())
    return;
  effects.emplace_back(MemoryEffects::Read::get(), &getAMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Read::get(), &getBMutable(),
                       SideEffects::DefaultResource::get());
  for (OpOperand &bias : getBiasMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &bias,
                         SideEffects::DefaultResource::get());
  if (readsC())
    effects.emplace_back(MemoryEffects::Read::get(), &getCMutable(),
                         SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getCMutable(),
                       SideEffects::DefaultResource::get());
}
