//===- Arrays.h - numpy arrays and DLPack tensors in and out ------*- C++
//-*-===//
//
// How the bindings hand Python arrays to compiled code and back, without
// copies where the memory allows:
//  - in: numpy arrays (C-contiguous ones are read in place; others are
//    copied once into C order), objects with `__dlpack__` on the CPU (torch
//    tensors; read in place, must be contiguous), CUDA DLPack tensors for
//    functions compiled for CUDA (read in place on the device), or
//    anything `numpy.asarray` takes;
//  - out: numpy arrays over the buffers the compiled code allocated for its
//    results (freed when the last array over one is gone), or DLPack
//    capsules over device results.
// bf16 has no numpy dtype: numpy uint16 arrays carry bf16 bits, both ways
// (DLPack bf16 tensors are read as bf16 directly).
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_PYTHON_ARRAYS_H
#define LINFUSE_PYTHON_ARRAYS_H

#include "linfuse/Execution/Executable.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace linfuse_python {

namespace dlpack {
struct ManagedTensor;
} // namespace dlpack

/// The inputs of one call, read as views; keeps the Python objects (and
/// DLPack tensors) they point into alive until it is destroyed.
class CallInputs {
public:
  /// Inputs of a function compiled for `target` (CUDA takes device
  /// tensors).
  explicit CallInputs(mlir::linfuse::Target target) : target(target) {}
  CallInputs(const CallInputs &) = delete;
  CallInputs &operator=(const CallInputs &) = delete;
  ~CallInputs();

  /// Reads `object` as input `index` (for messages); throws linfuse.Error
  /// for what cannot be read.
  void add(pybind11::handle object, size_t index);

  const std::vector<mlir::linfuse::ArrayView> &views() const { return arrays; }

private:
  void addNumpy(pybind11::handle object, size_t index);
  void addDLPack(pybind11::handle object, size_t index);

  mlir::linfuse::Target target;
  std::vector<mlir::linfuse::ArrayView> arrays;
  std::vector<pybind11::object> keepAlive;
  std::vector<dlpack::ManagedTensor *> managed;
};

/// A numpy array over `result`'s memory (no copy).
pybind11::array toNumpy(mlir::linfuse::ResultArray result);

/// A DLPack capsule ("dltensor") over `result`'s memory, host or device (no
/// copy), for `torch.from_dlpack`.
pybind11::capsule toDLPack(mlir::linfuse::ResultArray result);

/// The exception type `linfuse.Error`; set by the module at import.
extern pybind11::handle errorType;

/// Throws linfuse.Error with `message`.
[[noreturn]] void raise(const std::string &message);

} // namespace linfuse_python

#endif // LINFUSE_PYTHON_ARRAYS_H
