//===- HostArrayTest.cpp - host arrays, .npy files, --input specs ---------===//
//
// The .npy fixtures are bytes numpy 1.24's np.save wrote; the float
// conversions are checked against APFloat.

#include "linfuse/Tools/HostArray.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>

using namespace mlir::linfuse;
using llvm::StringRef;

namespace {

constexpr ElementType kAllTypes[] = {
    ElementType::F32, ElementType::F64, ElementType::F16, ElementType::BF16,
    ElementType::I32, ElementType::I64, ElementType::I8,  ElementType::I1};

template <typename T>
HostArray makeArray(ElementType type, llvm::ArrayRef<int64_t> shape,
                    llvm::ArrayRef<T> values) {
  HostArray array = HostArray::zeros(type, shape);
  EXPECT_EQ(array.data.size(), values.size() * sizeof(T));
  std::memcpy(array.data.data(), values.data(), array.data.size());
  return array;
}

template <typename T> std::vector<T> valuesOf(const HostArray &array) {
  std::vector<T> values(array.data.size() / sizeof(T));
  std::memcpy(values.data(), array.data.data(), array.data.size());
  return values;
}

std::vector<float> iotaFloats(size_t count) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), 0.0f);
  return values;
}

std::string printed(const HostArray &array, int64_t maxElements = 1024) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printArray(os, array, maxElements);
  return text;
}

template <typename T> std::string errorOf(llvm::Expected<T> value) {
  if (value)
    return "<success>";
  return llvm::toString(value.takeError());
}

/// A .npy file around `dict` (padded like numpy's) and `data`.
std::string npyFile(StringRef dict, StringRef data, unsigned major = 1) {
  unsigned lengthBytes = major == 1 ? 2 : 4;
  std::string header = dict.str();
  while ((8 + lengthBytes + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY", 6) + char(major) + '\0';
  for (unsigned i = 0; i < lengthBytes; ++i)
    file += char((header.size() >> (8 * i)) & 0xff);
  return file + header + data.str();
}

/// The bytes of `values`, as a StringRef into them.
template <typename T> StringRef bytesOf(const std::vector<T> &values) {
  return StringRef(reinterpret_cast<const char *>(values.data()),
                   values.size() * sizeof(T));
}

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("linfuse-npy", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(StringRef name) {
    llvm::SmallString<128> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }

  std::string writeFile(StringRef name, StringRef bytes) {
    std::string filePath = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(filePath, ec);
    EXPECT_FALSE(ec);
    os << bytes;
    return filePath;
  }

  std::string readFile(StringRef filePath) {
    auto buffer = llvm::MemoryBuffer::getFile(filePath);
    EXPECT_TRUE(bool(buffer));
    return buffer ? (*buffer)->getBuffer().str() : "";
  }

  HostArray read(StringRef bytes) {
    llvm::Expected<HostArray> array = readNpy(writeFile("in.npy", bytes));
    EXPECT_TRUE(bool(array)) << errorOf(std::move(array));
    return array ? std::move(*array) : HostArray();
  }

  /// The error reading `bytes` gives, less its "<path>: " prefix.
  std::string readError(StringRef bytes) {
    std::string filePath = writeFile("bad.npy", bytes);
    std::string message = errorOf(readNpy(filePath));
    StringRef rest = message;
    EXPECT_TRUE(rest.consume_front(filePath + ": ")) << message;
    return rest.str();
  }

  std::string written(const HostArray &array) {
    std::string filePath = path("out.npy");
    EXPECT_FALSE(bool(writeNpy(filePath, array)));
    return readFile(filePath);
  }

  llvm::SmallString<128> dir;
};

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

TEST(ElementTypeTest, NamesAndSizes) {
  const char *names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "i8", "i1"};
  int64_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
  for (size_t i = 0; i < std::size(kAllTypes); ++i) {
    EXPECT_EQ(toString(kAllTypes[i]), names[i]);
    EXPECT_EQ(parseElementType(names[i]), kAllTypes[i]);
    EXPECT_EQ(byteSize(kAllTypes[i]), sizes[i]);
    EXPECT_EQ(isFloat(kAllTypes[i]), i < 4);
  }
  EXPECT_EQ(parseElementType("F32"), std::nullopt);
  EXPECT_EQ(parseElementType("f33"), std::nullopt);
  EXPECT_EQ(parseElementType(""), std::nullopt);
}

TEST(HostArrayTest, ZerosAndSizes) {
  HostArray array = HostArray::zeros(ElementType::F16, {2, 3, 4});
  EXPECT_EQ(array.numElements(), 24);
  EXPECT_EQ(array.data, std::vector<char>(48, 0));
  EXPECT_EQ(describeType(array), "2x3x4xf16");
  HostArray scalar = HostArray::zeros(ElementType::I64, {});
  EXPECT_EQ(scalar.numElements(), 1);
  EXPECT_EQ(scalar.data.size(), 8u);
  EXPECT_EQ(describeType(scalar), "i64");
  // A zero size wins over sizes whose product would overflow.
  HostArray empty;
  empty.shape = {int64_t(1) << 40, int64_t(1) << 40, 0};
  EXPECT_EQ(empty.numElements(), 0);
  EXPECT_EQ(describeType(empty), "1099511627776x1099511627776x0xf32");

  EXPECT_EQ(arrayByteSize(ElementType::F64, {2, 3}), 48);
  EXPECT_EQ(arrayByteSize(ElementType::F64, {}), 8);
  EXPECT_EQ(arrayByteSize(ElementType::I8, {int64_t(1) << 40, 0}), 0);
  EXPECT_EQ(arrayByteSize(ElementType::I8, {-1}), std::nullopt);
  EXPECT_EQ(arrayByteSize(ElementType::F32, {int64_t(1) << 31, 1 << 30}),
            std::nullopt);
}

TEST(HostArrayTest, GetAsDouble) {
  EXPECT_EQ(makeArray<int8_t>(ElementType::I8, {2}, {-128, 127}).getAsDouble(0),
            -128.0);
  EXPECT_EQ(
      makeArray<uint16_t>(ElementType::BF16, {1}, {0x3fc0}).getAsDouble(0),
      1.5);
  EXPECT_EQ(makeArray<uint16_t>(ElementType::F16, {1}, {0xc500}).getAsDouble(0),
            -5.0);
  EXPECT_EQ(makeArray<double>(ElementType::F64, {}, {0.1}).getAsDouble(0), 0.1);
  EXPECT_EQ(makeArray<uint8_t>(ElementType::I1, {2}, {0, 1}).getAsDouble(1),
            1.0);
  EXPECT_EQ(makeArray<int64_t>(ElementType::I64, {1}, {-(int64_t(1) << 50)})
                .getAsDouble(0),
            -std::ldexp(1.0, 50));
}

//===----------------------------------------------------------------------===//
// Float conversions
//===----------------------------------------------------------------------===//

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// `value` rounded by APFloat to `semantics` (to nearest, ties to even).
uint16_t apfloatRound(float value, const llvm::fltSemantics &semantics) {
  llvm::APFloat result(value);
  bool losesInfo;
  result.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return result.bitcastToAPInt().getZExtValue();
}

float apfloatWiden(uint16_t bits, const llvm::fltSemantics &semantics) {
  llvm::APFloat value(semantics, llvm::APInt(16, bits));
  bool losesInfo;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToFloat();
}

/// Floats that probe the rounding of a 16-bit format: every representable
/// value, the midpoints between neighbours (ties) and the floats just
/// either side of them, and a sweep of bit patterns.
std::vector<float> probeFloats(float (*widen)(uint16_t)) {
  std::vector<float> probes;
  for (uint32_t bits = 0; bits < 0x7fff; ++bits) {
    float low = widen(bits), high = widen(bits + 1);
    if (!std::isfinite(low) || !std::isfinite(high))
      continue;
    float mid = low + (high - low) / 2; // Exact: 16-bit values are narrow.
    for (float value :
         {low, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(value);
      probes.push_back(-value);
    }
  }
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 0x10001)
    probes.push_back(floatOf(bits));
  for (float value : {65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e10f,
                      3.3895314e38f, 3.4028235e38f, INFINITY, -INFINITY})
    probes.push_back(value);
  return probes;
}

TEST(FloatConversionTest, HalfToFloatIsExact) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = halfToFloat(bits);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) {
      // NaN: sign and payload kept bit for bit.
      EXPECT_EQ(bitsOf(value),
                ((bits & 0x8000) << 16) | 0x7f800000 | ((bits & 0x3ff) << 13));
      continue;
    }
    EXPECT_EQ(bitsOf(value),
              bitsOf(apfloatWiden(bits, llvm::APFloat::IEEEhalf())))
        << std::hex << bits;
  }
}

TEST(FloatConversionTest, FloatToHalfRoundsLikeAPFloat) {
  for (float value : probeFloats(halfToFloat)) {
    if (std::isnan(value))
      continue;
    ASSERT_EQ(floatToHalf(value),
              apfloatRound(value, llvm::APFloat::IEEEhalf()))
        << std::hexfloat << value;
  }
}

TEST(FloatConversionTest, HalfEdgeCases) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);  // Largest finite.
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff); // Below the midpoint.
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // The midpoint: to even, inf.
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);    // Overflow.
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400); // Smallest normal.
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001); // Smallest subnormal.
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000); // Tie between 0 and 1 unit.
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);      // 1.5 units: to even.
  EXPECT_EQ(floatToHalf(0x1.4p-24f), 0x0001);      // 1.25 units.
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);    // Tie 0x3ff/0x400: to even.
  EXPECT_EQ(floatToHalf(0x1.ff4p-15f), 0x03fe);    // Tie 0x3fe/0x3ff: to even.
  EXPECT_EQ(floatToHalf(0x1.ff8p-15f), 0x03ff);    // Largest subnormal.
  EXPECT_EQ(floatToHalf(-0x1p-30f), 0x8000);       // Underflow keeps the sign.
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00); // Tie: to even.
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02); // Tie: to even.
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03ff), 0x1.ff8p-15f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x7c00), INFINITY);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);

  // NaNs stay NaN, keep their sign and leading payload, and come out quiet.
  EXPECT_EQ(floatToHalf(NAN), 0x7e00);
  EXPECT_EQ(floatToHalf(-NAN), 0xfe00);
  EXPECT_EQ(floatToHalf(floatOf(0x7f800001)), 0x7e00); // Payload below.
  EXPECT_EQ(floatToHalf(floatOf(0x7fa00000)), 0x7f00); // Signalling.
  EXPECT_EQ(floatToHalf(floatOf(0xffc02000)), 0xfe01);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
  EXPECT_EQ(floatToHalf(halfToFloat(0x7e3f)), 0x7e3f);
}

TEST(FloatConversionTest, BF16ToFloatIsExact) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = bf16ToFloat(bits);
    EXPECT_EQ(bitsOf(value), bits << 16);
    if (!std::isnan(value)) {
      EXPECT_EQ(bitsOf(value),
                bitsOf(apfloatWiden(bits, llvm::APFloat::BFloat())));
    }
  }
}

TEST(FloatConversionTest, FloatToBF16RoundsLikeAPFloat) {
  std::vector<float> probes = probeFloats(bf16ToFloat);
  for (uint32_t bits : {0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu})
    probes.push_back(floatOf(bits));
  for (float value : probes) {
    if (std::isnan(value))
      continue;
    ASSERT_EQ(floatToBF16(value), apfloatRound(value, llvm::APFloat::BFloat()))
        << std::hexfloat << value;
  }
}

TEST(FloatConversionTest, BF16EdgeCases) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBF16(floatOf(0x3f808000)), 0x3f80); // Tie: to even.
  EXPECT_EQ(floatToBF16(floatOf(0x3f818000)), 0x3f82); // Tie: to even.
  EXPECT_EQ(floatToBF16(floatOf(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBF16(floatOf(0x7f7fffff)), 0x7f80); // Overflow: inf.
  EXPECT_EQ(floatToBF16(floatOf(0x00008000)), 0x0000); // Subnormal tie.
  EXPECT_EQ(floatToBF16(floatOf(0x80018000)), 0x8002);
  EXPECT_EQ(floatToBF16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBF16(NAN), 0x7fc0);
  EXPECT_EQ(floatToBF16(floatOf(0x7f800001)), 0x7fc0); // Stays NaN.
  EXPECT_EQ(floatToBF16(floatOf(0xff812345)), 0xffc1); // Sign, payload.
}

//===----------------------------------------------------------------------===//
// .npy files
//===----------------------------------------------------------------------===//

// np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))
const char kNumpyF32[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': "
    "(2, 3), }                                                          \n"
    "\x00\x00\x00\x00\x00\x00\x80?\x00\x00\x00@\x00\x00@@\x00\x00\x80@\x00\x00"
    "\xa0@";
// np.save(f, np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
const char kNumpyFortranI32[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': True, 'shape': "
    "(2, 3), }                                                           \n"
    "\x00\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x02\x00"
    "\x00\x00\x05\x00\x00\x00";
// np.lib.format.write_array(f, np.arange(2, dtype=np.float32), version=(2, 0))
const char kNumpyVersion2[] =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<f4', 'fortran_order': False, "
    "'shape': (2,), }                                                          "
    "\n\x00\x00\x00\x00\x00\x00\x80?";

StringRef fixture(const char *bytes, size_t size) {
  return StringRef(bytes, size - 1); // Less the literal's NUL.
}
#define FIXTURE(name) fixture(name, sizeof(name))

TEST_F(NpyTest, ReadsAndWritesNumpyFiles) {
  StringRef numpyBytes = FIXTURE(kNumpyF32);
  ASSERT_EQ(numpyBytes.size(), 152u);
  HostArray array = read(numpyBytes);
  EXPECT_EQ(array.type, ElementType::F32);
  EXPECT_EQ(array.shape, (llvm::SmallVector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf<float>(array), iotaFloats(6));
  EXPECT_EQ(written(array), numpyBytes);
}

TEST_F(NpyTest, WritesHeadersLikeNumpy) {
  // The dict np.save writes and the spaces that pad its header to 128
  // bytes, for the zero arrays of these types and shapes.
  struct Case {
    ElementType type;
    llvm::SmallVector<int64_t> shape;
    const char *dict;
    size_t spaces;
  } cases[] = {
      {ElementType::F64,
       {},
       "{'descr': '<f8', 'fortran_order': False, "
       "'shape': (), }",
       62},
      {ElementType::I32,
       {3},
       "{'descr': '<i4', 'fortran_order': False, "
       "'shape': (3,), }",
       60},
      {ElementType::I1,
       {2},
       "{'descr': '|b1', 'fortran_order': False, "
       "'shape': (2,), }",
       60},
      {ElementType::F16,
       {3},
       "{'descr': '<f2', 'fortran_order': False, "
       "'shape': (3,), }",
       60},
      {ElementType::I8,
       {2, 2, 2},
       "{'descr': '|i1', 'fortran_order': "
       "False, 'shape': (2, 2, 2), }",
       55},
      {ElementType::I64,
       {1, 2, 3},
       "{'descr': '<i8', 'fortran_order': "
       "False, 'shape': (1, 2, 3), }",
       55},
      {ElementType::BF16,
       {4},
       "{'descr': '<u2', 'fortran_order': False, "
       "'shape': (4,), }",
       60},
      {ElementType::F32,
       {123456, 0},
       "{'descr': '<f4', 'fortran_order': "
       "False, 'shape': (123456, 0), }",
       53},
  };
  for (const Case &c : cases) {
    HostArray array = HostArray::zeros(c.type, c.shape);
    std::string expected = std::string("\x93NUMPY\x01\x00v\x00", 10) + c.dict +
                           std::string(c.spaces, ' ') + "\n" +
                           std::string(array.data.size(), '\0');
    EXPECT_EQ(written(array), expected) << c.dict;
  }

  // A header that would end exactly on a 64-byte boundary gets 64 more
  // spaces, as numpy pads it.
  HostArray empty = HostArray::zeros(ElementType::F32, {0});
  empty.shape = {0, 1000000000000000000, 100000000000000000};
  EXPECT_EQ(written(empty),
            std::string("\x93NUMPY\x01\x00\xb6\x00", 10) +
                "{'descr': '<f4', 'fortran_order': False, 'shape': (0, "
                "1000000000000000000, 100000000000000000), }" +
                std::string(84, ' ') + "\n");
}

TEST_F(NpyTest, RoundTripsEveryTypeAndRank) {
  const llvm::SmallVector<int64_t> shapes[] = {{}, {5}, {2, 3}, {2, 3, 4}};
  for (ElementType type : kAllTypes) {
    for (const auto &shape : shapes) {
      HostArray array = HostArray::zeros(type, shape);
      for (size_t i = 0; i < array.data.size(); ++i)
        array.data[i] = type == ElementType::I1 ? i % 3 == 1 : char(i * 37 + 1);
      std::string bytes = written(array);
      EXPECT_EQ((bytes.size() - array.data.size()) % 64, 0u);
      HostArray back = read(bytes);
      EXPECT_EQ(back.type, type);
      EXPECT_EQ(back.shape, shape);
      EXPECT_EQ(back.data, array.data) << describeType(array);
    }
  }
}

TEST_F(NpyTest, ReadsFortranOrder) {
  HostArray array = read(FIXTURE(kNumpyFortranI32));
  EXPECT_EQ(array.type, ElementType::I32);
  EXPECT_EQ(array.shape, (llvm::SmallVector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf<int32_t>(array), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));

  // Rank 3: element (i, j, k) holds 100i + 10j + k; the first index varies
  // fastest in the file.
  std::vector<int64_t> columnMajor;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i)
        columnMajor.push_back(100 * i + 10 * j + k);
  array = read(npyFile("{'descr': '<i8', 'fortran_order': True, 'shape': (2, "
                       "3, 4), }",
                       bytesOf(columnMajor)));
  EXPECT_EQ(array.shape, (llvm::SmallVector<int64_t>{2, 3, 4}));
  std::vector<int64_t> rowMajor;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        rowMajor.push_back(100 * i + 10 * j + k);
  EXPECT_EQ(valuesOf<int64_t>(array), rowMajor);

  array = read(npyFile(
      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 0, 3), }", ""));
  EXPECT_EQ(array.numElements(), 0);
}

TEST_F(NpyTest, ReadsVersions2And3) {
  StringRef version2 = FIXTURE(kNumpyVersion2);
  std::string version3 = version2.str();
  version3[6] = 3;
  for (StringRef bytes : {version2, StringRef(version3)}) {
    HostArray array = read(bytes);
    EXPECT_EQ(array.type, ElementType::F32);
    EXPECT_EQ(array.shape, (llvm::SmallVector<int64_t>{2}));
    EXPECT_EQ(valuesOf<float>(array), iotaFloats(2));
  }
}

TEST_F(NpyTest, BF16IsStoredAsUint16) {
  HostArray array =
      makeArray<uint16_t>(ElementType::BF16, {2}, {0x3f80, 0xc020});
  std::string bytes = written(array);
  EXPECT_NE(bytes.find("'descr': '<u2'"), std::string::npos);
  HostArray back = read(bytes);
  EXPECT_EQ(back.type, ElementType::BF16);
  EXPECT_EQ(printed(back), "2xbf16=[1 -2.5]");
}

TEST_F(NpyTest, HeaderSyntaxVariants) {
  std::vector<float> data = {1.5f, 2.5f};
  for (StringRef dict : {
           "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
           "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,)}",
           "  {  'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 "
           ", ) , }  ",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
       }) {
    HostArray array = read(npyFile(dict, bytesOf(data)));
    EXPECT_EQ(printed(array), "2xf32=[1.5 2.5]") << dict.str();
  }
  // No padding, no newline.
  std::string tight = std::string("\x93NUMPY\x01\x00\x34\x00", 10) +
                      "{'descr':'<f4','fortran_order':False,'shape':(2, 1)}" +
                      bytesOf(data).str();
  EXPECT_EQ(printed(read(tight)), "2x1xf32=[[1.5][2.5]]");
}

TEST_F(NpyTest, ConvertsBigEndianAndOneByteOrders) {
  HostArray array =
      read(npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                   StringRef("\x3f\x80\x00\x00\xc0\x20\x00\x00", 8)));
  EXPECT_EQ(array.type, ElementType::F32);
  EXPECT_EQ(valuesOf<float>(array), (std::vector<float>{1.0f, -2.5f}));
  array =
      read(npyFile("{'descr': '>i8', 'fortran_order': False, 'shape': (), }",
                   StringRef("\x01\x02\x03\x04\x05\x06\x07\x08", 8)));
  EXPECT_EQ(valuesOf<int64_t>(array),
            (std::vector<int64_t>{0x0102030405060708}));
  array = read(npyFile(
      "{'descr': '>u2', 'fortran_order': True, 'shape': (1,), }", "\x3f\xc0"));
  EXPECT_EQ(printed(array), "1xbf16=[1.5]");
  array = read(npyFile(
      "{'descr': '<i1', 'fortran_order': False, 'shape': (2,), }", "\xff\x05"));
  EXPECT_EQ(printed(array), "2xi8=[-1 5]");
  // numpy reads any non-zero byte as True.
  array =
      read(npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                   StringRef("\x00\x02\x01", 3)));
  EXPECT_EQ(array.data, (std::vector<char>{0, 1, 1}));
}

TEST_F(NpyTest, RejectsBadFiles) {
  std::string f32 = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  EXPECT_EQ(readError(""), "not a .npy file (bad magic string)");
  EXPECT_EQ(readError("\x89PNG\r\n\x1a\n"),
            "not a .npy file (bad magic string)");
  EXPECT_EQ(readError("\x93NUMPY\x01"), "truncated header");
  EXPECT_EQ(readError(StringRef("\x93NUMPY\x01\x00\x76", 9)),
            "truncated header");
  EXPECT_EQ(
      readError(StringRef("\x93NUMPY\x01\x00\x76\x00{'descr': '<f4'", 25)),
      "truncated header: expected 118 header bytes, found 15");
  std::string bytes = npyFile(f32 + "(2,), }", "12345678");
  bytes[6] = 4;
  EXPECT_EQ(readError(bytes), "unsupported .npy format version 4.0");
  bytes[6] = 1;
  bytes[7] = 1;
  EXPECT_EQ(readError(bytes), "unsupported .npy format version 1.1");

  EXPECT_EQ(readError(npyFile(f32 + "(2, 3), }", std::string(20, 'x'))),
            "truncated data: expected 24 bytes, found 20");
  EXPECT_EQ(readError(npyFile(f32 + "(2, 3), }", std::string(28, 'x'))),
            "unexpected trailing data: expected 24 bytes, found 28");
  EXPECT_EQ(readError(npyFile(f32 + "(3, -2), }", "")),
            "negative dimension -2 in shape");
  EXPECT_EQ(readError(npyFile(f32 + "(4294967296, 4294967296), }", "")),
            "shape too large");
}

TEST_F(NpyTest, RejectsBadHeaders) {
  auto headerError = [&](StringRef dict) {
    return readError(npyFile(dict, ""));
  };
  EXPECT_EQ(headerError("'descr': '<f4'}"),
            "bad .npy header: expected '{' at column 1");
  EXPECT_EQ(headerError("{'descr': '<f4', 'fortran_order': False}"),
            "bad .npy header: missing key 'shape'");
  EXPECT_EQ(headerError("{'descr': '<f4', 'descr': '<f4'}"),
            "bad .npy header: duplicate key 'descr' at column 18");
  EXPECT_EQ(headerError("{'descr': '<f4', 'extra': 1}"),
            "bad .npy header: unexpected key 'extra' at column 18");
  EXPECT_EQ(headerError("{descr: '<f4'}"),
            "bad .npy header: expected a string key at column 2");
  EXPECT_EQ(headerError("{'descr' '<f4'}"),
            "bad .npy header: expected ':' after 'descr' at column 10");
  EXPECT_EQ(headerError("{'descr': '<f4' 'shape': ()}"),
            "bad .npy header: expected ',' or '}' at column 17");
  EXPECT_EQ(headerError("{'descr': '<f4"),
            "bad .npy header: unterminated string at column 11");
  EXPECT_EQ(headerError("{'descr': 4}"),
            "bad .npy header: expected a string for 'descr' at column 11");
  EXPECT_EQ(headerError("{'fortran_order': 0}"),
            "bad .npy header: expected True or False for 'fortran_order' at "
            "column 19");
  EXPECT_EQ(headerError("{'fortran_order': Falsely}"),
            "bad .npy header: expected True or False for 'fortran_order' at "
            "column 19");
  EXPECT_EQ(headerError("{'shape': [2]}"),
            "bad .npy header: expected a tuple for 'shape' at column 11");
  EXPECT_EQ(headerError("{'shape': (3)}"),
            "bad .npy header: 'shape' (3) is not a tuple (write a 1-tuple as "
            "(3,)) at column 13");
  EXPECT_EQ(headerError("{'shape': (2, x)}"),
            "bad .npy header: expected an integer in 'shape' at column 15");
  EXPECT_EQ(headerError("{'shape': (2 3)}"),
            "bad .npy header: expected ',' or ')' in 'shape' at column 14");
  EXPECT_EQ(headerError("{'shape': (99999999999999999999,)}"),
            "bad .npy header: integer 99999999999999999999 in 'shape' is out "
            "of range at column 32");
  EXPECT_EQ(headerError("{'descr': '<f4', 'fortran_order': False, 'shape': "
                        "(2,)} x"),
            "bad .npy header: unexpected text after the dict at column 57");
}

TEST_F(NpyTest, RejectsUnsupportedDtypes) {
  const char *supported = " (supported: '<f4', '<f8', '<f2', '<u2' (bf16 "
                          "bits), '<i4', '<i8', '|i1', '|b1')";
  for (StringRef descr : {"|u1", "<u4", "<u8", "<i2", "<c8", "|f4", "=f4",
                          "<f4 ", "f4", "O", "<M8[s]", ""}) {
    std::string dict = "{'descr': '" + descr.str() +
                       "', 'fortran_order': False, 'shape': (), }";
    EXPECT_EQ(readError(npyFile(dict, "")),
              "unsupported dtype '" + descr.str() + "'" + supported);
  }
  EXPECT_EQ(readError(npyFile("{'descr': [('a', '<f4')], 'fortran_order': "
                              "False, 'shape': (), }",
                              "")),
            "unsupported dtype: structured dtypes are not supported");
}

TEST_F(NpyTest, FileErrors) {
  std::string missing = path("missing.npy");
  EXPECT_EQ(errorOf(readNpy(missing)), missing + ": No such file or directory");
  std::string noDir = path("no-such-dir/out.npy");
  EXPECT_EQ(
      llvm::toString(writeNpy(noDir, HostArray::zeros(ElementType::F32, {2}))),
      noDir + ": No such file or directory");
  HostArray bad = HostArray::zeros(ElementType::F32, {2, 3});
  bad.data.resize(3);
  std::string out = path("out.npy");
  EXPECT_EQ(llvm::toString(writeNpy(out, bad)),
            out + ": array data holds 3 bytes, expected 24 for 2x3xf32");
  bad.shape = {-1};
  EXPECT_EQ(llvm::toString(writeNpy(out, bad)), out + ": invalid shape -1xf32");
}

//===----------------------------------------------------------------------===//
// --input specs
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, ParsesSplats) {
  auto parsed = [](StringRef spec) {
    llvm::Expected<HostArray> array = parseInputSpec(spec);
    EXPECT_TRUE(bool(array)) << errorOf(std::move(array));
    return array ? printed(*array) : "";
  };
  EXPECT_EQ(parsed("2x3xf32=1.5"), "2x3xf32=[[1.5 1.5 1.5][1.5 1.5 1.5]]");
  EXPECT_EQ(parsed("f32=2"), "f32=2");
  EXPECT_EQ(parsed("4xi32=7"), "4xi32=[7 7 7 7]");
  EXPECT_EQ(parsed("2xi8=-128"), "2xi8=[-128 -128]");
  EXPECT_EQ(parsed("i64=-9223372036854775808"), "i64=-9223372036854775808");
  EXPECT_EQ(parsed("2xi1=true"), "2xi1=[1 1]");
  EXPECT_EQ(parsed("i1=0"), "i1=0");
  EXPECT_EQ(parsed("f64=0.1"), "f64=0.1");
  EXPECT_EQ(parsed("2xf16=0.1"), "2xf16=[0.0999756 0.0999756]");
  EXPECT_EQ(parsed("bf16=0.1"), "bf16=0.100098");
  EXPECT_EQ(parsed("f16=65519"), "f16=65504");
  EXPECT_EQ(parsed("f32=-inf"), "f32=-inf");
  EXPECT_EQ(parsed("f64=Infinity"), "f64=inf");
  EXPECT_EQ(parsed("f16=-0x1.8p1"), "f16=-3");
  EXPECT_EQ(parsed("f32=1e-50"), "f32=0");
  EXPECT_EQ(parsed("0x3xf32=1"), "0x3xf32=[]");

  // Values are rounded once, straight to the element type.
  llvm::Expected<HostArray> half = parseInputSpec("f16=1.00048828125000001");
  ASSERT_TRUE(bool(half));
  EXPECT_EQ(valuesOf<uint16_t>(*half), (std::vector<uint16_t>{0x3c01}));
  llvm::Expected<HostArray> nan = parseInputSpec("bf16=nan");
  ASSERT_TRUE(bool(nan));
  EXPECT_TRUE(std::isnan(nan->getAsDouble(0)));
  llvm::Expected<HostArray> big = parseInputSpec("i64=9007199254740993");
  ASSERT_TRUE(bool(big));
  EXPECT_EQ(valuesOf<int64_t>(*big), (std::vector<int64_t>{9007199254740993}));
}

TEST_F(NpyTest, ReadsInputFiles) {
  std::string file = writeFile("x.npy", FIXTURE(kNumpyF32));
  llvm::Expected<HostArray> array = parseInputSpec("@" + file);
  ASSERT_TRUE(bool(array)) << errorOf(std::move(array));
  EXPECT_EQ(printed(*array), "2x3xf32=[[0 1 2][3 4 5]]");
  std::string missing = path("missing.npy");
  EXPECT_EQ(errorOf(parseInputSpec("@" + missing)),
            missing + ": No such file or directory");
  EXPECT_EQ(errorOf(parseInputSpec("@")), "bad --input '@': missing file path");
}

TEST(InputSpecTest, RejectsBadSpecs) {
  auto error = [](StringRef spec) { return errorOf(parseInputSpec(spec)); };
  EXPECT_EQ(error("2x?xf32=1"), "bad --input '2x?xf32=1': bad dimension '?'");
  EXPECT_EQ(error("2x-3xf32=1"),
            "bad --input '2x-3xf32=1': bad dimension '-3'");
  EXPECT_EQ(error("x3xf32=1"), "bad --input 'x3xf32=1': bad dimension ''");
  EXPECT_EQ(error("99999999999999999999xf32=1"),
            "bad --input '99999999999999999999xf32=1': bad dimension "
            "'99999999999999999999'");
  EXPECT_EQ(error("4294967296x4294967296xf32=1"),
            "bad --input '4294967296x4294967296xf32=1': shape too large");
  EXPECT_EQ(error("2x3xf33=1"),
            "bad --input '2x3xf33=1': unknown element type 'f33' (expected "
            "f32, f64, f16, bf16, i32, i64, i8 or i1)");
  EXPECT_EQ(error("2x3=1"), "bad --input '2x3=1': unknown element type '3' "
                            "(expected f32, f64, f16, bf16, i32, i64, i8 or "
                            "i1)");
  EXPECT_EQ(error("2x3xf32"),
            "bad --input '2x3xf32': missing '=value' (expected e.g. "
            "2x3xf32=1.5, f32=2 or @file.npy)");
  EXPECT_EQ(error("f32="), "bad --input 'f32=': missing value after '='");
  EXPECT_EQ(error("f32=abc"),
            "bad --input 'f32=abc': unparsable value 'abc' for f32");
  EXPECT_EQ(error("f32=1e"),
            "bad --input 'f32=1e': unparsable value '1e' for f32");
  EXPECT_EQ(error("f32= 1"),
            "bad --input 'f32= 1': unparsable value ' 1' for f32");
  EXPECT_EQ(error("f32=1.5x"),
            "bad --input 'f32=1.5x': unparsable value '1.5x' for f32");
  EXPECT_EQ(error("i32=1.5"),
            "bad --input 'i32=1.5': unparsable value '1.5' for i32");
  EXPECT_EQ(error("i1=yes"), "bad --input 'i1=yes': unparsable value 'yes' "
                             "for i1");
  EXPECT_EQ(error("i8=300"),
            "bad --input 'i8=300': value 300 out of range for i8 [-128, 127]");
  EXPECT_EQ(error("i8=-129"), "bad --input 'i8=-129': value -129 out of range "
                              "for i8 [-128, 127]");
  EXPECT_EQ(error("i1=2"),
            "bad --input 'i1=2': value 2 out of range for i1 [0, 1]");
  EXPECT_EQ(error("i32=2147483648"),
            "bad --input 'i32=2147483648': value 2147483648 out of range for "
            "i32 [-2147483648, 2147483647]");
  EXPECT_EQ(error("i64=9223372036854775808"),
            "bad --input 'i64=9223372036854775808': value "
            "9223372036854775808 out of range for i64 [-9223372036854775808, "
            "9223372036854775807]");
  EXPECT_EQ(error("f16=70000"),
            "bad --input 'f16=70000': value 70000 out of range for f16");
  EXPECT_EQ(error("f32=1e39"),
            "bad --input 'f32=1e39': value 1e39 out of range for f32");
  EXPECT_EQ(error("f64=1e400"),
            "bad --input 'f64=1e400': value 1e400 out of range for f64");
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

TEST(PrintArrayTest, Formats) {
  EXPECT_EQ(
      printed(makeArray<float>(ElementType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})),
      "2x3xf32=[[1 2 3][4 5 6]]");
  EXPECT_EQ(printed(makeArray<float>(ElementType::F32, {}, {1.5f})), "f32=1.5");
  EXPECT_EQ(printed(makeArray<float>(ElementType::F32, {1, 2, 2},
                                     {1.0f / 3, -2e-7f, 123456789.0f, 1e20f})),
            "1x2x2xf32=[[[0.333333 -2e-07][1.23457e+08 1e+20]]]");
  EXPECT_EQ(printed(makeArray<float>(ElementType::F32, {3},
                                     {INFINITY, -INFINITY, NAN})),
            "3xf32=[inf -inf nan]");
  EXPECT_EQ(printed(makeArray<double>(ElementType::F64, {2}, {0.1, 1e300})),
            "2xf64=[0.1 1e+300]");
  EXPECT_EQ(printed(makeArray<uint16_t>(ElementType::F16, {2},
                                        {floatToHalf(0.1f), 0x7bff})),
            "2xf16=[0.0999756 65504]");
  EXPECT_EQ(printed(makeArray<uint16_t>(ElementType::BF16, {2},
                                        {floatToBF16(0.1f), 0xc2f7})),
            "2xbf16=[0.100098 -123.5]");
  EXPECT_EQ(printed(makeArray<int64_t>(ElementType::I64, {2},
                                       {9007199254740993, INT64_MIN})),
            "2xi64=[9007199254740993 -9223372036854775808]");
  EXPECT_EQ(printed(makeArray<int32_t>(ElementType::I32, {2},
                                       {INT32_MIN, INT32_MAX})),
            "2xi32=[-2147483648 2147483647]");
  EXPECT_EQ(printed(makeArray<int8_t>(ElementType::I8, {2}, {-128, 127})),
            "2xi8=[-128 127]");
  EXPECT_EQ(printed(makeArray<uint8_t>(ElementType::I1, {2, 2}, {1, 0, 0, 1})),
            "2x2xi1=[[1 0][0 1]]");
  EXPECT_EQ(printed(HostArray::zeros(ElementType::F32, {0})), "0xf32=[]");
  EXPECT_EQ(printed(HostArray::zeros(ElementType::I32, {2, 0})),
            "2x0xi32=[[][]]");
}

TEST(PrintArrayTest, ElidesLargeArrays) {
  HostArray line = makeArray<float>(ElementType::F32, {2000}, iotaFloats(2000));
  EXPECT_EQ(printed(line, 6), "2000xf32=[0 1 2 ... 1997 1998 1999]");
  EXPECT_EQ(printed(line, 7), "2000xf32=[0 1 2 ... 1997 1998 1999]");
  EXPECT_EQ(printed(line, 0), "2000xf32=[0 ... 1999]");
  // The default shows 1024 elements: 0..511 and 1488..1999.
  std::string text = printed(line);
  EXPECT_NE(text.find("[0 1 2 "), std::string::npos);
  EXPECT_NE(text.find(" 510 511 ... 1488 1489 "), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 1024);
  // A negative limit shows everything.
  text = printed(line, -1);
  EXPECT_EQ(text.find("..."), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 1999);
  // Within the limit nothing is elided.
  EXPECT_EQ(printed(line, 2000).find("..."), std::string::npos);

  HostArray square =
      makeArray<float>(ElementType::F32, {10, 10}, iotaFloats(100));
  EXPECT_EQ(printed(square, 16), "10x10xf32=[[0 1 ... 8 9][10 11 ... 18 19]..."
                                 "[80 81 ... 88 89][90 91 ... 98 99]]");
  EXPECT_EQ(printed(square, 35), "10x10xf32=[[0 1 ... 8 9][10 11 ... 18 19]..."
                                 "[80 81 ... 88 89][90 91 ... 98 99]]");
  EXPECT_EQ(printed(square, 36),
            "10x10xf32=[[0 1 2 ... 7 8 9][10 11 12 ... 17 18 19][20 21 22 ... "
            "27 28 29]...[70 71 72 ... 77 78 79][80 81 82 ... 87 88 89][90 91 "
            "92 ... 97 98 99]]");

  // A short dimension is shown whole; the budget goes to the long one:
  // 3 rows of 16 + 16 entries, 96 <= 100 elements.
  HostArray wide =
      makeArray<float>(ElementType::F32, {3, 1000}, iotaFloats(3000));
  text = printed(wide, 100);
  EXPECT_EQ(std::count(text.begin(), text.end(), '['), 4);
  EXPECT_NE(text.find("[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 ... 984 "),
            std::string::npos);
  EXPECT_NE(text.find("998 999][1000 1001 "), std::string::npos);
  EXPECT_EQ(StringRef(text).count("..."), 3u);
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 3 * 32);
}

} // namespace
