//===- WeightsTest.cpp - the runtime's safetensors reader -----------------===//
//
// linfuse_weights_open/bind on files written byte by byte here: tensors
// bound in place with their shapes and strides, a misaligned tensor copied,
// and every malformed header refused with a message before anything is
// addressed (run under ASan + UBSan by scripts/test.sh).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// A file in the test's temporary directory, removed afterwards.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string &bytes) {
    char name[] = "/tmp/linfuse-weights-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path = name;
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
    close(fd);
  }
  ~TempFile() { std::remove(path.c_str()); }
};

/// safetensors bytes: the header's length (little-endian u64), the header,
/// the data.
std::string safetensors(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::vector<float> values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

struct Descriptor2 {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

std::string lastMessage() { return linfuse_last_error_message(); }

TEST(Weights, BindsTensorsInPlace) {
  // Header padded to a multiple of 8, as safetensors' writer does.
  std::string header =
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("__metadata__":{"format":"pt"}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  TempFile file(safetensors(header, floats({1, 2, 3, 4, 5, 6})));
  linfuse_clear_error();
  linfuse_weights *w = linfuse_weights_open(file.path.c_str());
  ASSERT_NE(w, nullptr) << lastMessage();
  EXPECT_EQ(linfuse_weights_count(w), 1);
  EXPECT_STREQ(linfuse_weights_name(w, 0), "w");
  EXPECT_EQ(linfuse_weights_name(w, 1), nullptr);
  Descriptor2 d{};
  const int64_t any[] = {-1, 3};
  ASSERT_EQ(linfuse_weights_bind(w, "w", "F32", 2, any, &d), LINFUSE_OK);
  EXPECT_EQ(d.allocated, d.aligned);
  EXPECT_EQ(d.offset, 0);
  EXPECT_EQ(d.sizes[0], 2);
  EXPECT_EQ(d.sizes[1], 3);
  EXPECT_EQ(d.strides[0], 3);
  EXPECT_EQ(d.strides[1], 1);
  EXPECT_EQ(static_cast<const float *>(d.aligned)[5], 6.0f);
  linfuse_weights_close(w);
}

TEST(Weights, CopiesAMisalignedTensor) {
  // 8 + 55 bytes of header: the f32 data start at an odd address.
  std::string header =
      R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  TempFile file(safetensors(header, floats({1.5f, -2.0f})));
  linfuse_weights *w = linfuse_weights_open(file.path.c_str());
  ASSERT_NE(w, nullptr) << lastMessage();
  struct {
    void *allocated, *aligned;
    int64_t offset, sizes[1], strides[1];
  } d{};
  const int64_t two[] = {2};
  ASSERT_EQ(linfuse_weights_bind(w, "t", "F32", 1, two, &d), LINFUSE_OK);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(d.aligned) % alignof(float), 0u);
  EXPECT_EQ(static_cast<const float *>(d.aligned)[0], 1.5f);
  EXPECT_EQ(static_cast<const float *>(d.aligned)[1], -2.0f);
  // Bound again: the same copy.
  void *first = d.aligned;
  ASSERT_EQ(linfuse_weights_bind(w, "t", "F32", 1, two, &d), LINFUSE_OK);
  EXPECT_EQ(d.aligned, first);
  linfuse_weights_close(w);
}

TEST(Weights, RefusesWhatDoesNotFit) {
  std::string header =
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  TempFile file(safetensors(header, floats({1, 2, 3, 4, 5, 6})));
  linfuse_weights *w = linfuse_weights_open(file.path.c_str());
  ASSERT_NE(w, nullptr) << lastMessage();
  Descriptor2 d{};
  const int64_t shape[] = {3, 2};
  linfuse_clear_error();
  EXPECT_EQ(linfuse_weights_bind(w, "w", "F32", 2, shape, &d),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastMessage(), file.path + ": tensor 'w' is 2x3, but the "
                                       "argument takes 3x2");
  linfuse_clear_error();
  EXPECT_EQ(linfuse_weights_bind(w, "w", "BF16", 2, shape, &d),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastMessage(), file.path + ": tensor 'w' is F32, not BF16");
  linfuse_clear_error();
  EXPECT_EQ(linfuse_weights_bind(w, "v", "F32", 2, shape, &d),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastMessage(), file.path + ": no tensor 'v'");
  linfuse_clear_error();
  EXPECT_EQ(linfuse_weights_bind(nullptr, "w", "F32", 2, shape, &d),
            LINFUSE_ERROR_INVALID_ARGUMENT);
  linfuse_clear_error();
  linfuse_weights_close(w);
}

TEST(Weights, RefusesMalformedFiles) {
  struct Case {
    std::string bytes, why;
  };
  std::string big(8, '\xff'); // A header length of 2^64 - 1.
  std::vector<Case> cases = {
      {"\x01\x02", "not a safetensors file (shorter than its 8-byte header "
                   "length, or not a regular file)"},
      {big + "{}", "not a safetensors file (header length "
                   "18446744073709551615, file 10 bytes)"},
      {safetensors("[1]", ""),
       "not a safetensors file: the header is not a JSON object"},
      {safetensors("{\"t\":", ""),
       "not a safetensors file: the header is not a JSON object"},
      {safetensors(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                   floats({0, 0})),
       "not a safetensors file: tensor 't': data_offsets outside the file"},
      {safetensors(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                   floats({0, 0})),
       "not a safetensors file: tensor 't': data_offsets do not match the "
       "dtype and shape"},
      {safetensors(
           R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})", ""),
       "not a safetensors file: tensor 't': a size is not a non-negative "
       "integer below 2^40"},
      {safetensors(R"({"t":{"dtype":"F32","shape":[2097152,1048576],)"
                   R"("data_offsets":[0,0]}})",
                   ""),
       "not a safetensors file: tensor 't': more than 2^40 elements"},
      {safetensors(R"({"t":7})", ""),
       "not a safetensors file: tensor 't': not an object"},
  };
  for (const Case &c : cases) {
    TempFile file(c.bytes);
    linfuse_clear_error();
    EXPECT_EQ(linfuse_weights_open(file.path.c_str()), nullptr) << c.why;
    EXPECT_EQ(lastMessage(), file.path + ": " + c.why);
  }
  linfuse_clear_error();
  EXPECT_EQ(linfuse_weights_open("/nonexistent/w.safetensors"), nullptr);
  EXPECT_EQ(lastMessage(),
            "/nonexistent/w.safetensors: No such file or directory");
  linfuse_clear_error();
}

/// Resident kB of this process's mapping that holds `p` (/proc/self/smaps),
/// or -1 if none does.
long residentKb(const void *p) {
  FILE *f = std::fopen("/proc/self/smaps", "r");
  if (!f)
    return -1;
  char line[512];
  bool inside = false;
  long kb = -1;
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      inside = address >= lo && address < hi;
      continue;
    }
    if (inside && std::strncmp(line, "Rss:", 4) == 0) {
      kb = std::strtol(line + 4, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

/// A weight bound in place from a file and reordered by oneDNN for a GEMM
/// with several rows (LINFUSE_GEMM_CONSTANT_B): its pages leave the process
/// (the reordered copy is read from then on), and a one-row GEMM, which
/// reads the plain layout, maps them again and gets the right values.
TEST(Weights, ReorderedWeightsPagesLeaveMemoryAndComeBack) {
  const int64_t n = 256, k = 1024;
  std::vector<float> values(n * k);
  for (int64_t i = 0; i < n * k; ++i)
    values[i] = float((i * 7) % 17 - 8) / 8.0f;
  std::string header =
      R"({"w":{"dtype":"F32","shape":[256,1024],"data_offsets":[0,1048576]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  TempFile file(safetensors(header, floats(values)));
  linfuse_weights *w = linfuse_weights_open(file.path.c_str());
  ASSERT_NE(w, nullptr) << lastMessage();
  Descriptor2 b;
  const int64_t shape[] = {n, k};
  ASSERT_EQ(LINFUSE_OK, linfuse_weights_bind(w, "w", "F32", 2, shape, &b));
  float touched = 0; // map every page
  for (int64_t i = 0; i < n * k; i += 1024)
    touched += static_cast<const float *>(b.aligned)[i];
  EXPECT_NE(touched, 12345.0f);
  EXPECT_GE(residentKb(b.aligned), 1000);

  auto gemm = [&](int64_t m) {
    std::vector<float> a(m * k), c(m * n, -1.0f);
    for (int64_t i = 0; i < m * k; ++i)
      a[i] = float(i % 5) - 2.0f;
    Descriptor2 ad{a.data(), a.data(), 0, {m, k}, {k, 1}};
    Descriptor2 cd{c.data(), c.data(), 0, {m, n}, {n, 1}};
    int32_t flags = LINFUSE_GEMM_TRANSPOSE_B | LINFUSE_GEMM_CONSTANT_B;
    EXPECT_EQ(LINFUSE_OK,
              linfuse_cpu_gemm(2, &ad, 2, &b, 2, &cd, 2, &cd, LINFUSE_F32,
                               LINFUSE_F32, flags, 0, 1.0f, 0.0f))
        << lastMessage();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t l = 0; l < k; ++l)
          want += double(a[i * k + l]) * values[j * k + l];
        ASSERT_NEAR(c[i * n + j], want, 1e-3) << "row " << i << " col " << j;
      }
  };
  linfuse_runtime_stats before, after;
  linfuse_get_stats(&before);
  gemm(16);
  linfuse_get_stats(&after);
  const char *reorder = std::getenv("LINFUSE_REORDER_WEIGHTS");
  bool reordered = !(reorder && std::string(reorder) == "0") &&
                   after.fallback_gemm_calls == before.fallback_gemm_calls;
  if (reordered)
    EXPECT_LT(residentKb(b.aligned), 64) << "the plain pages stayed";
  else
    EXPECT_GE(residentKb(b.aligned), 1000) << "pages left without a copy";
  gemm(16); // the reordered copy
  gemm(1);  // the plain layout, mapped again from the file
  EXPECT_GE(residentKb(b.aligned), 1000);
  linfuse_cpu_release_packed_weights();
  linfuse_weights_close(w);
}

} // namespace
