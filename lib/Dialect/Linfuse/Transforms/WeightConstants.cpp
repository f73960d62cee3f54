//===- WeightConstants.cpp - compile-time weight data movement ------------===//

#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"

#include <cstring>

using namespace mlir;

/// Bytes per element, or nullopt for types that are not byte-addressable.
static std::optional<int64_t> elementBytes(Type elementType) {
  if (!elementType.isIntOrFloat())
    return std::nullopt;
  unsigned bits = elementType.getIntOrFloatBitWidth();
  if (bits % 8 != 0)
    return std::nullopt;
  return bits / 8;
}

FailureOr<std::vector<char>>
mlir::linfuse::getConstantBytes(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape())
    return failure();
  std::optional<int64_t> eltBytes = elementBytes(type.getElementType());
  if (!eltBytes)
    return failure();
  int64_t total = type.getNumElements() * *eltBytes;

  ArrayRef<char> raw;
  bool splat = false;
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr)) {
    raw = dense.getRawData();
    splat = dense.isSplat();
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    raw = blob->getData();
  } else {
    return failure();
  }

  std::vector<char> bytes(total);
  if (splat) {
    if (static_cast<int64_t>(raw.size()) < *eltBytes)
      return failure();
    for (int64_t offset = 0; offset < total; offset += *eltBytes)
      std::memcpy(bytes.data() + offset, raw.data(), *eltBytes);
    return bytes;
  }
  if (static_cast<int64_t>(raw.size()) != total)
    return failure();
  std::memcpy(bytes.data(), raw.data(), total);
  return bytes;
}

FailureOr<std::vector<char>>
mlir::linfuse::concatConstantBytes(ArrayRef<ElementsAttr> parts, int64_t dim,
                                   RankedTensorType resultType) {
  std::optional<int64_t> eltBytes = elementBytes(resultType.getElementType());
  if (!eltBytes || !resultType.hasStaticShape() || parts.empty())
    return failure();
  ArrayRef<int64_t> shape = resultType.getShape();
  // Rows before `dim` are interleaved; each part contributes one contiguous
  // run of (its size along dim) * (product of later dims) elements per row.
  int64_t outer = 1, inner = *eltBytes;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (int64_t i = dim + 1, e = shape.size(); i < e; ++i)
    inner *= shape[i];

  SmallVector<std::vector<char>> datas;
  SmallVector<int64_t> runs;
  for (ElementsAttr part : parts) {
    auto partType = cast<ShapedType>(part.getType());
    if (partType.getElementType() != resultType.getElementType())
      return failure();
    FailureOr<std::vector<char>> data = getConstantBytes(part);
    if (failed(data))
      return failure();
    datas.push_back(std::move(*data));
    runs.push_back(partType.getDimSize(dim) * inner);
  }

  std::vector<char> out(resultType.getNumElements() * *eltBytes);
  char *dst = out.data();
  for (int64_t row = 0; row < outer; ++row)
    for (auto [data, run] : llvm::zip_equal(datas, runs)) {
      std::memcpy(dst, data.data() + row * run, run);
      dst += run;
    }
  return out;
}

FailureOr<std::vector<char>>
mlir::linfuse::transposeConstantBytes(ElementsAttr input,
                                      ArrayRef<int64_t> permutation) {
  auto type = cast<ShapedType>(input.getType());
  std::optional<int64_t> eltBytesOpt = elementBytes(type.getElementType());
  if (!eltBytesOpt || !isPermutationVector(permutation) ||
      static_cast<int64_t>(permutation.size()) != type.getRank())
    return failure();
  int64_t eltBytes = *eltBytesOpt;
  FailureOr<std::vector<char>> data = getConstantBytes(input);
  if (failed(data))
    return failure();

  int64_t rank = type.getRank();
  SmallVector<int64_t> inStrides = computeStrides(type.getShape());
  SmallVector<int64_t> outShape = applyPermutation(type.getShape(), permutation);
  std::vector<char> out(data->size());
  if (rank == 0 || type.getNumElements() == 0) {
    out = *data;
    return out;
  }
  // Walk the output in order; the innermost output dim is a strided read of
  // the input (stride of input dim permutation[rank - 1]).
  int64_t innerSize = outShape[rank - 1];
  int64_t innerStride = inStrides[permutation[rank - 1]] * eltBytes;
  SmallVector<int64_t> index(rank - 1, 0);
  char *dst = out.data();
  int64_t outerCount = type.getNumElements() / innerSize;
  for (int64_t o = 0; o < outerCount; ++o) {
    int64_t src = 0;
    for (int64_t j = 0; j < rank - 1; ++j)
      src += index[j] * inStrides[permutation[j]];
    const char *s = data->data() + src * eltBytes;
    if (innerStride == eltBytes) {
      std::memcpy(dst, s, innerSize * eltBytes);
      dst += innerSize * eltBytes;
    } else {
      for (int64_t i = 0; i < innerSize; ++i, dst += eltBytes)
        std::memcpy(dst, s + i * innerStride, eltBytes);
    }
    // Advance the odometer over the leading output dims.
    for (int64_t j = rank - 2; j >= 0; --j) {
      if (++index[j] < outShape[j])
        break;
      index[j] = 0;
    }
  }
  return out;
}

ElementsAttr mlir::linfuse::makeConstant(RankedTensorType type,
                                         ArrayRef<char> bytes,
                                         int64_t resourceThreshold,
                                         StringRef resourceName) {
  if (static_cast<int64_t>(bytes.size()) >= resourceThreshold) {
    // Blobs are aligned to the element size at least (f32 / f16 / bf16).
    AsmResourceBlob blob =
        HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignof(double));
    return DenseResourceElementsAttr::get(type, resourceName, std::move(blob));
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}
