//===- Weights.cpp - weights from safetensors files -----------------------===//
//
// AOT libraries keep weights out of the code (issue 19): the model's
// tensors are written once as a safetensors file and bound to the library's
// weight arguments at load time. The file is mapped read-only and tensors
// are used where they lie; only the JSON header is parsed, with nlohmann's
// JSON library (header-only, so the runtime gains no dependency), in its
// non-throwing mode, and every number in it is checked against the file
// before anything is addressed.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

using namespace linfuse::runtime;

namespace {

/// Bytes per element of a safetensors dtype, 0 for one linfuse does not
/// bind (the tensor may still be in the file).
size_t elementBytes(const std::string &dtype) {
  static const std::unordered_map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

struct Tensor {
  std::string dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0; // Byte range in the data section.
};

/// The header's tensors, or a message saying what is wrong with it.
bool parseHeader(const char *text, size_t length, size_t dataBytes,
                 std::vector<std::string> &names,
                 std::unordered_map<std::string, Tensor> &tensors,
                 std::string &error) {
  nlohmann::json header = nlohmann::json::parse(text, text + length, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    error = "the header is not a JSON object";
    return false;
  }
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    auto fail = [&](const char *what) {
      error = "tensor '" + name + "': " + what;
      return false;
    };
    if (!entry.is_object())
      return fail("not an object");
    auto dtype = entry.find("dtype");
    auto shape = entry.find("shape");
    auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string() || shape == entry.end() ||
        !shape->is_array() || offsets == entry.end() || !offsets->is_array() ||
        offsets->size() != 2)
      return fail("needs dtype, shape and data_offsets [begin, end]");
    Tensor t;
    t.dtype = dtype->get<std::string>();
    uint64_t elements = 1;
    for (const nlohmann::json &d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
        return fail("a size is not a non-negative integer below 2^40");
      t.shape.push_back(int64_t(d.get<uint64_t>()));
      elements *= d.get<uint64_t>();
      if (elements > (uint64_t(1) << 40))
        return fail("more than 2^40 elements");
    }
    const nlohmann::json &b = (*offsets)[0], &e = (*offsets)[1];
    if (!b.is_number_unsigned() || !e.is_number_unsigned() ||
        b.get<uint64_t>() > e.get<uint64_t>() || e.get<uint64_t>() > dataBytes)
      return fail("data_offsets outside the file");
    t.begin = b.get<uint64_t>();
    t.end = e.get<uint64_t>();
    size_t bytes = elementBytes(t.dtype);
    if (bytes && t.end - t.begin != elements * bytes)
      return fail("data_offsets do not match the dtype and shape");
    names.push_back(name);
    tensors.emplace(name, std::move(t));
  }
  return true;
}

/// The open weights files' mappings (start, bytes), for releaseMappedPages.
std::mutex mappingsMutex;
std::vector<std::pair<const char *, size_t>> openMappings;

void registerMapping(void *mapping, size_t bytes) {
  std::lock_guard<std::mutex> lock(mappingsMutex);
  openMappings.push_back({static_cast<const char *>(mapping), bytes});
}

void unregisterMapping(void *mapping) {
  std::lock_guard<std::mutex> lock(mappingsMutex);
  openMappings.erase(
      std::remove_if(openMappings.begin(), openMappings.end(),
                     [&](const auto &m) { return m.first == mapping; }),
      openMappings.end());
}
} // namespace

void linfuse::runtime::releaseMappedPages(const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  std::lock_guard<std::mutex> lock(mappingsMutex);
  for (auto [base, size] : openMappings) {
    if (p < base || p >= base + size || bytes > size_t(base + size - p))
      continue;
    // Whole pages only: the ones at either end may hold other tensors.
    uintptr_t start = (uintptr_t(p) + page - 1) / page * page;
    uintptr_t end = (uintptr_t(p) + bytes) / page * page;
    if (end > start)
      madvise(reinterpret_cast<void *>(start), end - start, MADV_DONTNEED);
    return;
  }
}

struct linfuse_weights {
  std::string path;
  void *mapping = nullptr;
  size_t mappedBytes = 0;
  const char *data = nullptr; // The data section, after the header.
  std::vector<std::string> names;
  std::unordered_map<std::string, Tensor> tensors;
  std::mutex copiesMutex;
  /// Aligned copies of tensors the file leaves misaligned, by name.
  std::unordered_map<std::string, std::unique_ptr<void, decltype(&std::free)>>
      copies;

  ~linfuse_weights() {
    if (mapping) {
      unregisterMapping(mapping);
      munmap(mapping, mappedBytes);
    }
  }
};

linfuse_weights *linfuse_weights_open(const char *path) {
  if (!path) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT, "linfuse_weights_open: no path");
    return nullptr;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: %s", path, std::strerror(errno));
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 8) {
    close(fd);
    fail(LINFUSE_ERROR_INVALID_ARGUMENT,
         "%s: not a safetensors file (shorter than its 8-byte header "
         "length, or not a regular file)",
         path);
    return nullptr;
  }
  size_t size = size_t(st.st_size);
  void *mapping = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: cannot map it: %s", path,
         std::strerror(errno));
    return nullptr;
  }
  auto w = std::make_unique<linfuse_weights>();
  w->path = path;
  w->mapping = mapping;
  w->mappedBytes = size;
  registerMapping(mapping, size);
  const auto *bytes = static_cast<const unsigned char *>(mapping);
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | bytes[i];
  if (headerBytes > size - 8 || headerBytes > (uint64_t(100) << 20)) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT,
         "%s: not a safetensors file (header length %llu, file %zu bytes)",
         path, static_cast<unsigned long long>(headerBytes), size);
    return nullptr;
  }
  w->data = static_cast<const char *>(mapping) + 8 + headerBytes;
  std::string error;
  if (!parseHeader(static_cast<const char *>(mapping) + 8, headerBytes,
                   size - 8 - headerBytes, w->names, w->tensors, error)) {
    fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: not a safetensors file: %s", path,
         error.c_str());
    return nullptr;
  }
  return w.release();
}

int32_t linfuse_weights_bind(linfuse_weights *w, const char *name,
                             const char *dtype, int64_t rank,
                             const int64_t *expected, void *descriptor) {
  if (!w || !name || !dtype || !descriptor || rank < 0 || rank > 16 ||
      (rank > 0 && !expected))
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "linfuse_weights_bind: null handle, name, dtype, descriptor "
                "or sizes, or a rank outside [0, 16]");
  auto it = w->tensors.find(name);
  if (it == w->tensors.end())
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: no tensor '%s'",
                w->path.c_str(), name);
  const Tensor &t = it->second;
  if (t.dtype != dtype)
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT, "%s: tensor '%s' is %s, not %s",
                w->path.c_str(), name, t.dtype.c_str(), dtype);
  bool shapeOk = int64_t(t.shape.size()) == rank;
  for (int64_t i = 0; shapeOk && i < rank; ++i)
    shapeOk = expected[i] < 0 || expected[i] == t.shape[i];
  if (!shapeOk) {
    std::string got, want;
    for (size_t i = 0; i < t.shape.size(); ++i)
      got += (i ? "x" : "") + std::to_string(t.shape[i]);
    for (int64_t i = 0; i < rank; ++i)
      want += (i ? "x" : "") + (expected[i] < 0 ? std::string("?")
                                                : std::to_string(expected[i]));
    return fail(LINFUSE_ERROR_INVALID_ARGUMENT,
                "%s: tensor '%s' is %s, but the argument takes %s",
                w->path.c_str(), name, got.empty() ? "a scalar" : got.c_str(),
                want.empty() ? "a scalar" : want.c_str());
  }
  size_t elementSize = elementBytes(t.dtype);
  if (elementSize == 0)
    return fail(LINFUSE_ERROR_UNSUPPORTED,
                "%s: tensor '%s' is %s, a dtype "
                "linfuse does not bind",
                w->path.c_str(), name, dtype);
  const char *data = w->data + t.begin;
  if (reinterpret_cast<uintptr_t>(data) % elementSize != 0) {
    // The data section starts wherever the header ends: safetensors' own
    // writer pads the header to 8 bytes, other writers may not.
    std::lock_guard<std::mutex> lock(w->copiesMutex);
    auto &copy =
        w->copies
            .try_emplace(name, std::unique_ptr<void, decltype(&std::free)>(
                                   nullptr, &std::free))
            .first->second;
    if (!copy) {
      size_t bytes = t.end - t.begin;
      copy.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
      if (!copy)
        return fail(LINFUSE_ERROR_OUT_OF_MEMORY,
                    "%s: no memory for an aligned copy of '%s' (%zu bytes)",
                    w->path.c_str(), name, bytes);
      std::memcpy(copy.get(), data, bytes);
    }
    data = static_cast<const char *>(copy.get());
  }
  // { T *allocated; T *aligned; int64_t offset; sizes[rank]; strides[rank] }
  auto *pointers = static_cast<const void **>(descriptor);
  pointers[0] = pointers[1] = data;
  auto *fields = reinterpret_cast<int64_t *>(pointers + 2);
  fields[0] = 0;
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    fields[1 + i] = t.shape[i];
    fields[1 + rank + i] = stride;
    stride *= t.shape[i];
  }
  return LINFUSE_OK;
}

int64_t linfuse_weights_count(const linfuse_weights *w) {
  return w ? int64_t(w->names.size()) : 0;
}

const char *linfuse_weights_name(const linfuse_weights *w, int64_t i) {
  if (!w || i < 0 || i >= int64_t(w->names.size()))
    return nullptr;
  return w->names[i].c_str();
}

void linfuse_weights_close(linfuse_weights *w) { delete w; }
