//===- GemmOpTest.cpp - C++ API of linfuse.gemm ---------------------------===//

#include "linfuse/Dialect/Linfuse/IR/LinfuseOps.h"
#include "linfuse/InitAllLinfuse.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::linfuse;

namespace {
class GemmOpTest : public ::testing::Test {
protected:
  GemmOpTest() {
    DialectRegistry registry;
    registerLinfuseDialects(registry);
    registry.insert<func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Builds `func @f(a, b, c)` holding one gemm over the given types and
  /// returns it.
  GemmOp buildGemm(Type a, Type b, Type c, bool transposeB = false) {
    OpBuilder builder(&ctx);
    Location loc = builder.getUnknownLoc();
    module = ModuleOp::create(builder, loc);
    builder.setInsertionPointToEnd(module->getBody());
    auto fn = func::FuncOp::create(builder, loc, "f",
                                   builder.getFunctionType({a, b, c}, {}));
    Block *entry = fn.addEntryBlock();
    builder.setInsertionPointToEnd(entry);
    auto gemm = GemmOp::create(
        builder, loc, entry->getArgument(0), entry->getArgument(1), Value(),
        entry->getArgument(2), false, transposeB, Epilogue::Relu);
    func::ReturnOp::create(builder, loc);
    return gemm;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(GemmOpTest, BuilderInfersResultAndSizes) {
  Type f32 = Float32Type::get(&ctx);
  auto a = RankedTensorType::get({ShapedType::kDynamic, 64}, f32);
  auto b = RankedTensorType::get({96, 64}, f32);
  auto c = RankedTensorType::get({ShapedType::kDynamic, 96}, f32);
  GemmOp gemm = buildGemm(a, b, c, /*transposeB=*/true);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_TRUE(gemm.hasPureTensorSemantics());
  EXPECT_EQ(gemm.getResult().getType(), c);
  EXPECT_TRUE(ShapedType::isDynamic(gemm.getStaticM()));
  EXPECT_EQ(gemm.getStaticN(), 96);
  EXPECT_EQ(gemm.getStaticK(), 64);
  EXPECT_EQ(gemm.getEpilogue(), Epilogue::Relu);
  EXPECT_FALSE(gemm.readsC()); // beta defaults to 0
  EXPECT_EQ(gemm.getNumDpsInits(), 1);
}

TEST_F(GemmOpTest, MemrefFormHasNoResultAndWritesC) {
  Type bf16 = BFloat16Type::get(&ctx);
  Type f32 = Float32Type::get(&ctx);
  GemmOp gemm = buildGemm(MemRefType::get({4, 8, 16}, bf16),
                          MemRefType::get({4, 16, 32}, bf16),
                          MemRefType::get({4, 8, 32}, f32));
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_FALSE(gemm.hasPureTensorSemantics());
  EXPECT_EQ(gemm.getRank(), 3);
  auto effects = cast<MemoryEffectOpInterface>(gemm.getOperation());
  EXPECT_TRUE(effects.hasEffect<MemoryEffects::Write>());
  EXPECT_FALSE(isMemoryEffectFree(gemm));
}

TEST_F(GemmOpTest, VerifierNamesMismatchingK) {
  Type f16 = Float16Type::get(&ctx);
  buildGemm(RankedTensorType::get({8, 64}, f16),
            RankedTensorType::get({32, 16}, f16),
            RankedTensorType::get({8, 16}, f16));
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("K mismatch: op(a) has K = 64 but op(b) has K = 32"),
            std::string::npos)
      << message;
}

TEST_F(GemmOpTest, BufferizationModelIsAttached) {
  Type f32 = Float32Type::get(&ctx);
  auto t = RankedTensorType::get({4, 4}, f32);
  GemmOp gemm = buildGemm(t, t, t);
  EXPECT_TRUE(isa<bufferization::BufferizableOpInterface>(gemm.getOperation()));
}
