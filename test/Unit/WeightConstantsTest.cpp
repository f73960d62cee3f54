//===- WeightConstantsTest.cpp - raw-buffer concat/transpose --------------===//
//
// Every element of a folded constant must land where the naive
// element-by-element definition puts it.

#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <numeric>

using namespace mlir;
using namespace mlir::linfuse;

namespace {
class WeightConstantsTest : public ::testing::Test {
protected:
  /// A dense f32 constant whose element i holds `base + i`.
  DenseElementsAttr iota(ArrayRef<int64_t> shape, float base) {
    auto type = RankedTensorType::get(shape, Float32Type::get(&ctx));
    std::vector<float> values(type.getNumElements());
    std::iota(values.begin(), values.end(), base);
    return DenseElementsAttr::get(type, ArrayRef<float>(values));
  }

  static std::vector<float> floats(ArrayRef<char> bytes) {
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  static float at(DenseElementsAttr attr, ArrayRef<int64_t> index) {
    auto shape = cast<ShapedType>(attr.getType()).getShape();
    int64_t flat = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      flat = flat * shape[i] + index[i];
    return attr.getValues<float>()[flat];
  }

  MLIRContext ctx;
};
} // namespace

TEST_F(WeightConstantsTest, ConcatKeepsEveryElementInPlace) {
  // Rank 3, concat along the middle dim, three parts of different widths.
  DenseElementsAttr a = iota({3, 2, 5}, 0), b = iota({3, 1, 5}, 1000),
                    c = iota({3, 4, 5}, 2000);
  auto type = RankedTensorType::get({3, 7, 5}, Float32Type::get(&ctx));
  std::vector<char> out(3 * 7 * 5 * sizeof(float));
  ASSERT_TRUE(succeeded(concatConstantBytes({a, b, c}, 1, type, out)));
  std::vector<float> got = floats(out);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 5; ++k) {
        float expected = j < 2   ? at(a, {i, j, k})
                         : j < 3 ? at(b, {i, j - 2, k})
                                 : at(c, {i, j - 3, k});
        EXPECT_EQ(got[(i * 7 + j) * 5 + k], expected)
            << "at [" << i << ", " << j << ", " << k << "]";
      }
}

TEST_F(WeightConstantsTest, ConcatExpandsSplatsAndReadsResources) {
  auto partType = RankedTensorType::get({2, 2}, Float32Type::get(&ctx));
  auto splat = DenseElementsAttr::get(partType, 3.5f);
  std::vector<float> blobValues = {1, 2, 3, 4};
  auto resource = DenseResourceElementsAttr::get(
      partType, "w",
      HeapAsmResourceBlob::allocateAndCopyInferAlign(
          ArrayRef<float>(blobValues)));
  auto type = RankedTensorType::get({4, 2}, Float32Type::get(&ctx));
  std::vector<char> out(8 * sizeof(float));
  ASSERT_TRUE(succeeded(concatConstantBytes({splat, resource}, 0, type, out)));
  EXPECT_EQ(floats(out), (std::vector<float>{3.5, 3.5, 3.5, 3.5, 1, 2, 3, 4}));
}

TEST_F(WeightConstantsTest, TransposeMatchesDefinition) {
  DenseElementsAttr input = iota({2, 3, 4}, 0);
  SmallVector<int64_t> perm = {2, 0, 1}; // result dim j = input dim perm[j]
  std::vector<char> out(24 * sizeof(float));
  ASSERT_TRUE(succeeded(transposeConstantBytes(input, perm, out)));
  std::vector<float> got = floats(out);
  // Result shape [4, 2, 3]: result[i, j, k] = input[j, k, i].
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_EQ(got[(i * 2 + j) * 3 + k], at(input, {j, k, i}));
}

TEST_F(WeightConstantsTest, RejectsMismatchedInputs) {
  DenseElementsAttr a = iota({2, 2}, 0);
  auto wrongType = RankedTensorType::get({2, 5}, Float32Type::get(&ctx));
  std::vector<char> out(10 * sizeof(float));
  EXPECT_TRUE(failed(concatConstantBytes({a, a}, 1, wrongType, out)));
  auto i1Type = RankedTensorType::get({2}, IntegerType::get(&ctx, 1));
  auto bits = DenseElementsAttr::get(i1Type, ArrayRef<bool>{true, false});
  EXPECT_TRUE(failed(getConstantBytes(bits)));
}

TEST_F(WeightConstantsTest, LargeResultsBecomeResources) {
  auto type = RankedTensorType::get({4}, Float32Type::get(&ctx));
  auto fill = [](MutableArrayRef<char> out) {
    float values[4] = {1, 2, 3, 4};
    std::memcpy(out.data(), values, sizeof(values));
    return success();
  };
  ElementsAttr small = makeConstant(type, /*resourceThreshold=*/17, fill);
  ElementsAttr large = makeConstant(type, /*resourceThreshold=*/16, fill);
  EXPECT_TRUE(isa<DenseElementsAttr>(small));
  ASSERT_TRUE(isa<DenseResourceElementsAttr>(large));
  FailureOr<ConstantBytes> bytes = getConstantBytes(large);
  ASSERT_TRUE(succeeded(bytes));
  EXPECT_EQ(floats(bytes->data), (std::vector<float>{1, 2, 3, 4}));
}
