//===- BufferizableOpInterfaceImpl.cpp - bufferize linfuse.gemm -----------===//
//
// linfuse.gemm is destination-style: its result aliases C, the other operands
// are only read. One-shot bufferization therefore writes the GEMM straight
// into C's buffer (a strided subview when C is a slice of a merged output).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/BufferizableOpInterfaceImpl.h"
#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::linfuse;

namespace {
struct GemmOpBufferizationModel
    : public DstBufferizableOpInterfaceExternalModel<GemmOpBufferizationModel,
                                                     GemmOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    auto gemm = cast<GemmOp>(op);
    // With beta == 0 the incoming value of C is overwritten without being
    // read, so bufferization need not preserve it (no copy of the init).
    if (gemm.isDpsInit(&operand))
      return gemm.readsC();
    return true;
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto gemm = cast<GemmOp>(op);
    if (!gemm.hasPureTensorSemantics())
      return success(); // Already on buffers.

    rewriter.setInsertionPoint(gemm);
    auto bufferOf = [&](Value v) -> FailureOr<Value> {
      return getBuffer(rewriter, v, options, state);
    };
    FailureOr<Value> a = bufferOf(gemm.getA());
    FailureOr<Value> b = bufferOf(gemm.getB());
    FailureOr<Value> c = bufferOf(gemm.getC());
    if (failed(a) || failed(b) || failed(c))
      return failure();
    Value bias;
    if (gemm.getBias()) {
      FailureOr<Value> biasBuf = bufferOf(gemm.getBias());
      if (failed(biasBuf))
        return failure();
      bias = *biasBuf;
    }

    GemmOp::create(rewriter, gemm.getLoc(), /*result=*/Type(), *a, *b, bias, *c,
                   gemm.getTransposeAAttr(), gemm.getTransposeBAttr(),
                   gemm.getAlphaAttr(), gemm.getBetaAttr(),
                   gemm.getEpilogueAttr());
    replaceOpWithBufferizedValues(rewriter, op, *c);
    return success();
  }
};
} // namespace

void mlir::linfuse::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, LinfuseDialect *) {
    GemmOp::attachInterface<GemmOpBufferizationModel>(*ctx);
  });
}
