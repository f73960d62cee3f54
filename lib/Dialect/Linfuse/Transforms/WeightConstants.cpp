//===- WeightConstants.cpp - compile-time weight data movement ------------===//

#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <atomic>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

using namespace mlir;
using namespace mlir::linfuse;

/// Bytes per element, or nullopt for types that are not byte-addressable.
static std::optional<int64_t> elementBytes(Type elementType) {
  if (!elementType.isIntOrFloat())
    return std::nullopt;
  unsigned bits = elementType.getIntOrFloatBitWidth();
  if (bits % 8 != 0)
    return std::nullopt;
  return bits / 8;
}

/// Constants beyond this many elements are never folded: sizes stay far
/// from int64 overflow, and nobody packs a terabyte at compile time.
static constexpr int64_t kMaxElements = int64_t(1) << 40;

int64_t mlir::linfuse::getByteSize(ShapedType type) {
  return type.getNumElements() * static_cast<int64_t>(llvm::divideCeil(
                                     type.getElementTypeBitWidth(), 8));
}

FailureOr<ConstantBytes> mlir::linfuse::getConstantBytes(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxElements)
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

  ConstantBytes bytes;
  if (!splat) {
    if (static_cast<int64_t>(raw.size()) != total)
      return failure();
    bytes.data = raw;
    return bytes;
  }
  if (static_cast<int64_t>(raw.size()) < *eltBytes)
    return failure();
  bytes.storage.resize(total);
  for (int64_t offset = 0; offset < total; offset += *eltBytes)
    std::memcpy(bytes.storage.data() + offset, raw.data(), *eltBytes);
  bytes.data = bytes.storage;
  return bytes;
}

LogicalResult mlir::linfuse::concatConstantBytes(ArrayRef<ElementsAttr> parts,
                                                 int64_t dim,
                                                 RankedTensorType resultType,
                                                 MutableArrayRef<char> out) {
  std::optional<int64_t> eltBytes = elementBytes(resultType.getElementType());
  if (!eltBytes || !resultType.hasStaticShape() || parts.empty() ||
      resultType.getNumElements() > kMaxElements ||
      static_cast<int64_t>(out.size()) != getByteSize(resultType))
    return failure();
  ArrayRef<int64_t> shape = resultType.getShape();
  // Rows before `dim` are interleaved; each part contributes one contiguous
  // run of (its size along dim) * (product of later dims) elements per row.
  int64_t outer = 1, inner = *eltBytes;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (int64_t i = dim + 1, e = shape.size(); i < e; ++i)
    inner *= shape[i];

  SmallVector<ConstantBytes> datas;
  SmallVector<int64_t> runs;
  int64_t rowBytes = 0;
  for (ElementsAttr part : parts) {
    auto partType = cast<ShapedType>(part.getType());
    if (partType.getElementType() != resultType.getElementType() ||
        partType.getRank() != resultType.getRank())
      return failure();
    FailureOr<ConstantBytes> data = getConstantBytes(part);
    if (failed(data))
      return failure();
    datas.push_back(std::move(*data));
    runs.push_back(partType.getDimSize(dim) * inner);
    rowBytes += runs.back();
  }
  if (rowBytes * outer != static_cast<int64_t>(out.size()))
    return failure();

  char *dst = out.data();
  for (int64_t row = 0; row < outer; ++row)
    for (auto [data, run] : llvm::zip_equal(datas, runs)) {
      std::memcpy(dst, data.data.data() + row * run, run);
      dst += run;
    }
  return success();
}

LogicalResult
mlir::linfuse::transposeConstantBytes(ElementsAttr input,
                                      ArrayRef<int64_t> permutation,
                                      MutableArrayRef<char> out) {
  auto type = cast<ShapedType>(input.getType());
  std::optional<int64_t> eltBytesOpt = elementBytes(type.getElementType());
  if (!eltBytesOpt || !isPermutationVector(permutation) ||
      static_cast<int64_t>(permutation.size()) != type.getRank())
    return failure();
  int64_t eltBytes = *eltBytesOpt;
  FailureOr<ConstantBytes> data = getConstantBytes(input);
  if (failed(data) || data->data.size() != out.size())
    return failure();

  int64_t rank = type.getRank();
  if (rank == 0 || type.getNumElements() == 0) {
    llvm::copy(data->data, out.begin());
    return success();
  }
  SmallVector<int64_t> inStrides = computeStrides(type.getShape());
  SmallVector<int64_t> outShape =
      applyPermutation(type.getShape(), permutation);
  // Walk the output in order; its innermost dim is a strided read of input
  // dim permutation[rank - 1].
  int64_t innerSize = outShape[rank - 1];
  int64_t innerStride = inStrides[permutation[rank - 1]] * eltBytes;
  SmallVector<int64_t> index(rank - 1, 0);
  char *dst = out.data();
  int64_t outerCount = type.getNumElements() / innerSize;
  for (int64_t o = 0; o < outerCount; ++o) {
    int64_t src = 0;
    for (int64_t j = 0; j < rank - 1; ++j)
      src += index[j] * inStrides[permutation[j]];
    const char *s = data->data.data() + src * eltBytes;
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
  return success();
}

/// Storage for a folded weight. Large blobs are mapped with transparent huge
/// pages where the kernel offers them: first-touch page faults, not the
/// copy, dominate the cost of producing hundreds of megabytes of weights.
static AsmResourceBlob allocateBlob(int64_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr int64_t kHugeThreshold = 4 << 20;
  if (size >= kHugeThreshold) {
    void *ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr != MAP_FAILED) {
      (void)madvise(ptr, size, MADV_HUGEPAGE);
      return AsmResourceBlob(
          ArrayRef<char>(static_cast<char *>(ptr), size), alignof(double),
          [](void *data, size_t bytes, size_t) { munmap(data, bytes); },
          /*dataIsMutable=*/true);
    }
  }
#endif
  return HeapAsmResourceBlob::allocate(size, alignof(double),
                                       /*dataIsMutable=*/true);
}

ElementsAttr mlir::linfuse::makeConstant(
    RankedTensorType type, int64_t resourceThreshold,
    function_ref<LogicalResult(MutableArrayRef<char>)> fill,
    StringRef resourceName) {
  if (!elementBytes(type.getElementType()) || !type.hasStaticShape() ||
      type.getNumElements() > kMaxElements)
    return {};
  int64_t size = getByteSize(type);
  if (size >= resourceThreshold) {
    // The blob is written in place: no intermediate buffer.
    AsmResourceBlob blob = allocateBlob(size);
    if (failed(fill(blob.getMutableData())))
      return {};
    // MLIR makes a taken resource name unique by probing name_1, name_2, ...
    // from 1 on every insert, which is quadratic in the number of blobs;
    // numbering them here keeps each insert O(1).
    static std::atomic<uint64_t> counter{0};
    std::string name = (resourceName + "_" + Twine(counter++)).str();
    return DenseResourceElementsAttr::get(type, name, std::move(blob));
  }
  std::vector<char> bytes(size);
  if (failed(fill(bytes)))
    return {};
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}
