//===- Arrays.cpp - numpy arrays and DLPack tensors in and out ------------===//

#include "Arrays.h"
#include "DLPack.h"

#include "linfuse/Runtime/Runtime.h"

#include <optional>

namespace py = pybind11;
using namespace linfuse_python;
using mlir::linfuse::ArrayView;
using mlir::linfuse::ElementType;
using mlir::linfuse::ResultArray;
using mlir::linfuse::Target;

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

/// Where `object` says it lives (DLPack's `__dlpack_device__`), asked
/// before exporting it; nullopt for an object that does not say.
static std::optional<dlpack::Device> announcedDevice(py::handle object) {
  if (!py::hasattr(object, "__dlpack_device__"))
    return std::nullopt;
  py::tuple device = object.attr("__dlpack_device__")();
  return dlpack::Device{device[0].cast<int32_t>(), device[1].cast<int32_t>()};
}

/// The ordinal of the runtime's CUDA device; raises linfuse.Error saying
/// why there is none (`where` starts the message).
static int32_t runtimeDevice(const std::string &where) {
#ifdef LINFUSE_ENABLE_CUDA
  int32_t ordinal = linfuse_cuda_device();
  if (ordinal >= 0)
    return ordinal;
  std::string reason = linfuse_last_error_message();
  linfuse_clear_error();
  raise(where + ": a CUDA tensor, but the CUDA backend cannot run here (" +
        reason + ")");
#else
  raise(where + ": a CUDA tensor, but this linfuse was built without CUDA");
#endif
}

/// Raises linfuse.Error unless a function compiled for `target` can read a
/// tensor on `device` in place; returns whether it is device memory.
static bool checkDevice(const std::string &where, dlpack::Device device,
                        Target target) {
  if (device.deviceType == dlpack::kDLCPU ||
      device.deviceType == dlpack::kDLCUDAHost)
    return false;
  if (device.deviceType != dlpack::kDLCUDA)
    raise(where +
          ": the tensor is neither in host memory nor on a CUDA device "
          "(DLPack device type " +
          std::to_string(device.deviceType) + "); call .cpu() first");
  if (target != Target::CUDA)
    raise(where + ": a CUDA tensor, but the function was compiled for the "
                  "CPU; pass a CPU tensor or compile with target='cuda'");
  int32_t ordinal = runtimeDevice(where);
  if (device.deviceId != ordinal)
    raise(where + ": a tensor on CUDA device " +
          std::to_string(device.deviceId) + ", but linfuse runs on device " +
          std::to_string(ordinal));
  return true;
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
  // Refused before it is exported where the object says where it lives.
  std::optional<dlpack::Device> announced = announcedDevice(object);
  if (announced)
    checkDevice(where, *announced, target);
  // A CUDA tensor is read on the runtime's stream after the work on the
  // caller's (InvokeOptions::stream): export it without a stream hand-off.
  py::object capsule = object.attr("__dlpack__")();
  auto *tensor = static_cast<dlpack::ManagedTensor *>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!tensor)
    throw py::error_already_set();
  // Ours now: the capsule must not delete it, we do after the call.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  managed.push_back(tensor);
  const dlpack::Tensor &t = tensor->tensor;
  bool onDevice = checkDevice(where, t.device, target);
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
  view.device = onDevice;
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

static dlpack::DataType toDLPackType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return {dlpack::kDLFloat, 32, 1};
  case ElementType::F64:
    return {dlpack::kDLFloat, 64, 1};
  case ElementType::F16:
    return {dlpack::kDLFloat, 16, 1};
  case ElementType::BF16:
    return {dlpack::kDLBfloat, 16, 1};
  case ElementType::I64:
    return {dlpack::kDLInt, 64, 1};
  case ElementType::I32:
    return {dlpack::kDLInt, 32, 1};
  case ElementType::I8:
    return {dlpack::kDLInt, 8, 1};
  case ElementType::I1:
    return {dlpack::kDLBool, 8, 1};
  }
  return {dlpack::kDLFloat, 32, 1};
}

namespace {
/// A DLPack tensor and what it points into, freed by its deleter.
struct ExportedResult {
  dlpack::ManagedTensor managed;
  std::vector<int64_t> shape, strides;
  std::shared_ptr<void> owner;
};
} // namespace

py::capsule linfuse_python::toDLPack(ResultArray result) {
  auto *out = new ExportedResult();
  out->shape.assign(result.shape.begin(), result.shape.end());
  out->strides.assign(result.strides.begin(), result.strides.end());
  out->owner = std::move(result.owner);
  dlpack::Tensor &t = out->managed.tensor;
  t.data = result.data;
  t.device = {result.device ? int32_t(dlpack::kDLCUDA)
                            : int32_t(dlpack::kDLCPU),
              result.device ? runtimeDevice("a result") : 0};
  t.ndim = static_cast<int32_t>(out->shape.size());
  t.dtype = toDLPackType(result.type);
  t.shape = out->shape.data();
  t.strides = out->strides.data();
  t.byteOffset = 0;
  out->managed.managerContext = out;
  out->managed.deleter = [](dlpack::ManagedTensor *self) {
    delete static_cast<ExportedResult *>(self->managerContext);
  };
  // A capsule nobody consumed (still named "dltensor") frees the tensor.
  return py::capsule(&out->managed, "dltensor", [](PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, "dltensor"))
      return;
    auto *managed = static_cast<dlpack::ManagedTensor *>(
        PyCapsule_GetPointer(capsule, "dltensor"));
    managed->deleter(managed);
  });
}
