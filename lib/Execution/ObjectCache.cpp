//===- ObjectCache.cpp - JIT-compiled objects kept on disk ----------------===//

#include "linfuse/Execution/ObjectCache.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Target/LLVMIR/ModuleTranslation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <vector>

using namespace mlir;
using namespace mlir::linfuse;

/// Starts every entry; the format's version is part of it.
static constexpr llvm::StringLiteral kMagic = "LNFOBJ01";
static constexpr size_t kHashBytes = 32;
/// Entries kept (objects of a few tens of KB: ~100-200 MB); beyond, the
/// least recently used quarter goes.
static constexpr size_t kMaxEntries = 4096;

namespace {
/// A stream that hashes what is written to it, so that a module is hashed
/// as it prints, never held as one string.
class HashingStream : public llvm::raw_ostream {
public:
  HashingStream() { SetBuffered(); }
  ~HashingStream() override { flush(); }
  std::string hex() {
    flush();
    return llvm::toHex(hasher.final(), /*LowerCase=*/true);
  }

private:
  void write_impl(const char *data, size_t size) override {
    hasher.update(llvm::StringRef(data, size));
    written += size;
  }
  uint64_t current_pos() const override { return written; }

  llvm::BLAKE3 hasher;
  uint64_t written = 0;
};
} // namespace

/// The file holding `code`, by path, size and time: a rebuilt compiler
/// (this library, or the tool or Python extension it is linked into) or an
/// upgraded libLLVM / libMLIR never reads its predecessor's objects.
static std::string fileIdentity(const void *code) {
  Dl_info info;
  if (!dladdr(code, &info) || !info.dli_fname)
    return "unknown";
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(info.dli_fname, status))
    return info.dli_fname;
  return std::string(info.dli_fname) + ":" + std::to_string(status.getSize()) +
         ":" +
         std::to_string(
             status.getLastModificationTime().time_since_epoch().count());
}

void mlir::linfuse::makeNamesDeterministic(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  llvm::DenseMap<Attribute, Attribute> renamed;
  unsigned next = 0;
  for (auto global : module.getOps<LLVM::GlobalOp>()) {
    if (global.getLinkage() != LLVM::Linkage::Private &&
        global.getLinkage() != LLVM::Linkage::Internal)
      continue;
    auto name =
        StringAttr::get(ctx, "__linfuse_private_" + llvm::Twine(next++));
    renamed[FlatSymbolRefAttr::get(global.getSymNameAttr())] =
        FlatSymbolRefAttr::get(name);
    global.setSymNameAttr(name);
  }
  AttrTypeReplacer replacer;
  // Every reference to a renamed global (llvm.mlir.addressof, and any
  // other attribute that names one).
  replacer.addReplacement(
      [&](FlatSymbolRefAttr ref) -> std::optional<Attribute> {
        if (Attribute to = renamed.lookup(ref))
          return to;
        return std::nullopt;
      });
  // The weights folded at compile time below the size bound as data are
  // `dense_resource<linfuse_weight_N>`, N counted across the process: the
  // same bytes as dense elements. (Byte-sized elements only: i1 elements
  // are packed differently in the two forms; such a blob keeps its name.)
  replacer.addReplacement(
      [](DenseResourceElementsAttr attr) -> std::optional<Attribute> {
        AsmResourceBlob *blob = attr.getRawHandle().getBlob();
        if (!blob || attr.getType().getElementTypeBitWidth() % 8 != 0)
          return std::nullopt;
        return DenseElementsAttr::getFromRawBuffer(attr.getType(),
                                                   blob->getData());
      });
  replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true);
}

std::string ObjectCache::key(ModuleOp module, const llvm::TargetMachine &host,
                             llvm::StringRef salt, bool withLocations) {
  static const std::string compiler =
      fileIdentity(reinterpret_cast<const void *>(&fileIdentity)) + '\0' +
      fileIdentity(reinterpret_cast<const void *>(&llvm::sys::getHostCPUName)) +
      '\0' +
      fileIdentity(reinterpret_cast<const void *>(&translateModuleToLLVMIR));
  HashingStream os;
  os << kMagic << '\0' << LLVM_VERSION_STRING << '\0' << compiler << '\0'
     << host.getTargetTriple().str() << '\0' << host.getTargetCPU() << '\0'
     << host.getTargetFeatureString() << '\0' << int(host.getOptLevel()) << '\0'
     << salt << '\0';
  // Everything printed: no elided constants, resources printed (command-line
  // flags of the embedding tool, --mlir-elide-* or --mlir-print-local-scope,
  // could otherwise leave bytes out of the key).
  OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
      .elideLargeResourceString(std::numeric_limits<int64_t>::max())
      .useLocalScope(false)
      .enableDebugInfo(withLocations, /*prettyForm=*/false)
      .assumeVerified();
  module->print(os, flags);
  return os.hex();
}

std::string ObjectCache::path(llvm::StringRef key, llvm::StringRef kind) const {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, key + kind);
  return std::string(p);
}

std::unique_ptr<llvm::MemoryBuffer>
ObjectCache::load(llvm::StringRef key, llvm::StringRef kind) const {
  if (!enabled())
    return nullptr;
  std::string file = path(key, kind);
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return nullptr;
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() > kMagic.size() + kHashBytes && bytes.starts_with(kMagic)) {
    llvm::StringRef hash = bytes.substr(kMagic.size(), kHashBytes);
    llvm::StringRef object = bytes.drop_front(kMagic.size() + kHashBytes);
    auto actual =
        llvm::BLAKE3::hash<kHashBytes>(llvm::arrayRefFromStringRef(object));
    if (hash == llvm::toStringRef(actual)) {
      // Recently used: its modification time orders the eviction.
      int fd;
      if (!llvm::sys::fs::openFileForWrite(file, fd,
                                           llvm::sys::fs::CD_OpenExisting,
                                           llvm::sys::fs::OF_Append)) {
        llvm::sys::fs::setLastAccessAndModificationTime(
            fd, std::chrono::system_clock::now());
        llvm::sys::Process::SafelyCloseFileDescriptor(fd);
      }
      return llvm::MemoryBuffer::getMemBufferCopy(object, file);
    }
  }
  // Damaged (a full disk, a foreign file): compiled and stored again.
  llvm::sys::fs::remove(file);
  return nullptr;
}

std::string ObjectCache::temporaryFile() const {
  // The objects are run: a directory the cache makes is the user's alone.
  if (!enabled() || llvm::sys::fs::create_directories(
                        dir, /*IgnoreExisting=*/true, llvm::sys::fs::owner_all))
    return "";
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "tmp-%%%%%%%%%%%%");
  int fd;
  llvm::SmallString<256> result;
  if (llvm::sys::fs::createUniqueFile(model, fd, result))
    return "";
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  return std::string(result);
}

bool ObjectCache::store(llvm::StringRef key, llvm::StringRef bytes,
                        llvm::StringRef kind) const {
  std::string temporary = temporaryFile();
  if (temporary.empty())
    return false;
  bool written;
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(temporary, ec);
    if (!ec) {
      auto hash =
          llvm::BLAKE3::hash<kHashBytes>(llvm::arrayRefFromStringRef(bytes));
      os << kMagic << llvm::toStringRef(hash) << bytes;
      os.close();
    }
    written = !ec && !os.has_error();
    if (os.has_error())
      os.clear_error();
  }
  // rename() replaces an entry another process wrote meanwhile: the same
  // key, the same object.
  if (!written || llvm::sys::fs::rename(temporary, path(key, kind))) {
    llvm::sys::fs::remove(temporary);
    return false;
  }
  evictLeastRecentlyUsed();
  return true;
}

void ObjectCache::evictLeastRecentlyUsed() const {
  std::vector<std::pair<llvm::sys::TimePoint<>, std::string>> objects;
  std::error_code ec;
  auto anHourAgo = std::chrono::system_clock::now() - std::chrono::hours(1);
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status))
      continue;
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.ends_with(kObject) || name.ends_with(kFunction))
      objects.push_back({status.getLastModificationTime(), it->path()});
    else if (name.starts_with("tmp-") &&
             status.getLastModificationTime() < anHourAgo)
      llvm::sys::fs::remove(it->path()); // a writer that died
  }
  if (objects.size() <= kMaxEntries)
    return;
  llvm::sort(objects);
  for (size_t i = 0; i < objects.size() - kMaxEntries * 3 / 4; ++i)
    llvm::sys::fs::remove(objects[i].second);
}

std::string mlir::linfuse::defaultObjectCacheDirectory() {
  if (const char *use = std::getenv("LINFUSE_JIT_CACHE");
      use && llvm::StringRef(use) == "0")
    return "";
  if (const char *dir = std::getenv("LINFUSE_CACHE_DIR"); dir && *dir)
    return dir;
  llvm::SmallString<256> p;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    p = xdg;
  else if (llvm::sys::path::home_directory(p))
    llvm::sys::path::append(p, ".cache");
  else
    return "";
  llvm::sys::path::append(p, "linfuse");
  return std::string(p);
}

llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>>
mlir::linfuse::linkObject(std::unique_ptr<llvm::MemoryBuffer> object,
                          const llvm::DataLayout &layout,
                          llvm::ArrayRef<ExternalConstant> constants) {
  using namespace llvm::orc;
  // As the ExecutionEngine links what it compiles: RuntimeDyld, section
  // memory of its own, the GDB listener (JIT'ed code in backtraces).
  auto jit =
      LLJITBuilder()
          .setDataLayout(layout)
          .setObjectLinkingLayerCreator(
              [](ExecutionSession &session)
                  -> llvm::Expected<std::unique_ptr<ObjectLayer>> {
                auto layer = std::make_unique<RTDyldObjectLinkingLayer>(
                    session, [](const llvm::MemoryBuffer &) {
                      return std::make_unique<llvm::SectionMemoryManager>();
                    });
                layer->registerJITEventListener(
                    *llvm::JITEventListener::createGDBRegistrationListener());
                if (auto *perf =
                        llvm::JITEventListener::createPerfJITEventListener())
                  layer->registerJITEventListener(*perf);
                return layer;
              })
          .create();
  if (!jit)
    return jit.takeError();
  // A link that fails (an object that passed its hash but does not fit
  // this process) is the caller's error, compiled over: nothing on stderr.
  (*jit)->getExecutionSession().setErrorReporter(
      [](llvm::Error err) { llvm::consumeError(std::move(err)); });
  JITDylib &main = (*jit)->getMainJITDylib();
  auto process = DynamicLibrarySearchGenerator::GetForCurrentProcess(
      layout.getGlobalPrefix());
  if (!process)
    return process.takeError();
  main.addGenerator(std::move(*process));
  SymbolMap symbols;
  for (const ExternalConstant &c : constants)
    symbols[(*jit)->mangleAndIntern(c.symbol)] = {
        ExecutorAddr::fromPtr(c.data.get()), llvm::JITSymbolFlags::Exported};
  if (!symbols.empty())
    if (llvm::Error err = main.define(absoluteSymbols(std::move(symbols))))
      return std::move(err);
  if (llvm::Error err = (*jit)->addObjectFile(std::move(object)))
    return std::move(err);
  return std::move(*jit);
}
