//===- Npy.cpp - reading and writing .npy files ---------------------------===//
//
// The format (numpy's NEP 1): the magic string "\x93NUMPY", a major and a
// minor version byte, the header length (2 bytes little-endian in version
// 1.0, 4 bytes in 2.0 and 3.0), then the header, a Python dict literal such
// as
//
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//
// padded with spaces and a newline, then the raw elements.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Tools/HostArray.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::linfuse;
using llvm::StringRef;
using llvm::Twine;

static constexpr StringRef kMagic("\x93NUMPY", 6);
/// numpy aligns the data to this many bytes from the start of the file.
static constexpr size_t kHeaderAlign = 64;
/// numpy pads the header so that the first dimension can grow in place to
/// this many digits.
static constexpr size_t kGrowthAxisMaxDigits = 21;

static llvm::Error fileError(StringRef path, const Twine &message) {
  return llvm::createStringError(path + ": " + message);
}

//===----------------------------------------------------------------------===//
// dtypes
//===----------------------------------------------------------------------===//

namespace {
struct DtypeCode {
  ElementType type;
  StringRef code; // The descr without its byte-order character.
};
} // namespace

static constexpr DtypeCode kDtypeCodes[] = {
    {ElementType::F32, "f4"}, {ElementType::F64, "f8"},
    {ElementType::F16, "f2"}, {ElementType::BF16, "u2"},
    {ElementType::I32, "i4"}, {ElementType::I64, "i8"},
    {ElementType::I8, "i1"},  {ElementType::I1, "b1"},
};

static char nativeOrder() { return llvm::sys::IsBigEndianHost ? '>' : '<'; }

/// The descr np.save writes for `type`: '|' for one-byte types, else the
/// host's byte order.
static std::string descrFor(ElementType type) {
  for (const DtypeCode &entry : kDtypeCodes)
    if (entry.type == type)
      return (Twine(byteSize(type) == 1 ? '|' : nativeOrder()) + entry.code)
          .str();
  llvm_unreachable("unknown ElementType");
}

namespace {
struct Dtype {
  ElementType type;
  bool swapBytes; // Stored in the other byte order than the host's.
};
} // namespace

static std::optional<Dtype> parseDescr(StringRef descr) {
  if (descr.size() < 2)
    return std::nullopt;
  char order = descr.front();
  for (const DtypeCode &entry : kDtypeCodes) {
    if (descr.drop_front() != entry.code)
      continue;
    if (byteSize(entry.type) == 1)
      return Dtype{entry.type, false};
    if (order != '<' && order != '>')
      return std::nullopt;
    return Dtype{entry.type, order != nativeOrder()};
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The header dict
//===----------------------------------------------------------------------===//

namespace {
struct Header {
  std::string descr;
  bool fortranOrder = false;
  llvm::SmallVector<int64_t> shape;
};

/// Parses the Python dict literal of a .npy header: exactly the keys
/// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple
/// of integers), in any order, with Python's optional trailing commas and
/// arbitrary whitespace.
class HeaderParser {
public:
  HeaderParser(StringRef path, StringRef text) : path(path), text(text) {}

  llvm::Expected<Header> parse() {
    Header header;
    bool seenDescr = false, seenFortran = false, seenShape = false;
    if (!consume('{'))
      return error("expected '{'");
    while (!consume('}')) {
      skipSpace();
      size_t keyStart = pos;
      std::string key;
      if (llvm::Error err = parseString(key, "a string key"))
        return std::move(err);
      bool *seen = key == "descr"           ? &seenDescr
                   : key == "fortran_order" ? &seenFortran
                   : key == "shape"         ? &seenShape
                                            : nullptr;
      if (!seen)
        return errorAt(keyStart, "unexpected key '" + key + "'");
      if (*seen)
        return errorAt(keyStart, "duplicate key '" + key + "'");
      *seen = true;
      if (!consume(':'))
        return error("expected ':' after '" + key + "'");
      llvm::Error err = llvm::Error::success();
      if (key == "descr")
        err = parseDescrValue(header.descr);
      else if (key == "fortran_order")
        err = parseBool(header.fortranOrder);
      else
        err = parseShape(header.shape);
      if (err)
        return std::move(err);
      if (!consume(',') && !peek('}'))
        return error("expected ',' or '}'");
    }
    skipSpace();
    if (pos != text.size())
      return error("unexpected text after the dict");
    for (auto [seen, key] : {std::pair(seenDescr, "descr"),
                             std::pair(seenFortran, "fortran_order"),
                             std::pair(seenShape, "shape")})
      if (!seen)
        return fileError(path,
                         Twine("bad .npy header: missing key '") + key + "'");
    return header;
  }

private:
  llvm::Error errorAt(size_t position, const Twine &message) {
    return fileError(path, "bad .npy header: " + message + " at column " +
                               Twine(position + 1));
  }
  llvm::Error error(const Twine &message) { return errorAt(pos, message); }

  void skipSpace() {
    while (pos < text.size() && llvm::isSpace(text[pos]))
      ++pos;
  }

  /// Skips whitespace; then true if the next character is `c`.
  bool peek(char c) {
    skipSpace();
    return pos < text.size() && text[pos] == c;
  }

  bool consume(char c) {
    if (!peek(c))
      return false;
    ++pos;
    return true;
  }

  bool consumeWord(StringRef word) {
    skipSpace();
    StringRef rest = text.drop_front(pos);
    if (!rest.starts_with(word) ||
        (rest.size() > word.size() && llvm::isAlnum(rest[word.size()])))
      return false;
    pos += word.size();
    return true;
  }

  llvm::Error parseString(std::string &result, StringRef what) {
    skipSpace();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return error("expected " + what);
    char quote = text[pos];
    size_t end = text.find(quote, pos + 1);
    if (end == StringRef::npos)
      return error("unterminated string");
    StringRef contents = text.slice(pos + 1, end);
    if (contents.contains('\\'))
      return error("escapes in strings are not supported");
    result = contents.str();
    pos = end + 1;
    return llvm::Error::success();
  }

  llvm::Error parseDescrValue(std::string &result) {
    if (peek('[') || peek('{'))
      return fileError(path, "unsupported dtype: structured dtypes are not "
                             "supported");
    return parseString(result, "a string for 'descr'");
  }

  llvm::Error parseBool(bool &result) {
    if (consumeWord("True"))
      result = true;
    else if (consumeWord("False"))
      result = false;
    else
      return error("expected True or False for 'fortran_order'");
    return llvm::Error::success();
  }

  llvm::Error parseInteger(int64_t &result) {
    skipSpace();
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    while (pos < text.size() && llvm::isDigit(text[pos]))
      ++pos;
    StringRef digits = text.slice(start, pos);
    if (digits.empty() || digits == "-") {
      pos = start;
      return error("expected an integer in 'shape'");
    }
    if (digits.getAsInteger(10, result))
      return error("integer " + digits + " in 'shape' is out of range");
    // Python 2's long suffix, as numpy once wrote it: (3L, 4L).
    if (pos < text.size() && (text[pos] == 'L' || text[pos] == 'l'))
      ++pos;
    return llvm::Error::success();
  }

  llvm::Error parseShape(llvm::SmallVectorImpl<int64_t> &shape) {
    if (!consume('('))
      return error("expected a tuple for 'shape'");
    while (!consume(')')) {
      int64_t size = 0;
      if (llvm::Error err = parseInteger(size))
        return err;
      shape.push_back(size);
      if (consume(','))
        continue;
      if (!peek(')'))
        return error("expected ',' or ')' in 'shape'");
      // Python reads "(3)" as the integer 3, not as a tuple.
      if (shape.size() == 1)
        return error("'shape' (" + Twine(size) +
                     ") is not a tuple (write a 1-tuple as (" + Twine(size) +
                     ",))");
    }
    return llvm::Error::success();
  }

  StringRef path;
  StringRef text;
  size_t pos = 0;
};
} // namespace

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Reads a little-endian unsigned integer of `bytes` bytes.
static uint32_t readLittleEndian(const char *data, unsigned bytes) {
  uint32_t value = 0;
  for (unsigned i = 0; i < bytes; ++i)
    value |= uint32_t(uint8_t(data[i])) << (8 * i);
  return value;
}

/// Copies Fortran-order (column-major) elements from `source` into the C
/// order (row-major) data of `array`.
static void fortranToC(const char *source, HostArray &array) {
  int64_t count = array.numElements();
  if (count == 0)
    return;
  llvm::ArrayRef<int64_t> shape = array.shape;
  int64_t elementSize = byteSize(array.type);
  char *dest = array.data.data();
  size_t rank = shape.size();
  // Column-major strides, in elements.
  llvm::SmallVector<int64_t> strides(rank, 1);
  for (size_t d = 1; d < rank; ++d)
    strides[d] = strides[d - 1] * shape[d - 1];
  // Walk the C-order indices like an odometer, tracking the source offset.
  llvm::SmallVector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dest + i * elementSize, source + offset * elementSize,
                elementSize);
    for (size_t d = rank; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < shape[d])
        break;
      offset -= shape[d] * strides[d];
      index[d] = 0;
    }
  }
}

llvm::Expected<HostArray> mlir::linfuse::readNpy(StringRef path) {
  auto bufferOr = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
  if (std::error_code ec = bufferOr.getError())
    return llvm::createStringError(ec, path + ": " + ec.message());
  StringRef file = (*bufferOr)->getBuffer();

  if (!file.starts_with(kMagic))
    return fileError(path, "not a .npy file (bad magic string)");
  if (file.size() < kMagic.size() + 2)
    return fileError(path, "truncated header");
  unsigned major = uint8_t(file[6]), minor = uint8_t(file[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return fileError(path, "unsupported .npy format version " + Twine(major) +
                               "." + Twine(minor));
  unsigned lengthBytes = major == 1 ? 2 : 4;
  size_t preamble = kMagic.size() + 2 + lengthBytes;
  if (file.size() < preamble)
    return fileError(path, "truncated header");
  uint64_t headerLength = readLittleEndian(file.data() + 8, lengthBytes);
  if (file.size() - preamble < headerLength)
    return fileError(path, "truncated header: expected " + Twine(headerLength) +
                               " header bytes, found " +
                               Twine(file.size() - preamble));

  llvm::Expected<Header> header =
      HeaderParser(path, file.substr(preamble, headerLength)).parse();
  if (!header)
    return header.takeError();
  std::optional<Dtype> dtype = parseDescr(header->descr);
  if (!dtype)
    return fileError(path, "unsupported dtype '" + header->descr +
                               "' (supported: '<f4', '<f8', '<f2', '<u2' "
                               "(bf16 bits), '<i4', '<i8', '|i1', '|b1')");

  for (int64_t size : header->shape)
    if (size < 0)
      return fileError(path, "negative dimension " + Twine(size) + " in shape");
  std::optional<int64_t> expectedBytes =
      arrayByteSize(dtype->type, header->shape);
  if (!expectedBytes)
    return fileError(path, "shape too large");
  StringRef data = file.drop_front(preamble + headerLength);
  if (data.size() != uint64_t(*expectedBytes))
    return fileError(path, Twine(data.size() < uint64_t(*expectedBytes)
                                     ? "truncated data"
                                     : "unexpected trailing data") +
                               ": expected " + Twine(*expectedBytes) +
                               " bytes, found " + Twine(data.size()));

  HostArray array;
  array.type = dtype->type;
  array.shape = std::move(header->shape);
  array.data.resize(*expectedBytes);
  if (header->fortranOrder)
    fortranToC(data.data(), array);
  else
    std::copy(data.begin(), data.end(), array.data.begin());
  int64_t elementSize = byteSize(array.type);
  if (dtype->swapBytes)
    for (size_t offset = 0; offset < array.data.size(); offset += elementSize)
      std::reverse(array.data.begin() + offset,
                   array.data.begin() + offset + elementSize);
  // numpy reads any non-zero byte as True.
  if (array.type == ElementType::I1)
    for (char &byte : array.data)
      byte = byte != 0;
  return array;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

llvm::Error mlir::linfuse::writeNpy(StringRef path, const HostArray &array) {
  std::optional<int64_t> expectedBytes = arrayByteSize(array.type, array.shape);
  if (!expectedBytes)
    return fileError(path, "invalid shape " + describeType(array));
  if (array.data.size() != uint64_t(*expectedBytes))
    return fileError(path, "array data holds " + Twine(array.data.size()) +
                               " bytes, expected " + Twine(*expectedBytes) +
                               " for " + describeType(array));

  // The dict exactly as np.save writes it.
  std::string dict;
  llvm::raw_string_ostream os(dict);
  os << "{'descr': '" << descrFor(array.type)
     << "', 'fortran_order': False, 'shape': (";
  llvm::interleave(array.shape, os, ", ");
  if (array.shape.size() == 1)
    os << ',';
  os << "), }";
  if (!array.shape.empty())
    dict.append(kGrowthAxisMaxDigits - std::to_string(array.shape[0]).size(),
                ' ');

  // Pad with spaces and a newline to a 64-byte boundary (a full 64 bytes of
  // padding when already aligned, as numpy does).
  unsigned major = 1, lengthBytes = 2;
  auto paddedLength = [&] {
    size_t used = kMagic.size() + 2 + lengthBytes + dict.size() + 1;
    return dict.size() + 1 + (kHeaderAlign - used % kHeaderAlign);
  };
  if (paddedLength() > 0xffff) {
    major = 2;
    lengthBytes = 4;
  }
  size_t headerLength = paddedLength();
  dict.append(headerLength - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::error_code ec;
  llvm::raw_fd_ostream file(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, path + ": " + ec.message());
  file << kMagic << char(major) << char(0);
  for (unsigned i = 0; i < lengthBytes; ++i)
    file << char((headerLength >> (8 * i)) & 0xff);
  file << dict;
  file.write(array.data.data(), array.data.size());
  file.close();
  if (file.has_error()) {
    ec = file.error();
    file.clear_error();
    return llvm::createStringError(ec, path + ": " + ec.message());
  }
  return llvm::Error::success();
}
