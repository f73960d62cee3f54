//===- ExecutableTest.cpp - the in-process compile-and-call API -----------===//
//
// What embedders (and the Python bindings) use: Executable::packWeights and
// invoke on caller-owned memory, results handed over without copies, and
// the pass report.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/Lowering.h"
#include "linfuse/Execution/PassReport.h"
#include "linfuse/Tools/ModuleLoading.h"
#include "linfuse/Tools/ToolContext.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mlir;
using namespace mlir::linfuse;

namespace {

// y0 = x * w0, y1 = x * w1 (shared x: one merged GEMM), weights as
// `linfuse.weight` arguments (packed once by @f__pack).
constexpr const char *kTwoProjections = R"mlir(
func.func @f(%x: tensor<?x4xf32>, %w0: tensor<4x3xf32> {linfuse.weight},
             %w1: tensor<4x2xf32> {linfuse.weight}) -> (tensor<?x3xf32>, tensor<?x2xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e0 = tensor.empty(%m) : tensor<?x3xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x3xf32>) -> tensor<?x3xf32>
  %y0 = linalg.matmul ins(%x, %w0 : tensor<?x4xf32>, tensor<4x3xf32>) outs(%f0 : tensor<?x3xf32>) -> tensor<?x3xf32>
  %e1 = tensor.empty(%m) : tensor<?x2xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %y1 = linalg.matmul ins(%x, %w1 : tensor<?x4xf32>, tensor<4x2xf32>) outs(%f1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  return %y0, %y1 : tensor<?x3xf32>, tensor<?x2xf32>
}
)mlir";

class ExecutableTest : public ::testing::Test {
protected:
  void SetUp() override {
    DialectRegistry registry;
    registerToolDialects(registry);
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    auto module = parseModule(kTwoProjections, "<test>", *ctx);
    ASSERT_TRUE(static_cast<bool>(module)) << toString(module.takeError());
    CompileOptions options;
    options.report = &report;
    auto compiled = Executable::compile(**module, "f", options);
    ASSERT_TRUE(static_cast<bool>(compiled)) << toString(compiled.takeError());
    exe = std::move(*compiled);
    for (int i = 0; i < 12; ++i)
      w0[i] = 0.5f * i - 2;
    for (int i = 0; i < 8; ++i)
      w1[i] = 1.0f - 0.25f * i;
  }

  /// x * w for x [m, 4] and w [4, n], both row-major.
  static std::vector<float> reference(const std::vector<float> &x,
                                      const float *w, int n) {
    int m = x.size() / 4;
    std::vector<float> y(m * n, 0.0f);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < n; ++c)
        for (int k = 0; k < 4; ++k)
          y[r * n + c] += x[r * 4 + k] * w[k * n + c];
    return y;
  }

  static void expectResult(const ResultArray &got,
                           const std::vector<float> &want, int rows, int n) {
    ASSERT_EQ(got.type, ElementType::F32);
    ASSERT_EQ(got.shape, (SmallVector<int64_t>{rows, n}));
    const float *data = static_cast<const float *>(got.data);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < n; ++c)
        EXPECT_FLOAT_EQ(data[r * got.strides[0] + c * got.strides[1]],
                        want[r * n + c])
            << "at " << r << ", " << c;
  }

  std::unique_ptr<MLIRContext> ctx;
  PassReport report;
  std::unique_ptr<Executable> exe;
  float w0[12], w1[8];
};

TEST_F(ExecutableTest, ReportsTheMerge) {
  ASSERT_TRUE(exe->hasPackFunction());
  bool merged = false;
  for (const Remark &r : report.remarks)
    if (r.pass == "linfuse-merge-parallel-matmuls") {
      EXPECT_EQ(r.message, "merged 2 matmuls sharing %arg0 into one ?x5 GEMM");
      EXPECT_EQ(r.location.file, "<test>");
      EXPECT_GT(r.location.line, 0u);
      merged = true;
    }
  EXPECT_TRUE(merged);
  bool counted = false;
  for (const PassStatisticValue &s : report.statistics)
    if (s.pass == "linfuse-merge-parallel-matmuls" &&
        s.name == "matmuls-removed") {
      EXPECT_EQ(s.value, 1u);
      counted = true;
    }
  EXPECT_TRUE(counted);
}

TEST_F(ExecutableTest, InvokeWithEveryArgument) {
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 0.5f};
  auto results = exe->invoke({{ElementType::F32, {2, 4}, x.data()},
                              {ElementType::F32, {4, 3}, w0},
                              {ElementType::F32, {4, 2}, w1}});
  ASSERT_TRUE(static_cast<bool>(results)) << toString(results.takeError());
  ASSERT_EQ(results->size(), 2u);
  expectResult((*results)[0], reference(x, w0, 3), 2, 3);
  expectResult((*results)[1], reference(x, w1, 2), 2, 2);
  // The results own their buffers: they outlive the executable.
  std::vector<ResultArray> kept = std::move(*results);
  exe.reset();
  expectResult(kept[1], reference(x, w1, 2), 2, 2);
}

TEST_F(ExecutableTest, PackOnceThenActivationsOnly) {
  ASSERT_FALSE(static_cast<bool>(exe->packWeights(
      {{ElementType::F32, {4, 3}, w0}, {ElementType::F32, {4, 2}, w1}})));
  EXPECT_TRUE(exe->hasPackedWeights());
  EXPECT_EQ(exe->numActivations(), 1u);
  for (int rows : {1, 3, 7}) {
    std::vector<float> x(rows * 4);
    for (int i = 0; i < rows * 4; ++i)
      x[i] = 0.25f * (i % 9) - 1;
    auto results = exe->invoke({{ElementType::F32, {rows, 4}, x.data()}});
    ASSERT_TRUE(static_cast<bool>(results)) << toString(results.takeError());
    expectResult((*results)[0], reference(x, w0, 3), rows, 3);
    expectResult((*results)[1], reference(x, w1, 2), rows, 2);
  }
}

TEST_F(ExecutableTest, InstancesShareCodeNotWeights) {
  auto instance = exe->instantiate();
  ASSERT_TRUE(static_cast<bool>(instance)) << toString(instance.takeError());
  std::unique_ptr<Executable> other = std::move(*instance);
  EXPECT_TRUE(other->hasPackFunction());
  EXPECT_FALSE(other->hasPackedWeights());
  EXPECT_EQ(other->numActivations(), 1u);
  float v0[12], v1[8];
  for (int i = 0; i < 12; ++i)
    v0[i] = 3.0f - 0.5f * i;
  for (int i = 0; i < 8; ++i)
    v1[i] = 0.125f * i;
  ASSERT_FALSE(static_cast<bool>(exe->packWeights(
      {{ElementType::F32, {4, 3}, w0}, {ElementType::F32, {4, 2}, w1}})));
  ASSERT_FALSE(static_cast<bool>(other->packWeights(
      {{ElementType::F32, {4, 3}, v0}, {ElementType::F32, {4, 2}, v1}})));
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 0.5f};
  // Each reads its own packed weights, whichever packed last; the code
  // outlives the executable it was compiled as.
  for (int round = 0; round < 2; ++round) {
    auto mine = exe->invoke({{ElementType::F32, {2, 4}, x.data()}});
    ASSERT_TRUE(static_cast<bool>(mine)) << toString(mine.takeError());
    expectResult((*mine)[0], reference(x, w0, 3), 2, 3);
    expectResult((*mine)[1], reference(x, w1, 2), 2, 2);
    if (round == 1)
      exe.reset();
    auto theirs = other->invoke({{ElementType::F32, {2, 4}, x.data()}});
    ASSERT_TRUE(static_cast<bool>(theirs)) << toString(theirs.takeError());
    expectResult((*theirs)[0], reference(x, v0, 3), 2, 3);
    expectResult((*theirs)[1], reference(x, v1, 2), 2, 2);
  }
}

TEST_F(ExecutableTest, InputErrorsAreOneLine) {
  std::vector<float> x(8);
  auto noWeights = exe->invoke({{ElementType::F32, {2, 4}, x.data()}});
  ASSERT_FALSE(static_cast<bool>(noWeights));
  EXPECT_EQ(toString(noWeights.takeError()), "@f takes 3 inputs, got 1");

  auto badShape = exe->invoke({{ElementType::F32, {2, 5}, x.data()},
                               {ElementType::F32, {4, 3}, w0},
                               {ElementType::F32, {4, 2}, w1}});
  ASSERT_FALSE(static_cast<bool>(badShape));
  EXPECT_EQ(toString(badShape.takeError()),
            "input 0: expected ?x4xf32, got 2x5xf32");

  llvm::Error badWeights = exe->packWeights({{ElementType::F16, {4, 3}, w0}});
  ASSERT_TRUE(static_cast<bool>(badWeights));
  EXPECT_EQ(toString(std::move(badWeights)), "@f takes 2 weights, got 1");
}

} // namespace

// Before code generation every defined function but the C interfaces the
// drivers look up becomes internal: MLIR's ExecutionEngine wraps each
// function of external linkage in a packed `_mlir_<name>` that inlines
// it, so an outlined loop body kept external was compiled twice.
TEST(Internalize, OnlyTheCInterfacesStayExternal) {
  DialectRegistry registry;
  registerToolDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto module = parseModule(R"mlir(
llvm.func @linfuse_parallel_for(!llvm.ptr)
llvm.func @f__parallel0() {
  llvm.return
}
llvm.func @f() {
  llvm.call @f__parallel0() : () -> ()
  llvm.return
}
llvm.func @_mlir_ciface_f() {
  llvm.call @f() : () -> ()
  llvm.return
}
)mlir",
                            "<test>", ctx);
  ASSERT_TRUE(static_cast<bool>(module)) << toString(module.takeError());
  internalizeImplementation(**module);
  auto linkage = [&](StringRef name) {
    return (**module).lookupSymbol<LLVM::LLVMFuncOp>(name).getLinkage();
  };
  EXPECT_EQ(LLVM::Linkage::Internal, linkage("f__parallel0"));
  EXPECT_EQ(LLVM::Linkage::Internal, linkage("f"));
  EXPECT_EQ(LLVM::Linkage::External, linkage("_mlir_ciface_f"));
  EXPECT_EQ(LLVM::Linkage::External, linkage("linfuse_parallel_for"));
}
