//===- DLPack.h - the DLPack ABI (v0.8 and later, unversioned) ----*- C++
//-*-===//
//
// The structs `__dlpack__()` capsules carry, as the DLPack standard fixes
// them (https://dmlc.github.io/dlpack/latest/c_api.html). Only what the
// bindings read is declared; the layout must not change.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_PYTHON_DLPACK_H
#define LINFUSE_PYTHON_DLPACK_H

#include <cstdint>

namespace linfuse_python::dlpack {

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum TypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6
};

struct Device {
  int32_t deviceType;
  int32_t deviceId;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void *data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t *shape;
  /// In elements; null means compact row-major.
  int64_t *strides;
  uint64_t byteOffset;
};

struct ManagedTensor {
  Tensor tensor;
  void *managerContext;
  void (*deleter)(ManagedTensor *self);
};

} // namespace linfuse_python::dlpack

#endif // LINFUSE_PYTHON_DLPACK_H
