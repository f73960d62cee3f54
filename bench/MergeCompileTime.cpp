//===- MergeCompileTime.cpp - compile-time cost of merging weights --------===//
//
// Builds an L-layer transformer-like module in memory (per layer: Q/K/V with
// bias in nn.Linear layout, gate/up, down; f32 weights as dense_resource
// constants, as importers emit them), then times
//   1. --linfuse-merge-parallel-matmuls + --linfuse-fold-constant-weights
//   2. the whole --linfuse-optimize pipeline
// and reports throughput (bytes of merged weights per second) and peak RSS.
//
//   linfuse-bench-compile --layers=24 --hidden=1024 --intermediate=2816
//
//===----------------------------------------------------------------------===//

#include "linfuse/Dialect/Linfuse/Transforms/Passes.h"
#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstring>
#include <sys/resource.h>

using namespace mlir;

static llvm::cl::opt<int> clLayers("layers", llvm::cl::init(24));
static llvm::cl::opt<int> clHidden("hidden", llvm::cl::init(1024));
static llvm::cl::opt<int> clIntermediate("intermediate", llvm::cl::init(2816));
static llvm::cl::opt<bool>
    clPipelineOnly("pipeline-only",
                   llvm::cl::desc("Only time --linfuse-optimize"),
                   llvm::cl::init(false));

static double peakRssBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024.0; // Linux reports KiB.
}

namespace {
class ModuleBuilder {
public:
  ModuleBuilder(MLIRContext *ctx) : b(ctx), loc(b.getUnknownLoc()) {}

  /// A constant [rows, cols] f32 weight as a dense_resource blob.
  Value weight(int64_t rows, int64_t cols) {
    auto type = RankedTensorType::get({rows, cols}, b.getF32Type());
    return constant(type);
  }
  Value vector(int64_t n) {
    return constant(RankedTensorType::get({n}, b.getF32Type()));
  }

  Value constant(RankedTensorType type) {
    size_t count = type.getNumElements();
    AsmResourceBlob blob =
        HeapAsmResourceBlob::allocate(count * sizeof(float), alignof(float));
    auto *data = reinterpret_cast<float *>(blob.getMutableData().data());
    for (size_t i = 0; i < count; ++i) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      data[i] = static_cast<float>((seed >> 40) & 0xff) / 256.0f - 0.5f;
    }
    weightBytes += count * sizeof(float);
    // Distinct names: MLIR uniquifies a repeated name by linear probing.
    std::string name = "w" + std::to_string(numConstants++);
    auto attr = DenseResourceElementsAttr::get(type, name, std::move(blob));
    return arith::ConstantOp::create(b, loc, type, attr);
  }

  Value zeros(Value like, int64_t cols) {
    Value m = tensor::DimOp::create(b, loc, like, 0);
    auto type =
        RankedTensorType::get({ShapedType::kDynamic, cols}, b.getF32Type());
    Value empty = tensor::EmptyOp::create(b, loc, type, ValueRange{m});
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    return linalg::FillOp::create(b, loc, zero, empty)->getResult(0);
  }

  /// x [M, K] . w^T with w [N, K] (nn.Linear), plus optional bias.
  Value linear(Value x, Value w, Value bias) {
    int64_t n = cast<ShapedType>(w.getType()).getDimSize(0);
    Value init = zeros(x, n);
    MLIRContext *ctx = b.getContext();
    AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
               d2 = getAffineDimExpr(2, ctx);
    auto op = linalg::MatmulOp::create(b, loc, TypeRange{init.getType()},
                                       ValueRange{x, w}, ValueRange{init});
    op->setAttr("indexing_maps",
                b.getAffineMapArrayAttr({AffineMap::get(3, 0, {d0, d2}, ctx),
                                         AffineMap::get(3, 0, {d1, d2}, ctx),
                                         AffineMap::get(3, 0, {d0, d1}, ctx)}));
    Value y = op->getResult(0);
    if (!bias)
      return y;
    return elementwise({y, bias}, /*broadcastSecond=*/true,
                       [](OpBuilder &nb, Location l, ValueRange a) {
                         return arith::AddFOp::create(nb, l, a[0], a[1]);
                       });
  }

  /// A linalg.generic over [M, N] values (the second one optionally a row
  /// vector broadcast along M).
  Value elementwise(ArrayRef<Value> inputs, bool broadcastSecond,
                    function_ref<Value(OpBuilder &, Location, ValueRange)> f) {
    Value first = inputs.front();
    auto type = cast<RankedTensorType>(first.getType());
    Value m = tensor::DimOp::create(b, loc, first, 0);
    Value empty = tensor::EmptyOp::create(b, loc, type, ValueRange{m});
    MLIRContext *ctx = b.getContext();
    AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
    SmallVector<AffineMap> maps;
    for (size_t i = 0; i < inputs.size(); ++i)
      maps.push_back(i == 1 && broadcastSecond
                         ? AffineMap::get(2, 0, getAffineDimExpr(1, ctx))
                         : id);
    maps.push_back(id);
    SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
    auto op = linalg::GenericOp::create(
        b, loc, TypeRange{type}, inputs, ValueRange{empty}, maps, iters,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          linalg::YieldOp::create(nb, l, f(nb, l, args.drop_back()));
        });
    return op->getResult(0);
  }

  OwningOpRef<ModuleOp> build(int layers, int64_t hidden, int64_t inter) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(b, loc);
    b.setInsertionPointToEnd(module->getBody());
    auto xType =
        RankedTensorType::get({ShapedType::kDynamic, hidden}, b.getF32Type());
    auto fn = func::FuncOp::create(b, loc, "main",
                                   b.getFunctionType({xType}, {xType}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    Value x = entry->getArgument(0);
    for (int l = 0; l < layers; ++l) {
      Value q = linear(x, weight(hidden, hidden), vector(hidden));
      Value k = linear(x, weight(hidden, hidden), vector(hidden));
      Value v = linear(x, weight(hidden, hidden), vector(hidden));
      Value attn = elementwise(
          {q, k, v}, false, [](OpBuilder &nb, Location lc, ValueRange a) {
            Value s = arith::AddFOp::create(nb, lc, a[0], a[1]);
            return arith::AddFOp::create(nb, lc, s, a[2]);
          });
      mergedWeightBytes += 3 * hidden * hidden * 4;
      Value g = linear(attn, weight(inter, hidden), Value());
      Value u = linear(attn, weight(inter, hidden), Value());
      mergedWeightBytes += 2 * inter * hidden * 4;
      Value h = elementwise(
          {g, u}, false, [](OpBuilder &nb, Location lc, ValueRange a) {
            Value s = arith::MulFOp::create(nb, lc, a[0], a[0]);
            return arith::MulFOp::create(nb, lc, s, a[1]);
          });
      x = linear(h, weight(hidden, inter), Value());
    }
    func::ReturnOp::create(b, loc, x);
    return module;
  }

  OpBuilder b;
  Location loc;
  uint64_t seed = 42;
  uint64_t numConstants = 0;
  int64_t weightBytes = 0;
  int64_t mergedWeightBytes = 0;
};
} // namespace

static int countMatmuls(ModuleOp module) {
  int n = 0;
  module.walk([&](linalg::MatmulOp) { ++n; });
  return n;
}

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "linfuse merge compile-time benchmark\n");
  DialectRegistry registry;
  registry.insert<func::FuncDialect, arith::ArithDialect, linalg::LinalgDialect,
                  tensor::TensorDialect, math::MathDialect>();
  linfuse::registerLinfuseDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  ctx.disableMultithreading();

  ModuleBuilder builder(&ctx);
  auto t0 = std::chrono::steady_clock::now();
  OwningOpRef<ModuleOp> module =
      builder.build(clLayers, clHidden, clIntermediate);
  auto t1 = std::chrono::steady_clock::now();
  if (failed(verify(*module))) {
    llvm::errs() << "error: the generated module does not verify\n";
    return 1;
  }
  double rssBuilt = peakRssBytes();
  int before = countMatmuls(*module);

  PassManager pm(&ctx);
  if (clPipelineOnly) {
    linfuse::buildOptimizePipeline(pm, linfuse::OptimizePipelineOptions());
  } else {
    pm.addPass(linfuse::createMergeParallelMatmulsPass());
    pm.addPass(linfuse::createFoldConstantWeightsPass());
  }
  auto t2 = std::chrono::steady_clock::now();
  if (failed(pm.run(*module))) {
    llvm::errs() << "error: the pipeline failed\n";
    return 1;
  }
  auto t3 = std::chrono::steady_clock::now();
  int after = countMatmuls(*module);
  double seconds = std::chrono::duration<double>(t3 - t2).count();
  double rssPeak = peakRssBytes();

  double gb = 1e9;
  llvm::outs() << llvm::format(
      "layers=%d hidden=%lld intermediate=%lld %s\n"
      "  weights in module   %8.3f GB (merged groups: %.3f GB)\n"
      "  build               %8.3f s\n"
      "  passes              %8.3f s  (%.2f ms/layer)\n"
      "  throughput          %8.2f GB/s of merged weights\n"
      "  matmuls             %d -> %d\n"
      "  peak RSS            %8.3f GB (after build %.3f GB) = %.2fx weight "
      "bytes\n",
      (int)clLayers, (long long)clHidden, (long long)clIntermediate,
      clPipelineOnly ? "[--linfuse-optimize]"
                     : "[merge + fold-constant-weights]",
      builder.weightBytes / gb, builder.mergedWeightBytes / gb,
      std::chrono::duration<double>(t1 - t0).count(), seconds,
      1e3 * seconds / clLayers, builder.mergedWeightBytes / gb / seconds,
      before, after, rssPeak / gb, rssBuilt / gb,
      rssPeak / builder.weightBytes);
  return 0;
}
