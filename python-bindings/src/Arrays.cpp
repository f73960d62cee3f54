//===- Arrays.cpp - numpy arrays and DLPack tensors in and out ------------===//

#include "Arrays.h"
#include "DLPack.h"

#include <optional>

namespace py = pybind11;
using namespace linfuse_python;
using mlir::linfuse::ArrayView;
using mlir::linfuse::ElementType;
using mlir::linfuse::ResultArray;

py::handle linfuse_python::errorType;

void linfuse_python::raise(const std::string &message) {
  PyErr_SetString(errorType.ptr(), message.c_str());
  throw py::error_already_set();
}

static const char *kSupported =
    "float32, float64, float16, bfloat16 (uint16 bits in numpy), int64, "
    "int32, int8 or bool";

static std::optional<ElementType> fromNumpy(const py::dtype &descr) {
  // Through Python attributes: pybind11 2.10 reads the descriptor struct
  // with numpy 1's layout, and numpy 2 moved `elsize`.
  struct {
    char kind;
    py::ssize_t size;
    py::ssize_t itemsize() const { return size; }
  } dtype{descr.attr("kind").cast<std::string>()[0],
          descr.attr("itemsize").cast<py::ssize_t>()};
  switch (dtype.kind) {
  case 'f':
    if (dtype.itemsize() == 4)
      return ElementType::F32;
    if (dtype.itemsize() == 8)
      return ElementType::F64;
    if (dtype.itemsize() == 2)
      return ElementType::F16;
    break;
  case 'i':
    if (dtype.itemsize() == 8)
      return ElementType::I64;
    if (dtype.itemsize() == 4)
      return ElementType::I32;
    if (dtype.itemsize() == 1)
      return ElementType::I8;
    break;
  case 'u':
    if (dtype.itemsize() == 2)
      return ElementType::BF16;
    break;
  case 'b':
    return ElementType::I1;
  }
  return std::nullopt;
}

static py::dtype numpyDType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return py::dtype("float32");
  case ElementType::F64:
    return py::dtype("float64");
  case ElementType::F16:
    return py::dtype("float16");
  case ElementType::BF16:
    return py::dtype("uint16");
  case ElementType::I32:
    return py::dtype("int32");
  case ElementType::I64:
    return py::dtype("int64");
  case ElementType::I8:
    return py::dtype("int8");
  case ElementType::I1:
    return py::dtype("bool");
  }
  return py::dtype("float32");
}

static std::optional<ElementType> fromDLPack(dlpack::DataType t) {
  if (t.lanes != 1)
    return std::nullopt;
  switch (t.code) {
  case dlpack::kDLFloat:
    if (t.bits == 32)
      return ElementType::F32;
    if (t.bits == 64)
      return ElementType::F64;
    if (t.bits == 16)
      return ElementType::F16;
    break;
  case dlpack::kDLBfloat:
    if (t.bits == 16)
      return ElementType::BF16;
    break;
  case dlpack::kDLInt:
    if (t.bits == 64)
      return ElementType::I64;
    if (t.bits == 32)
      return ElementType::I32;
    if (t.bits == 8)
      return ElementType::I8;
    break;
  case dlpack::kDLBool:
    if (t.bits == 8)
      return ElementType::I1;
    break;
  }
  return std::nullopt;
}

CallInputs::~CallInputs() {
  for (dlpack::ManagedTensor *t : managed)
    if (t->deleter)
      t->deleter(t);
}

void CallInputs::add(py::handle object, size_t index) {
  if (py::isinstance<py::array>(object) || !py::hasattr(object, "__dlpack__"))
    return addNumpy(object, index);
  return addDLPack(object, index);
}

void CallInputs::addNumpy(py::handle object, size_t index) {
  // The same object when it is already a C-contiguous array.
  py::array array = py::array::ensure(object, py::array::c_style);
  if (!array)
    raise("input " + std::to_string(index) + ": cannot be read as an array");
  std::optional<ElementType> type = fromNumpy(array.dtype());
  if (!type)
    raise("input " + std::to_string(index) + ": numpy dtype " +
          py::str(array.dtype()).cast<std::string>() + " is not supported (" +
          kSupported + ")");
  if (array.dtype().attr("byteorder").cast<std::string>() == ">")
    raise("input " + std::to_string(index) +
          ": big-endian arrays are not supported");
  ArrayView view;
  view.type = *type;
  view.shape.assign(array.shape(), array.shape() + array.ndim());
  view.data = array.data();
  arrays.push_back(std::move(view));
  keepAlive.push_back(std::move(array));
}

void CallInputs::addDLPack(py::handle object, size_t index) {
  std::string where = "input " + std::to_string(index);
  // torch refuses to export a tensor that requires grad; say what to do.
  if (py::hasattr(object, "requires_grad") &&
      py::bool_(object.attr("requires_grad")))
    raise(where + ": the tensor requires grad; pass tensor.detach()");
  py::object capsule = object.attr("__dlpack__")();
  auto *tensor = static_cast<dlpack::ManagedTensor *>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!tensor)
    throw py::error_already_set();
  // Ours now: the capsule must not delete it, we do after the call.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  managed.push_back(tensor);
  const dlpack::Tensor &t = tensor->tensor;
  if (t.device.deviceType != dlpack::kDLCPU &&
      t.device.deviceType != dlpack::kDLCUDAHost)
    raise(where + ": the tensor is not in host memory (DLPack device type " +
          std::to_string(t.device.deviceType) +
          "); linfuse takes host tensors: call .cpu() first");
  std::optional<ElementType> type = fromDLPack(t.dtype);
  if (!type)
    raise(where + ": DLPack dtype (code " + std::to_string(t.dtype.code) +
          ", " + std::to_string(t.dtype.bits) + " bits) is not supported (" +
          kSupported + ")");
  ArrayView view;
  view.type = *type;
  view.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) {
    int64_t expected = 1;
    for (int32_t d = t.ndim; d-- > 0;) {
      if (t.shape[d] != 1 && t.strides[d] != expected)
        raise(where + ": the tensor is not contiguous; call .contiguous() "
                      "first");
      expected *= t.shape[d];
    }
  }
  view.data = static_cast<char *>(t.data) + t.byteOffset;
  arrays.push_back(std::move(view));
  keepAlive.push_back(py::reinterpret_borrow<py::object>(object));
}

py::array linfuse_python::toNumpy(ResultArray result) {
  py::dtype dtype = numpyDType(result.type);
  std::vector<py::ssize_t> shape(result.shape.begin(), result.shape.end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : result.strides)
    strides.push_back(s * mlir::linfuse::byteSize(result.type));
  void *data = result.data;
  // The array's base holds a reference to the buffer's owner.
  auto *owner = new std::shared_ptr<void>(std::move(result.owner));
  py::capsule base(
      owner, [](void *p) { delete static_cast<std::shared_ptr<void> *>(p); });
  return py::array(dtype, shape, strides, data, base);
}
